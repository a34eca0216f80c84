#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call, with the errno and what was being attempted.
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    public var errno: Int32
    /// "open /x/records.sqlite3: No such file or directory".
    public var message: String
    public var description: String { message }

    public init(errno: Int32, _ what: String) {
        self.errno = errno
        self.message = "\(what): \(String(cString: strerror(errno)))"
    }

    public init(message: String, errno: Int32 = 0) {
        self.errno = errno
        self.message = message
    }

    /// True for "no space left" and "quota exceeded".
    public var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}

/// Thin, throwing wrappers over the POSIX calls the store needs (swift-system style:
/// the call, then `errno` turned into an error that says what was attempted).
public enum FileIO {
    /// Retries a call interrupted by a signal.
    @inline(__always)
    static func retrying<T: BinaryInteger>(_ body: () -> T) -> T {
        while true {
            let r = body()
            if r == -1 && errno == EINTR { continue }
            return r
        }
    }

    /// Reads a whole file, refusing more than `limit` bytes.
    public static func readFile(atPath path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = retrying { open(path, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { throw SystemError(errno: errno, "open \(path)") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno: errno, "stat \(path)") }
        if (st.st_mode & S_IFMT) == S_IFDIR { throw SystemError(errno: EISDIR, "read \(path)") }
        var out: [UInt8] = []
        out.reserveCapacity(min(Int(max(st.st_size, 0)), limit) + 1)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { buf in retrying { read(fd, buf.baseAddress, buf.count) } }
            if n < 0 { throw SystemError(errno: errno, "read \(path)") }
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit {
                throw SystemError(message: "read \(path): larger than the \(limit) byte limit", errno: EFBIG)
            }
        }
        return out
    }

    /// Writes `bytes` to `path` through a temporary file, fsync and rename, so a reader
    /// sees the old file or the new one, never a torn one.
    public static func writeFileAtomically(_ bytes: [UInt8], toPath path: String, mode: mode_t = 0o644) throws(SystemError) {
        let tmp = path + ".tmp-\(getpid())"
        let fd = retrying { open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw SystemError(errno: errno, "create \(tmp)") }
        var ok = false
        defer {
            if !ok { unlink(tmp) }
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in retrying { write(fd, buf.baseAddress! + offset, buf.count - offset) } }
            if n < 0 {
                let e = errno
                close(fd)
                throw SystemError(errno: e, "write \(tmp)")
            }
            offset += n
        }
        if fsync(fd) != 0 {
            let e = errno
            close(fd)
            throw SystemError(errno: e, "fsync \(tmp)")
        }
        close(fd)
        try rename(tmp, to: path)
        ok = true
    }

    /// Writes all of `bytes` to an open descriptor (stdout, stderr), retrying short writes
    /// and `EINTR`. Unlike `FileHandle.write(_:)`, which traps when the write fails, this
    /// throws — a terminal that hung up answers `EIO`, and that must not crash the caller.
    public static func writeAll(_ bytes: [UInt8], to fd: Int32) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in
                retrying { write(fd, buf.baseAddress.map { $0 + offset }, buf.count - offset) }
            }
            if n < 0 { throw SystemError(errno: errno, "write to descriptor \(fd)") }
            if n == 0 { throw SystemError(errno: EIO, "write to descriptor \(fd)") }
            offset += n
        }
    }

    /// Starts writing a file range back to disk without waiting (Linux `sync_file_range`),
    /// so a later fsync has little left to do. Elsewhere a no-op.
    public static func startWriteback(_ fd: Int32, from offset: Int64, count: Int64) {
        #if os(Linux)
        _ = glibc_sync_file_range(fd, offset, count, 2 /* SYNC_FILE_RANGE_WRITE */)
        #endif
    }

    /// Flushes every file of the filesystem holding `path` (Linux `syncfs`; `fsync` of
    /// the folder elsewhere, where files are flushed one by one).
    public static func syncFilesystem(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        #if os(Linux)
        guard glibc_syncfs(fd) == 0 else { throw SystemError(errno: errno, "sync the filesystem of \(path)") }
        #else
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
        #endif
    }

    /// fsyncs a folder so the renames in it survive a power cut.
    public static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
    }

    /// `stat`, or nil when nothing is there.
    public static func status(_ path: String) throws(SystemError) -> stat? {
        var st = stat()
        if lstat(path, &st) == 0 { return st }
        if errno == ENOENT || errno == ENOTDIR { return nil }
        throw SystemError(errno: errno, "stat \(path)")
    }

    public static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    public static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    /// Size of a regular file, or nil when it is absent or not a regular file.
    public static func regularFileSize(_ path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// `mkdir -p`.
    public static func createDirectory(_ path: String, mode: mode_t = 0o755) throws(SystemError) {
        if isDirectory(path) { return }
        var prefix = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += (prefix.isEmpty && !path.hasPrefix("/") ? "" : "/") + component
            if mkdir(prefix, mode) != 0 && errno != EEXIST {
                throw SystemError(errno: errno, "create folder \(prefix)")
            }
        }
        guard isDirectory(path) else { throw SystemError(errno: exists(path) ? ENOTDIR : ENOENT, "create folder \(path)") }
    }

    /// Names in a folder (without `.` and `..`); empty when the folder does not exist.
    public static func listDirectory(_ path: String) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else {
            if errno == ENOENT { return [] }
            throw SystemError(errno: errno, "list \(path)")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// `rm -rf` without following symlinks; returns the bytes of regular files removed.
    /// The folder holding `path` is trusted as it is; below it, nothing is followed.
    @discardableResult
    public static func removeTree(_ path: String) throws(SystemError) -> Int64 {
        let (parent, leaf) = split(path)
        return try removeTree(path, below: parent.isEmpty ? "." : parent, leaf: leaf)
    }

    /// `rename`, with its error.
    public static func rename(_ from: String, to: String) throws(SystemError) {
        guard posixRename(from, to) == 0 else { throw SystemError(errno: errno, "rename \(from) to \(to)") }
    }

    // MARK: Inside a boundary (P11)

    /// Creates every missing folder from `root` down to `path`, never following a link
    /// below `root` (each step is an `openat` with `O_DIRECTORY | O_NOFOLLOW`).
    public static func createDirectory(_ path: String, below root: String) throws(SystemError) {
        close(try openDirectory(path, below: root, create: true))
    }

    /// Opens a file below `root` without following any link on the way: every folder
    /// from `root` down is opened `O_DIRECTORY | O_NOFOLLOW`, the file itself `O_NOFOLLOW`.
    /// - Parameter createParents: create missing folders on the way.
    /// - Returns: an open descriptor, owned by the caller.
    public static func openFile(_ path: String, below root: String, flags: Int32, mode: mode_t = 0o644,
                                createParents: Bool = false) throws(SystemError) -> Int32 {
        let (parent, leaf) = split(path)
        let dir = try openDirectory(parent, below: root, create: createParents)
        defer { close(dir) }
        let fd = retrying { openat(dir, leaf, flags | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw refusal(errno, dir: dir, name: leaf, path: path, "open") }
        return fd
    }

    /// `rename` of two paths below `root`, neither of whose folders is reached through a
    /// link (a link at either end is itself renamed or replaced, never followed).
    public static func rename(_ from: String, to: String, below root: String) throws(SystemError) {
        let (fromParent, fromLeaf) = split(from)
        let (toParent, toLeaf) = split(to)
        let fromDir = try openDirectory(fromParent, below: root, create: false)
        defer { close(fromDir) }
        let toDir = try openDirectory(toParent, below: root, create: false)
        defer { close(toDir) }
        guard renameat(fromDir, fromLeaf, toDir, toLeaf) == 0 else {
            throw SystemError(errno: errno, "rename \(from) to \(to)")
        }
    }

    /// `rm -rf path` below `root`: the folders down to `path` are opened without following
    /// links, and the tree is removed through descriptors, so a link anywhere (even one
    /// planted while this runs) is removed, never followed. Returns the bytes freed.
    @discardableResult
    public static func removeTree(_ path: String, below root: String) throws(SystemError) -> Int64 {
        let (parent, leaf) = split(path)
        return try removeTree(path, below: root, parent: parent, leaf: leaf)
    }

    private static func removeTree(_ path: String, below root: String, parent: String, leaf: String) throws(SystemError) -> Int64 {
        let dir: Int32
        do {
            dir = try openDirectory(parent, below: root, create: false)
        } catch where error.errno == ENOENT {
            return 0
        }
        defer { close(dir) }
        return try removeEntry(leaf, in: dir, path: path)
    }

    private static func removeTree(_ path: String, below root: String, leaf: String) throws(SystemError) -> Int64 {
        try removeTree(path, below: root, parent: root, leaf: leaf)
    }

    private static func removeEntry(_ name: String, in dir: Int32, path: String) throws(SystemError) -> Int64 {
        var st = stat()
        guard fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else {
            if errno == ENOENT { return 0 }
            throw SystemError(errno: errno, "stat \(path)")
        }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            guard unlinkat(dir, name, 0) == 0 || errno == ENOENT else { throw SystemError(errno: errno, "remove \(path)") }
            return (st.st_mode & S_IFMT) == S_IFREG ? Int64(st.st_blocks) * 512 : 0
        }
        let sub = retrying { openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        if sub < 0 {
            // Replaced by a file or a link since the stat: remove that instead.
            if errno == ENOENT { return 0 }
            guard errno == ELOOP || errno == ENOTDIR else { throw SystemError(errno: errno, "open folder \(path)") }
            guard unlinkat(dir, name, 0) == 0 || errno == ENOENT else { throw SystemError(errno: errno, "remove \(path)") }
            return 0
        }
        defer { close(sub) }
        var freed: Int64 = 0
        for child in try names(inDirectory: sub, path: path) {
            freed += try removeEntry(child, in: sub, path: path + "/" + child)
        }
        guard unlinkat(dir, name, AT_REMOVEDIR) == 0 || errno == ENOENT else {
            throw SystemError(errno: errno, "remove folder \(path)")
        }
        return freed
    }

    /// The names in an open folder (without `.` and `..`); the descriptor stays open.
    private static func names(inDirectory fd: Int32, path: String) throws(SystemError) -> [String] {
        let copy = dup(fd)
        guard copy >= 0 else { throw SystemError(errno: errno, "list \(path)") }
        guard let dir = fdopendir(copy) else {
            let e = errno
            close(copy)
            throw SystemError(errno: e, "list \(path)")
        }
        defer { closedir(dir) }
        rewinddir(dir)
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Opens the folder `path`, which is `root` or below it, walking down from `root`
    /// one `openat(O_DIRECTORY | O_NOFOLLOW)` at a time. `root` itself may be a link
    /// (where the store lives is the user's choice); nothing below it is followed.
    static func openDirectory(_ path: String, below root: String, create: Bool) throws(SystemError) -> Int32 {
        let base = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        let relative: Substring
        if path == base {
            relative = ""
        } else if base == "/" && path.hasPrefix("/") {
            relative = path.dropFirst()
        } else if path.hasPrefix(base + "/") {
            relative = path.dropFirst(base.count + 1)
        } else {
            throw SystemError(message: "\(path) is outside \(base); refusing to touch it", errno: EXDEV)
        }
        var fd = retrying { open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0, errno == ENOENT, create {
            try createDirectory(base)
            fd = retrying { open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        }
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(base)") }
        var reached = base
        for component in relative.split(separator: "/", omittingEmptySubsequences: true) where component != "." {
            let name = String(component)
            reached += "/" + name
            guard name != ".." else {
                close(fd)
                throw SystemError(message: "\(path) climbs out with '..'; refusing to touch it", errno: EPERM)
            }
            var next = retrying { openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if next < 0, errno == ENOENT, create {
                if mkdirat(fd, name, 0o755) != 0 && errno != EEXIST {
                    let e = errno
                    close(fd)
                    throw SystemError(errno: e, "create folder \(reached)")
                }
                next = retrying { openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            }
            if next < 0 {
                let error = refusal(errno, dir: fd, name: name, path: reached, "open folder")
                close(fd)
                throw error
            }
            close(fd)
            fd = next
        }
        return fd
    }

    /// The error for a failed `openat`: a link or a non-folder in the way is named as such.
    private static func refusal(_ code: Int32, dir: Int32, name: String, path: String, _ what: String) -> SystemError {
        var st = stat()
        if (code == ELOOP || code == ENOTDIR || code == EMLINK), fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 {
            if (st.st_mode & S_IFMT) == S_IFLNK {
                return SystemError(message: "\(path) is a symbolic link; links inside the store are never followed. Remove it (any glasses-local command removes the links it finds in the store) and retry", errno: ELOOP)
            }
            if (st.st_mode & S_IFMT) != S_IFDIR && code == ENOTDIR {
                return SystemError(message: "\(path) is not a folder; move it away and retry", errno: ENOTDIR)
            }
        }
        return SystemError(errno: code, "\(what) \(path)")
    }

    /// "/a/b/c" → ("/a/b", "c").
    static func split(_ path: String) -> (parent: String, leaf: String) {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return ("", trimmed) }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        return (parent, String(trimmed[trimmed.index(after: slash)...]))
    }

    /// Size of the regular file at `relative` below `folder`, or nil when it is absent,
    /// not a regular file, or reached through a link (every folder on the way is
    /// `lstat`ed too; `checked` remembers the folders already found to be real).
    public static func regularFileSize(_ relative: String, in folder: String, checked: inout Set<String>) -> Int64? {
        var index = relative.startIndex
        while let slash = relative[index...].firstIndex(of: "/") {
            let prefix = String(relative[..<slash])
            if !checked.contains(prefix) {
                guard isDirectory(folder + "/" + prefix) else { return nil }
                checked.insert(prefix)
            }
            index = relative.index(after: slash)
        }
        return regularFileSize(folder + "/" + relative)
    }

    /// Regular files under `root`, as paths relative to it, sorted bytewise; symlinks and
    /// other special files are reported in `others`.
    public static func walkFiles(_ root: String) throws(SystemError) -> (files: [String], others: [String]) {
        var files: [String] = []
        var others: [String] = []
        func walk(_ relative: String) throws(SystemError) {
            let full = relative.isEmpty ? root : root + "/" + relative
            for name in try listDirectory(full) {
                let rel = relative.isEmpty ? name : relative + "/" + name
                guard let st = try status(root + "/" + rel) else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: try walk(rel)
                case S_IFREG: files.append(rel)
                default: others.append(rel)
                }
            }
        }
        guard isDirectory(root) else { throw SystemError(errno: exists(root) ? ENOTDIR : ENOENT, "read folder \(root)") }
        try walk("")
        return (files.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, others)
    }

    /// The absolute form of `path` against the working directory (no symlink resolution).
    public static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return normalize(path) }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return path }
        let cwd = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return normalize(cwd + "/" + path)
    }

    /// Removes `.` segments, duplicate slashes and trailing slashes (keeps `..`).
    static func normalize(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        return "/" + parts.joined(separator: "/")
    }
}

/// The C `rename`, out of the way of `FileIO.rename`.
private func posixRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }

#if os(Linux)
// glibc declares these only under _GNU_SOURCE, which the Glibc module does not set; they
// are plain exported functions with C-compatible scalar arguments.
@_silgen_name("syncfs")
private func glibc_syncfs(_ fd: Int32) -> Int32

@_silgen_name("sync_file_range")
private func glibc_sync_file_range(_ fd: Int32, _ offset: Int64, _ count: Int64, _ flags: UInt32) -> Int32
#endif
