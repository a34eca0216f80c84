#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Paths and folders as the caller names them: the folder holding them is the caller's to
/// trust (inside the store, `FileIO+Boundary` changes nothing through a link).
extension FileIO {
    /// Whether anything (a dangling link too) stands at `path`.
    package static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// Whether a real folder (not a link to one) stands at `path`.
    package static func isDirectory(_ path: String) -> Bool {
        statusIfReadable(path)?.kind == .directory
    }

    /// Size of a regular file, or nil when it is absent or not a regular file.
    package static func regularFileSize(_ path: String) -> Int64? {
        guard let found = statusIfReadable(path), found.kind == .regular else { return nil }
        return found.size
    }

    /// Size of the regular file at `relative` below `folder`, or nil when it is absent,
    /// not a regular file, or reached through a link (every folder on the way is
    /// `lstat`ed too; `checked` remembers the folders already found to be real).
    package static func regularFileSize(_ relative: String, in folder: String, checked: inout Set<String>) -> Int64? {
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

    /// The sizes of the regular files at `relatives` below `folder`, in order, each as
    /// `regularFileSize(_:in:checked:)` gives it (nil: absent, not a regular file, or reached
    /// through a link); nil for them all when `folder` is not a real folder (absent, or a
    /// link). The folder is opened once and each file looked up from it (`fstatat`): one or
    /// two path steps per file, not the whole path again, and no path built per file
    /// (start-up checks every installed file's size, 225 of them in a store of 25 models).
    package static func regularFileSizes(_ relatives: [String], in folder: String) -> [Int64?]? {
        #if os(Linux)
        // O_PATH (Glibc's module shows it as __O_PATH): a handle to look up from, needing no
        // read permission on the folder, as lstat needs none.
        let fd = retrying { open(folder, __O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        #else
        let fd = retrying { open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        #endif
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        func size(_ relative: String, directory: Bool) -> Int64? {
            var st = stat()
            guard fstatat(fd, relative, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
            let kind = FileKind(mode: st.st_mode)
            return kind == (directory ? .directory : .regular) ? Int64(st.st_size) : nil
        }
        var checked = Set<Substring>()
        return relatives.map { relative -> Int64? in
            // Every folder on the way, once each, so that no link is followed to the file.
            var utf8 = relative.utf8[...]
            while let slash = utf8.firstIndex(of: UInt8(ascii: "/")) {
                let prefix = relative[relative.startIndex..<slash]
                if !checked.contains(prefix) {
                    guard size(String(prefix), directory: true) != nil else { return nil }
                    checked.insert(prefix)
                }
                utf8 = utf8[utf8.index(after: slash)...]
            }
            return size(relative, directory: false)
        }
    }

    /// The path with every link resolved (`realpath`): where a file outside the store that
    /// the user pointed at really is (a Hugging Face snapshot's entries are links into its
    /// `blobs/`). Nil when something on the way is missing or unreadable.
    package static func resolvingLinks(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `lstat`, nil on any failure (for the questions above, which have no error to give).
    private static func statusIfReadable(_ path: String) -> FileStatus? {
        var st = stat()
        return lstat(path, &st) == 0 ? FileStatus(st) : nil
    }

    /// `mkdir -p`.
    package static func createDirectory(_ path: String, mode: mode_t = 0o755) throws(SystemError) {
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
    package static func listDirectory(_ path: String) throws(SystemError) -> [String] {
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
    package static func removeTree(_ path: String) throws(SystemError) -> Int64 {
        let (parent, leaf) = split(path)
        return try removeTree(path, below: parent.isEmpty ? "." : parent, leaf: leaf)
    }

    /// `rename`, with its error.
    package static func rename(_ from: String, to: String) throws(SystemError) {
        guard posixRename(from, to) == 0 else { throw SystemError(errno: errno, "rename \(from) to \(to)") }
    }

    /// Regular files under `root`, as paths relative to it, sorted bytewise; symlinks and
    /// other special files are reported in `others`.
    package static func walkFiles(_ root: String) throws(SystemError) -> (files: [String], others: [String]) {
        var files: [String] = []
        var others: [String] = []
        func walk(_ relative: String) throws(SystemError) {
            let full = relative.isEmpty ? root : root + "/" + relative
            for name in try listDirectory(full) {
                let rel = relative.isEmpty ? name : relative + "/" + name
                guard let found = try status(root + "/" + rel) else { continue }
                switch found.kind {
                case .directory: try walk(rel)
                case .regular: files.append(rel)
                default: others.append(rel)
                }
            }
        }
        guard isDirectory(root) else { throw SystemError(errno: exists(root) ? ENOTDIR : ENOENT, "read folder \(root)") }
        try walk("")
        return (files.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }, others)
    }

    /// Free and total bytes of the filesystem holding `path` for this user (`statvfs`),
    /// saturating instead of trapping on what a filesystem may report (P12).
    package static func space(of path: String) throws(SystemError) -> (available: Int64, total: Int64) {
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
