#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Changing the store without leaving it (P11): every folder below a root is opened with
/// `openat(O_DIRECTORY | O_NOFOLLOW)`, files `O_NOFOLLOW`, and renames and removals go
/// through those descriptors, so a link planted anywhere below the root is never followed.
extension FileIO {
    /// Creates every missing folder from `root` down to `path`, never following a link
    /// below `root` (each step is an `openat` with `O_DIRECTORY | O_NOFOLLOW`).
    public static func createDirectory(_ path: String, below root: String) throws(SystemError) {
        close(try openDirectory(path, below: root, create: true))
    }

    /// Opens a file below `root` without following any link on the way: every folder
    /// from `root` down is opened `O_DIRECTORY | O_NOFOLLOW`, the file itself `O_NOFOLLOW`.
    /// - Parameter createParents: create missing folders on the way.
    /// - Returns: the open file (closed when the value goes away).
    public static func openFile(_ path: String, below root: String, flags: Int32, mode: mode_t = 0o644,
                                createParents: Bool = false) throws(SystemError) -> FileDescriptor {
        let (parent, leaf) = split(path)
        let dir = try openDirectory(parent, below: root, create: createParents)
        defer { close(dir) }
        let fd = retrying { openat(dir, leaf, flags | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw refusal(errno, dir: dir, name: leaf, path: path, "open") }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// `writeFileAtomically` for a file below `root`: the folders down to it are opened
    /// without following links, then the same exclusive temporary file and `renameat`.
    public static func writeFileAtomically(_ bytes: [UInt8], toPath path: String, below root: String,
                                           mode: mode_t = 0o644) throws(SystemError) {
        let (parent, leaf) = split(path)
        let dir = try openDirectory(parent, below: root, create: false)
        defer { close(dir) }
        try writeAtomically(bytes, in: dir, leaf: leaf, path: path, mode: mode, replacing: true)
    }

    /// Opens a lock file, creating it (mode 0644) when absent; a link at `path` is never
    /// followed (`ELOOP`: the caller removes it and retries). Lock files hold no bytes, so
    /// sharing one with another process is their purpose; only `flock` is used on it.
    public static func createOrOpenLockFile(_ path: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open(path, flags: O_RDWR | O_CREAT | O_NONBLOCK)
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

    static func removeTree(_ path: String, below root: String, leaf: String) throws(SystemError) -> Int64 {
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
            // Freed only when this was the file's last name: a hard-linked file's bytes
            // stay with its other names (another model sharing it).
            return (st.st_mode & S_IFMT) == S_IFREG && st.st_nlink <= 1 ? Int64(st.st_blocks) * 512 : 0
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
}
