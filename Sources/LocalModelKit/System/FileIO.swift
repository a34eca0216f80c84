#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSystem

/// The file system: thin, throwing wrappers over the POSIX calls the store needs
/// (swift-system style: the call, then `errno` turned into an error that says what was
/// attempted). Callers get values (`FileStatus`, `FileKind`, `FileIdentity`), named
/// errors (`SystemError.isNotFound`…) and named open modes (`FileDescriptor.Access`,
/// `OpenOptions`), never `st_mode`, `errno` values or `O_*` flags.
///
/// This file: whole files (reading one someone named, writing one atomically), syncing,
/// and `stat`. Beside it: `FileIO+Folders` (paths and folders as the caller names them),
/// `FileIO+Paths` (path strings), `FileIO+Boundary` (changing a tree without leaving its
/// root), `FileIO+LinkOrCopy` and `FileIO+FolderIdentity`. The process, its signals,
/// threads and clocks are `ProcessEnvironment`, `Signals`, `Threads` and `SystemClock`.
package enum FileIO {
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
    package static func readFile(atPath path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let file = try openForReading(path)
        return try readToEnd(path: path, limit: limit, size: try file.size()) { buffer throws(SystemError) in try file.read(into: buffer) }
    }

    /// Reads with `read` to the end, refusing more than `limit` bytes. With the file's `size`
    /// the bytes go straight into one buffer of that size and one byte more (to see it end),
    /// its pages made in one call when it is big (a catalog of 5,000 models is 9.5 MB), not
    /// regrown and copied a chunk at a time; what comes past it (a file that grew) is read in
    /// chunks, as everything is without a size.
    private static func readToEnd(path: String, limit: Int, size: Int64?,
                                  read: (UnsafeMutableRawBufferPointer) throws(SystemError) -> Int) throws(SystemError) -> [UInt8] {
        var out: [UInt8] = []
        if let size {
            let capacity = min(Int(clamping: max(size, 0)), limit) + 1
            var failure: SystemError?
            out = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
                count = 0
                let raw = UnsafeMutableRawBufferPointer(buffer)
                if capacity >= 1 << 20 { prefault(raw) }
                while count < capacity {
                    do throws(SystemError) {
                        let n = try read(UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
                        if n == 0 { return }
                        count += n
                    } catch {
                        failure = error
                        return
                    }
                }
            }
            if let failure { throw failure }
            // Ended before filling the buffer: that is the whole file.
            if out.count < capacity { return out }
            if out.count > limit { throw SystemError(message: "read \(path): larger than the \(limit) byte limit", errno: EFBIG) }
        }
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer { chunk.deallocate() }
        while true {
            let n = try read(chunk)
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw SystemError(message: "read \(path): larger than the \(limit) byte limit", errno: EFBIG) }
        }
    }

    /// How long a pipe named on the command line may take to deliver all of its bytes.
    package static let namedInputSeconds: Double = 30

    /// Reads what a user named explicitly as an input (`--catalog FILE`, `catalog validate`,
    /// `catalog verify`/`sign`): a regular file as `readFile` does; also a pipe (`<(…)`, a
    /// FIFO) and `-` for standard input, read up to `limit` bytes and for at most `seconds`
    /// in all (never waiting longer on a writer that does not finish). A folder, a device or
    /// a socket is refused, as are files found by scanning a folder (those use `readFile`).
    package static func readNamedInput(_ path: String, limit: Int, seconds: Double = namedInputSeconds) throws(SystemError) -> [UInt8] {
        if path == "-" {
            guard isatty(0) == 0 else {
                throw SystemError(message: "read standard input: it is a terminal; pipe the file in (… | glasses-local … -) or name the file", errno: ENOTTY)
            }
            let status = try FileIO.status(of: 0, path: "standard input")
            if status.kind == .regular { return try readAll(0, path: "standard input", limit: limit) }
            guard status.kind == .fifo || status.kind == .socket else {
                throw SystemError(message: "read standard input: it is a \(status.kind), not a file or a pipe", errno: EINVAL)
            }
            return try readPipe(0, path: "standard input", limit: limit, seconds: seconds)
        }
        let fd = retrying { open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) }
        guard fd >= 0 else { throw SystemError(errno: errno, "open \(path)") }
        let file = FileDescriptor(adopting: fd, path: path)
        if try file.status().kind == .fifo { return try readPipe(fd, path: path, limit: limit, seconds: seconds) }
        try file.requireRegularFile()
        return try readAll(fd, path: path, limit: limit)
    }

    /// Reads `fd` to its end, refusing more than `limit` bytes.
    private static func readAll(_ fd: Int32, path: String, limit: Int) throws(SystemError) -> [UInt8] {
        try readToEnd(path: path, limit: limit, size: try? FileIO.status(of: fd, path: path).size) { buffer throws(SystemError) in
            let n = retrying { Glibc.read(fd, buffer.baseAddress, buffer.count) }
            if n < 0 { throw SystemError(errno: errno, "read \(path)") }
            return n
        }
    }

    /// Makes the pages of a big new buffer in one call before it is written: a fault per
    /// 4 KiB page as `read` fills it cost more than the copy itself (a 9.5 MB catalog is
    /// 2,300 of them). Only a hint: a kernel without `MADV_POPULATE_WRITE` (before 5.14) faults as before.
    private static func prefault(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        let page = 4096
        let start = (Int(bitPattern: base) + page - 1) & ~(page - 1)
        let end = (Int(bitPattern: base) + buffer.count) & ~(page - 1)
        guard end > start, let first = UnsafeMutableRawPointer(bitPattern: start) else { return }
        _ = madvise(first, end - start, MADV_POPULATE_WRITE)
    }

    /// Reads a pipe to its end (its writers gone), waiting with `poll` for at most `seconds`
    /// in all; never more than `limit` bytes.
    private static func readPipe(_ fd: Int32, path: String, limit: Int, seconds: Double) throws(SystemError) -> [UInt8] {
        let deadline = monotonicSeconds() + seconds
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let left = deadline - monotonicSeconds()
            guard left > 0 else {
                throw SystemError(message: "read \(path): the pipe did not end within \(Int(seconds)) s (\(out.count) bytes so far); is its writer still running?", errno: ETIMEDOUT)
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(min(left * 1000, 60_000).rounded(.up)))
            if ready < 0 {
                if errno == EINTR { continue }
                throw SystemError(errno: errno, "poll \(path)")
            }
            if ready == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { buffer in read(fd, buffer.baseAddress, buffer.count) }
            if n == 0 { return out }
            if n < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw SystemError(errno: errno, "read \(path)")
            }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw SystemError(message: "read \(path): larger than the \(limit) byte limit", errno: EFBIG) }
        }
    }

    /// Opens a path someone named for reading without ever waiting on it: `O_NONBLOCK`
    /// (a FIFO with no writer would block a plain open forever), then `fstat` of what was
    /// opened, which must be a regular file. Links in the path are followed: the caller
    /// named it. (Paths inside the store go through `openFile(_:below:_:options:)` instead.)
    package static func openForReading(_ path: String) throws(SystemError) -> FileDescriptor {
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
    package static func writeFileAtomically(_ bytes: [UInt8], toPath path: String, mode: mode_t = 0o644,
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

    /// Whether `name` is one `createTemporary` makes (`.leaf.tmp-<base 36>`), or a file
    /// SQLite keeps beside one (`-wal`, `-shm`, `-journal`): what an atomic write leaves
    /// behind when its process dies before the rename or link.
    package static func isTemporaryName(_ name: String) -> Bool {
        var stem = Substring(name)
        for suffix in ["-wal", "-shm", "-journal"] where stem.hasSuffix(suffix) {
            stem = stem.dropLast(suffix.count)
            break
        }
        guard stem.hasPrefix("."), let dash = stem.lastIndex(of: "-") else { return false }
        let head = stem[..<dash], random = stem[stem.index(after: dash)...]
        // `.` + a leaf of at least one character + `.tmp`.
        guard head.hasSuffix(".tmp"), head.count > 5 else { return false }
        return (1...13).contains(random.count) && random.allSatisfy { ("0"..."9").contains($0) || ("a"..."z").contains($0) }
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

    /// A new, empty file beside `path` under a random name (`createTemporary`: exclusive,
    /// never through a link), closed; its path. For a file another library builds by name
    /// before `publishExclusively` puts it in place.
    static func createTemporaryFile(beside path: String, mode: mode_t = 0o644) throws(SystemError) -> String {
        let (parent, leaf) = split(path)
        let folder = parent.isEmpty ? "." : parent
        let dir = retrying { open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard dir >= 0 else { throw SystemError(errno: errno, "open folder \(folder)") }
        defer { close(dir) }
        let (file, name) = try createTemporary(in: dir, near: leaf, path: path, mode: mode)
        file.close()
        return parent.isEmpty ? name : parent + "/" + name
    }

    /// Puts a finished file in place as `path` the way `writeFileAtomically(replacing: false)`
    /// does: fsync of the file, `linkat` (never over anything at `path`), the temporary name
    /// removed, fsync of the folder. `temporary` must be in the folder of `path`.
    /// - Returns: false, with nothing changed at `path` and `temporary` removed, when
    ///   something was already there (`EEXIST`).
    static func publishExclusively(_ temporary: String, as path: String) throws(SystemError) -> Bool {
        let (parent, leaf) = split(path)
        let folder = parent.isEmpty ? "." : parent
        let dir = retrying { open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard dir >= 0 else { throw SystemError(errno: errno, "open folder \(folder)") }
        defer { close(dir) }
        let name = split(temporary).leaf
        var linked = false
        defer { if !linked { _ = unlinkat(dir, name, 0) } }
        let fd = retrying { openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard fd >= 0 else { throw SystemError(errno: errno, "open \(temporary)") }
        try FileDescriptor(adopting: fd, path: temporary).sync()
        guard linkat(dir, name, dir, leaf, 0) == 0 else {
            if errno == EEXIST { return false }
            throw SystemError(errno: errno, "create \(path)")
        }
        linked = true
        // The temporary name goes before the folder's fsync, so that both changes are durable.
        _ = unlinkat(dir, name, 0)
        guard fsync(dir) == 0 else { throw SystemError(errno: errno, "fsync folder \(folder)") }
        return true
    }

    /// Flushes every file of the filesystem holding `path` (Linux `syncfs`; `fsync` of
    /// the folder elsewhere, where files are flushed one by one).
    package static func syncFilesystem(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        if glasses_syncfs(fd) == 0 { return }
        guard errno == ENOSYS else { throw SystemError(errno: errno, "sync the filesystem of \(path)") }
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
    }

    /// fsyncs a folder so the renames in it survive a power cut.
    package static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(errno: errno, "open folder \(path)") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync folder \(path)") }
    }

    // MARK: What is at a path

    /// `lstat`: what stands at `path` itself (a link is reported, never followed), or nil
    /// when nothing is there.
    package static func status(_ path: String) throws(SystemError) -> FileStatus? {
        var st = stat()
        if lstat(path, &st) == 0 { return FileStatus(st) }
        if errno == ENOENT || errno == ENOTDIR { return nil }
        throw SystemError(errno: errno, "stat \(path)")
    }

    /// `stat`: what `path` leads to, links followed (a user's own files outside the store,
    /// such as `~/.netrc`, which a dotfile manager may link); nil when nothing is there.
    package static func statusFollowingLinks(_ path: String) throws(SystemError) -> FileStatus? {
        var st = stat()
        if stat(path, &st) == 0 { return FileStatus(st) }
        if errno == ENOENT || errno == ENOTDIR { return nil }
        throw SystemError(errno: errno, "stat \(path)")
    }

    /// `fstat` of an open descriptor; `path` names it in the error.
    static func status(of fd: Int32, path: String) throws(SystemError) -> FileStatus {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw SystemError(errno: errno, "stat \(path)") }
        return FileStatus(st)
    }

    /// `fstatat` of `name` in the open folder `dir`, a link not followed; nil when nothing
    /// is there (`ENOENT`). `path` names it in the error.
    static func status(at name: String, in dir: Int32, path: String) throws(SystemError) -> FileStatus? {
        var st = stat()
        if fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 { return FileStatus(st) }
        if errno == ENOENT { return nil }
        throw SystemError(errno: errno, "stat \(path)")
    }
}
