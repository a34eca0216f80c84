#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSystem

/// An open file that closes itself: the store's partial files, extracted files, lock files
/// and files being hashed. Every call on it is POSIX through this one type.
package final class FileDescriptor {
    /// What was opened, for messages.
    package let path: String
    private var fd: Int32

    init(adopting fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close() }

    /// Opens `path` (following nothing at the last step: `O_NOFOLLOW` is always added).
    /// - Parameters:
    ///   - path: the file.
    ///   - access: what the descriptor may do with the file.
    ///   - options: how to open it (create, exclusive, truncate, non-blocking).
    ///   - mode: the permissions of a file `options` creates.
    package static func open(_ path: String, _ access: Access, options: OpenOptions = [],
                            mode: mode_t = 0o644) throws(SystemError) -> FileDescriptor {
        let fd = FileIO.retrying { posixOpen(path, access.flags | options.rawValue | O_NOFOLLOW | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw SystemError(errno: errno, "open \(path)") }
        return FileDescriptor(adopting: fd, path: path)
    }

    /// Closes the descriptor (once; later calls do nothing). Also done on `deinit`.
    package func close() {
        if fd >= 0 {
            _ = posixClose(fd)
            fd = -1
        }
    }

    /// Writes all of `bytes`. On a failure, also says how many bytes reached the file first.
    package func write(_ bytes: UnsafeRawBufferPointer) -> (written: Int, error: SystemError?) {
        var written = 0
        while written < bytes.count, let base = bytes.baseAddress {
            let n = FileIO.retrying { posixWrite(fd, base + written, bytes.count - written) }
            if n < 0 { return (written, SystemError(errno: errno, "write \(path)")) }
            written += n
        }
        return (written, nil)
    }

    /// Reads up to `buffer.count` bytes at `offset` (0 at the end of the file).
    package func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(SystemError) -> Int {
        let n = FileIO.retrying { pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
        guard n >= 0 else { throw SystemError(errno: errno, "read \(path)") }
        return n
    }

    /// Reads up to `buffer.count` bytes from the current position.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        let n = FileIO.retrying { posixRead(fd, buffer.baseAddress, buffer.count) }
        guard n >= 0 else { throw SystemError(errno: errno, "read \(path)") }
        return n
    }

    /// Moves the position to `offset` bytes from the start (`lseek`).
    package func seek(to offset: Int64) {
        _ = lseek(fd, off_t(offset), SEEK_SET)
    }

    /// Cuts or extends the file to `size` bytes (`ftruncate`).
    package func truncate(to size: Int64) {
        _ = ftruncate(fd, off_t(size))
    }

    /// `fstat` of what is open.
    package func status() throws(SystemError) -> FileStatus {
        try FileIO.status(of: fd, path: path)
    }

    /// The file's size now.
    package func size() throws(SystemError) -> Int64 {
        try status().size
    }

    /// Throws unless what is open is a regular file (a FIFO, a device, a socket or a folder
    /// someone put where a file was expected), naming what it is and what to do.
    package func requireRegularFile() throws(SystemError) {
        let what: String
        let kind = try status().kind
        switch kind {
        case .regular: return
        case .directory: what = "a folder"
        case .fifo: what = "a FIFO (named pipe)"
        case .characterDevice, .blockDevice: what = "a device"
        case .socket: what = "a socket"
        case .symbolicLink, .other: what = "not a regular file"
        }
        throw SystemError(message: "\(path) is \(what), not a regular file; it is not read (name a regular file)",
                          errno: kind == .directory ? EISDIR : EINVAL)
    }

    /// How many names the file has (more than one: hard-linked, its bytes shared); 1 when
    /// `fstat` fails.
    package func linkCount() -> Int {
        (try? status())?.linkCount ?? 1
    }

    /// Waits until the file's bytes are on the disk.
    package func sync() throws(SystemError) {
        guard fsync(fd) == 0 else { throw SystemError(errno: errno, "fsync \(path)") }
    }

    /// Starts writing a range back to disk without waiting (Linux `sync_file_range`), so a
    /// later `sync()` has little left to do. Elsewhere nothing.
    package func startWriteback(from offset: Int64, count: Int64) {
        _ = glasses_sync_file_range_write(fd, offset, count)
    }

    /// `flock`: true when taken, false when another holder has it and `wait` is false.
    func lock(exclusive: Bool, wait: Bool) throws(SystemError) -> Bool {
        let operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB)
        if FileIO.retrying({ flock(fd, operation) }) == 0 { return true }
        if errno == EWOULDBLOCK && !wait { return false }
        throw SystemError(errno: errno, "lock \(path)")
    }

    /// Releases a `flock` on the open file description itself. Closing alone is not enough:
    /// a child process forked meanwhile (another thread's `posix_spawn`, between its fork and
    /// its exec) holds a copy of the descriptor, and with it the lock, until it execs.
    func unlock() {
        _ = FileIO.retrying { flock(fd, LOCK_UN) }
    }
}

@available(*, unavailable)
extension FileDescriptor: Sendable {}

extension FileDescriptor {
    /// What an open descriptor may do with its file (swift-system's `AccessMode`).
    package enum Access: Sendable {
        /// `O_RDONLY`.
        case readOnly
        /// `O_WRONLY`.
        case writeOnly
        /// `O_RDWR`.
        case readWrite

        var flags: Int32 {
            switch self {
            case .readOnly: return O_RDONLY
            case .writeOnly: return O_WRONLY
            case .readWrite: return O_RDWR
            }
        }
    }

    /// How an open behaves (swift-system's `OpenOptions`). Every open of the file layer
    /// adds `O_NOFOLLOW` (a link at the last step is never followed) and `O_CLOEXEC`.
    package struct OpenOptions: OptionSet, Sendable {
        /// The `O_*` flags.
        package let rawValue: Int32
        /// Options from their `O_*` flags.
        package init(rawValue: Int32) { self.rawValue = rawValue }

        /// Creates the file when nothing is there (`O_CREAT`), with the mode given.
        package static let create = OpenOptions(rawValue: O_CREAT)
        /// With `create`: fails when something is already there, even a dangling link
        /// (`O_EXCL`), so a name someone planted is never written through.
        package static let exclusiveCreate = OpenOptions(rawValue: O_EXCL)
        /// Never waits in the open (`O_NONBLOCK`): a FIFO without a writer would block a
        /// plain open forever.
        package static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
    }
}

// The C calls, out of the way of the methods of the same names.
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 { open(path, flags, mode) }
private func posixClose(_ fd: Int32) -> Int32 { close(fd) }
private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { write(fd, buffer, count) }
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int { read(fd, buffer, count) }
