#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a folder really is: by device and inode, so a link, a bind mount or `..` in a
/// path is seen through (`mirror` uses it never to write into the store).
extension FileIO {
    /// The identity of the folder at `path` (links on the way followed: where it really
    /// is), or nil when nothing is there.
    package static func directoryIdentity(_ path: String) throws(SystemError) -> FileIdentity? {
        let fd = retrying { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        if fd < 0 && errno == ENOENT { return nil }
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        return try status(of: fd, path: path).identity
    }

    /// Whether the folder at `path` (or, while it does not exist yet, the nearest folder
    /// above it that does) is `folder` or lies anywhere below it. Walks up from the open
    /// folder with `openat(fd, "..")` to `/`, comparing device and inode at each step, so
    /// a link, a bind mount or `..` in `path` is seen through where comparing strings
    /// would see nothing.
    package static func isWithin(_ path: String, folder: FileIdentity) throws(SystemError) -> Bool {
        var candidate = path
        var fd = retrying { open(candidate, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        while fd < 0 {
            guard errno == ENOENT || errno == ENOTDIR, candidate != "/", !candidate.isEmpty else {
                throw SystemError(errno: errno, "open folder \(candidate)")
            }
            candidate = split(candidate).parent
            if candidate.isEmpty { candidate = "." }
            fd = retrying { open(candidate, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        }
        defer { close(fd) }
        var here = try status(of: fd, path: candidate).identity
        // Bounded: a filesystem whose ".." never reaches "/" must not loop forever.
        for _ in 0..<4096 {
            if here == folder { return true }
            let up = retrying { openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
            guard up >= 0 else { throw SystemError(errno: errno, "open the folder above \(candidate)") }
            close(fd)
            fd = up
            let above = try status(of: fd, path: "a folder above \(candidate)").identity
            // "/" is its own parent.
            if above == here { return false }
            here = above
        }
        throw SystemError(message: "the folders above \(candidate) never reach '/'", errno: ELOOP)
    }
}
