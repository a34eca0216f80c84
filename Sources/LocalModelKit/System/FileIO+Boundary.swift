#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a walk below a root refused, or failed at, as a value: each caller says it in its
/// own terms (the store's commands and `mirror` keep to different boundaries).
package enum BoundaryError: Error, Sendable, Equatable {
    /// `path` is a symbolic link; nothing below the root is followed.
    case link(path: String)
    /// `path` is the folder the walk was told never to enter (`mirror`: the store).
    case forbidden(path: String)
    /// `path` stands where a folder is needed and is not one.
    case notAFolder(path: String)
    /// `path` is where a file goes, and a folder or a special file stands there.
    case occupied(path: String)
    /// The file to link or copy could not be opened as a regular file below its own
    /// root (said in the store's terms: that root is the store).
    case source(SystemError)
    /// A system call failed.
    case system(SystemError)

    /// The error as a `SystemError`: a link or the forbidden folder said in the store's
    /// terms (the store's own walks report these so, P11), the others as they are.
    package var systemError: SystemError {
        switch self {
        case .link(let path):
            return SystemError(message: "\(path) is a symbolic link; links inside the store are never followed. Remove it (any glasses-local command removes the links it finds in the store) and retry", errno: ELOOP)
        case .notAFolder(let path):
            return SystemError(message: "\(path) is not a folder; move it away and retry", errno: ENOTDIR)
        case .occupied(let path):
            return SystemError(message: "\(path) is a folder or a special file, not a regular file; move it away and retry", errno: EEXIST)
        case .forbidden(let path):
            return SystemError(message: "\(path) must not be written into; refusing to touch it", errno: EXDEV)
        case .source(let error), .system(let error):
            return error
        }
    }
}

/// Changing the store without leaving it (P11), and writing a mirror without leaving its
/// folder: every folder below a root is opened with `openat(O_DIRECTORY | O_NOFOLLOW)`,
/// files `O_NOFOLLOW`, and links, renames and removals go through those descriptors, so a
/// link planted anywhere below the root is never followed.
extension FileIO {
    /// Creates every missing folder from `root` down to `path`, never following a link
    /// below `root` (each step is an `openat` with `O_DIRECTORY | O_NOFOLLOW`).
    package static func createDirectory(_ path: String, below root: String) throws(SystemError) {
        close(try openDirectory(path, below: root, create: true))
    }

    /// Opens a file below `root` without following any link on the way: every folder
    /// from `root` down is opened `O_DIRECTORY | O_NOFOLLOW`, the file itself `O_NOFOLLOW`.
    /// - Parameters:
    ///   - path: the file, inside `root`.
    ///   - root: the folder the path must stay inside (the store).
    ///   - access: what the descriptor may do with the file.
    ///   - options: `.create` for a file that may be absent, `[.create, .exclusiveCreate]`
    ///     for one that must not exist yet.
    ///   - mode: the permissions of a file created.
    ///   - createParents: create missing folders on the way.
    /// - Returns: the open file (closed when the value goes away).
    package static func openFile(_ path: String, below root: String, _ access: FileDescriptor.Access,
                                options: FileDescriptor.OpenOptions = [], mode: mode_t = 0o644,
                                createParents: Bool = false) throws(SystemError) -> FileDescriptor {
        let (parent, leaf) = split(path)
        let dir = try openDirectory(parent, below: root, create: createParents)
        defer { close(dir) }
        let fd = retrying { openat(dir, leaf, access.flags | options.rawValue | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw refusal(errno, dir: dir, name: leaf, path: path, "open") }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// fsyncs `files` (paths relative to `folder`) and every folder holding them, `folder`
    /// included: a few files made durable one by one, where a filesystem-wide sync would
    /// also wait for everything else written on the disk. Nothing is reached through a
    /// link (the folders from `root` down are opened without following one).
    package static func syncFiles(_ files: [String], in folder: String, below root: String) throws(SystemError) {
        var folders: Set<String> = [folder]
        for relative in files {
            let path = folder + "/" + relative
            try openFile(path, below: root, .readOnly).sync()
            var parent = FileIO.parent(of: path)
            while parent.count > folder.count, folders.insert(parent).inserted { parent = FileIO.parent(of: parent) }
        }
        try syncFolders(folders, below: root)
    }

    /// fsyncs each folder (after entries were added, renamed or removed in it, so that the
    /// change survives a power cut); a folder that does not exist is skipped. Nothing is
    /// reached through a link.
    package static func syncFolders(_ folders: some Sequence<String>, below root: String) throws(SystemError) {
        for path in Set(folders) {
            let dir: Int32
            do { dir = try openDirectory(path, below: root, create: false) } catch where error.isNotFound { continue }
            defer { close(dir) }
            guard fsync(dir) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
        }
    }

    /// `writeFileAtomically` for a file below `root`: the folders down to it are opened
    /// without following links, then the same exclusive temporary file and `renameat`.
    package static func writeFileAtomically(_ bytes: [UInt8], toPath path: String, below root: String,
                                           mode: mode_t = 0o644) throws(SystemError) {
        let (parent, leaf) = split(path)
        let dir = try openDirectory(parent, below: root, create: false)
        defer { close(dir) }
        try writeAtomically(bytes, in: dir, leaf: leaf, path: path, mode: mode, replacing: true)
    }

    /// Opens a lock file, creating it (mode 0644) when absent; a link at `path` is never
    /// followed (`ELOOP`: the caller removes it and retries). Lock files hold no bytes, so
    /// sharing one with another process is their purpose; only `flock` is used on it.
    package static func createOrOpenLockFile(_ path: String) throws(SystemError) -> FileDescriptor {
        try FileDescriptor.open(path, .readWrite, options: [.create, .nonBlocking])
    }

    /// `rename` of two paths below `root`, neither of whose folders is reached through a
    /// link (a link at either end is itself renamed or replaced, never followed).
    package static func rename(_ from: String, to: String, below root: String) throws(SystemError) {
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
    package static func removeTree(_ path: String, below root: String) throws(SystemError) -> Int64 {
        let (parent, leaf) = split(path)
        return try removeTree(path, below: root, parent: parent, leaf: leaf)
    }

    private static func removeTree(_ path: String, below root: String, parent: String, leaf: String) throws(SystemError) -> Int64 {
        let dir: Int32
        do {
            dir = try openDirectory(parent, below: root, create: false)
        } catch where error.isNotFound {
            return 0
        }
        defer { close(dir) }
        return try removeEntry(leaf, in: dir, path: path)
    }

    static func removeTree(_ path: String, below root: String, leaf: String) throws(SystemError) -> Int64 {
        try removeTree(path, below: root, parent: root, leaf: leaf)
    }

    private static func removeEntry(_ name: String, in dir: Int32, path: String) throws(SystemError) -> Int64 {
        guard let found = try status(at: name, in: dir, path: path) else { return 0 }
        guard found.kind == .directory else {
            guard unlinkat(dir, name, 0) == 0 || errno == ENOENT else { throw SystemError(errno: errno, "remove \(path)") }
            // Freed only when this was the file's last name: a hard-linked file's bytes
            // stay with its other names (another model sharing it).
            return found.kind == .regular && found.linkCount <= 1 ? found.allocatedBytes : 0
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
    /// A refusal is said in the store's terms (see `BoundaryError.systemError`).
    static func openDirectory(_ path: String, below root: String, create: Bool) throws(SystemError) -> Int32 {
        do {
            return try walkDown(to: path, below: root, create: create, avoiding: nil)
        } catch {
            throw error.systemError
        }
    }

    /// The walk behind `openDirectory`: opens `path` (`root` or below it) one
    /// `openat(O_DIRECTORY | O_NOFOLLOW)` at a time, creating missing folders with `mkdirat`
    /// when `create`, and checks every folder it opens, `root` included, not to be
    /// `forbidden` (by device and inode, so no spelling of a path reaches it).
    /// - Returns: the open folder; the caller closes it.
    static func walkDown(to path: String, below root: String, create: Bool,
                         avoiding forbidden: FileIdentity?) throws(BoundaryError) -> Int32 {
        let base = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        let relative: Substring
        if path == base {
            relative = ""
        } else if base == "/" && path.hasPrefix("/") {
            relative = path.dropFirst()
        } else if path.hasPrefix(base + "/") {
            relative = path.dropFirst(base.count + 1)
        } else {
            throw .system(SystemError(message: "\(path) is outside \(base); refusing to touch it", errno: EXDEV))
        }
        var fd = retrying { open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0, errno == ENOENT, create {
            do { try createDirectory(base) } catch { throw .system(error) }
            fd = retrying { open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        }
        guard fd >= 0 else { throw .system(SystemError(errno: errno, "open folder \(base)")) }
        var reached = base
        do {
            try refuse(fd, at: reached, ifItIs: forbidden)
        } catch {
            close(fd)
            throw error
        }
        for component in relative.split(separator: "/", omittingEmptySubsequences: true) where component != "." {
            let name = String(component)
            reached += "/" + name
            guard name != ".." else {
                close(fd)
                throw .system(SystemError(message: "\(path) climbs out with '..'; refusing to touch it", errno: EPERM))
            }
            var next = retrying { openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            if next < 0, errno == ENOENT, create {
                if mkdirat(fd, name, 0o755) != 0 && errno != EEXIST {
                    let e = errno
                    close(fd)
                    throw .system(SystemError(errno: e, "create folder \(reached)"))
                }
                next = retrying { openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            }
            if next < 0 {
                let error = classify(errno, dir: fd, name: name, path: reached, "open folder")
                close(fd)
                throw error
            }
            close(fd)
            fd = next
            do {
                try refuse(fd, at: reached, ifItIs: forbidden)
            } catch {
                close(fd)
                throw error
            }
        }
        return fd
    }

    /// Throws `.forbidden` when the open folder `fd` is `forbidden`.
    private static func refuse(_ fd: Int32, at path: String, ifItIs forbidden: FileIdentity?) throws(BoundaryError) {
        guard let forbidden else { return }
        let identity: FileIdentity
        do { identity = try status(of: fd, path: path).identity } catch { throw .system(error) }
        if identity == forbidden { throw .forbidden(path: path) }
    }

    /// The error for a failed `openat`, in the store's terms.
    static func refusal(_ code: Int32, dir: Int32, name: String, path: String, _ what: String) -> SystemError {
        classify(code, dir: dir, name: name, path: path, what).systemError
    }

    /// The error for a failed `openat`: a link or a non-folder in the way is named as such.
    private static func classify(_ code: Int32, dir: Int32, name: String, path: String, _ what: String) -> BoundaryError {
        if code == ELOOP || code == ENOTDIR || code == EMLINK, let found = try? status(at: name, in: dir, path: path) {
            if found.kind == .symbolicLink { return .link(path: path) }
            if found.kind != .directory && code == ENOTDIR { return .notAFolder(path: path) }
        }
        return .system(SystemError(errno: code, "\(what) \(path)"))
    }
}
