#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSystem

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

    /// Reads a whole file someone named (a flag, the environment, a folder of keys),
    /// refusing more than `limit` bytes. The open never waits: it is non-blocking, and what
    /// it opened must be a regular file (`fstat` after the open, so nothing can be swapped
    /// in between); a FIFO, a device or a socket is refused with `ENOTSUP`-style errors
    /// instead of being waited on. `/proc` and `/sys` files are regular files and read as usual.
    public static func readFile(atPath path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let file = try openForReading(path)
        var out: [UInt8] = []
        out.reserveCapacity(min(Int(clamping: max(try file.size(), 0)), limit) + 1)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = try file.read(into: chunk)
            if n == 0 { break }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit {
                throw SystemError(message: "read \(path): larger than the \(limit) byte limit", errno: EFBIG)
            }
        }
        return out
    }

    /// Opens a path someone named for reading without ever waiting on it: `O_NONBLOCK`
    /// (a FIFO with no writer would block a plain open forever), then `fstat` of what was
    /// opened, which must be a regular file. Links in the path are followed: the caller
    /// named it. (Paths inside the store go through `openFile(_:below:)` instead.)
    public static func openForReading(_ path: String) throws(SystemError) -> FileDescriptor {
        let fd = retrying { open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) }
        guard fd >= 0 else { throw SystemError(errno: errno, "open \(path)") }
        let file = FileDescriptor(adopting: fd, path: path)
        try file.requireRegularFile()
        return file
    }

    /// Writes `bytes` to `path` through a temporary file, fsync and rename, so a reader
    /// sees the old file or the new one, never a torn one. The temporary file has a random
    /// name and is created exclusively beside `path` (`O_CREAT | O_EXCL | O_NOFOLLOW`,
    /// `mode` set at creation, relative to the open folder), so nothing planted at a
    /// predictable name can receive the bytes; `rename` replaces whatever is at `path`
    /// (a link there is replaced, never followed). With `replacing` false, an existing
    /// `path` (even a dangling link) is never replaced: the error is `EEXIST`.
    /// The folder holding `path` is the caller's to trust; inside the store use
    /// `writeFileAtomically(_:toPath:below:)`.
    public static func writeFileAtomically(_ bytes: [UInt8], toPath path: String, mode: mode_t = 0o644,
                                           replacing: Bool = true) throws(SystemError) {
        let (parent, leaf) = split(path)
        let folder = parent.isEmpty ? "." : parent
        let dir = retrying { open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard dir >= 0 else { throw SystemError(errno: errno, "open folder \(folder)") }
        defer { close(dir) }
        try writeAtomically(bytes, in: dir, leaf: leaf, path: path, mode: mode, replacing: replacing)
    }

    /// The atomic write into an open folder: exclusive random temporary name, write, fsync,
    /// `renameat` (or `linkat` when not `replacing`), fsync of the folder.
    static func writeAtomically(_ bytes: [UInt8], in dir: Int32, leaf: String, path: String, mode: mode_t,
                                replacing: Bool) throws(SystemError) {
        let (file, temporary) = try createTemporary(in: dir, near: leaf, path: path, mode: mode)
        var done = false
        defer { if !done { _ = unlinkat(dir, temporary, 0) } }
        let written = bytes.withUnsafeBytes { file.write($0) }
        if let failure = written.error { throw failure }
        try file.sync()
        file.close()
        if replacing {
            guard renameat(dir, temporary, dir, leaf) == 0 else { throw SystemError(errno: errno, "rename over \(path)") }
            done = true
        } else {
            guard linkat(dir, temporary, dir, leaf, 0) == 0 else {
                throw SystemError(errno: errno, errno == EEXIST ? "create \(path) (something is already there; it is never replaced)" : "create \(path)")
            }
        }
        _ = fsync(dir)
    }

    /// A new, empty file in the open folder `dir` under a random name beginning with
    /// `.leaf.tmp-`: `O_CREAT | O_EXCL | O_NOFOLLOW`, so a name someone planted is never
    /// opened (another random name is tried instead).
    static func createTemporary(in dir: Int32, near leaf: String, path: String,
                                mode: mode_t) throws(SystemError) -> (FileDescriptor, name: String) {
        var attempts = 0
        while true {
            let name = ".\(leaf.prefix(200)).tmp-\(String(UInt64.random(in: 0 ... .max), radix: 36))"
            let fd = retrying { openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode) }
            if fd >= 0 { return (FileDescriptor(adopting: fd, path: name), name) }
            attempts += 1
            guard errno == EEXIST, attempts < 16 else {
                throw SystemError(errno: errno, "create a temporary file beside \(path)")
            }
        }
    }

    /// Flushes every file of the filesystem holding `path` (Linux `syncfs`; `fsync` of
    /// the folder elsewhere, where files are flushed one by one).
    public static func syncFilesystem(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        if glasses_syncfs(fd) == 0 { return }
        guard errno == ENOSYS else { throw SystemError(errno: errno, "sync the filesystem of \(path)") }
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
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

    // MARK: The filesystem

    /// Free and total bytes of the filesystem holding `path` for this user (`statvfs`),
    /// saturating instead of trapping on what a filesystem may report (P12).
    public static func space(of path: String) throws(SystemError) -> (available: Int64, total: Int64) {
        var vfs = statvfs()
        guard statvfs(path, &vfs) == 0 else { throw SystemError(errno: errno, "read free space of \(path)") }
        let unit = Int64(clamping: vfs.f_frsize != 0 ? vfs.f_frsize : vfs.f_bsize)
        func bytes(_ blocks: some BinaryInteger) -> Int64 {
            let (product, overflow) = Int64(clamping: blocks).multipliedReportingOverflow(by: unit)
            return overflow ? .max : product
        }
        return (bytes(vfs.f_bavail), bytes(vfs.f_blocks))
    }
}

/// The C `rename`, out of the way of `FileIO.rename`.
private func posixRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
