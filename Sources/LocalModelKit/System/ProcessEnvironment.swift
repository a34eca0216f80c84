#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This process and what it was started with: its id, its user's home, its working
/// directory, and its standard streams (whether one is a terminal; writing to one).
package enum ProcessEnvironment {
    /// This process's id.
    package static var processID: Int32 { getpid() }

    /// This user's home folder from the password database (for a process without HOME).
    package static func homeDirectoryFromPasswordDatabase() -> String? {
        guard let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// The home folder of the user named `name` in the password database (`~user`), or nil
    /// when there is no such user. `getpwnam_r`, so threads may ask at once.
    package static func homeDirectory(ofUser name: String) -> String? {
        guard !name.isEmpty, !name.utf8.contains(0) else { return nil }
        var size = 16_384
        let suggested = sysconf(Int32(_SC_GETPW_R_SIZE_MAX))
        if suggested > size, suggested <= 1 << 20 { size = suggested }
        while true {
            var entry = passwd()
            var found: UnsafeMutablePointer<passwd>?
            var buffer = [CChar](repeating: 0, count: size)
            // `pw_dir` points into `buffer`: read it while the buffer is still pinned.
            let (rc, home): (Int32, String?) = buffer.withUnsafeMutableBufferPointer { chars in
                guard let base = chars.baseAddress else { return (ENOMEM, nil) }
                let rc = getpwnam_r(name, &entry, base, chars.count, &found)
                guard rc == 0, found != nil, let dir = entry.pw_dir else { return (rc, nil) }
                return (0, String(cString: dir))
            }
            if rc == ERANGE && size < 1 << 20 {
                size *= 2
                continue
            }
            return home
        }
    }

    /// The working directory, or nil when it cannot be read (removed, or too long).
    static func workingDirectory() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `fd` (1 stdout, 2 stderr) is a terminal.
    package static func isTerminal(_ fd: Int32) -> Bool { isatty(fd) == 1 }

    /// Writes all of `bytes` to an open descriptor (stdout, stderr), retrying short writes
    /// and `EINTR`. Unlike `FileHandle.write(_:)`, which traps when the write fails, this
    /// throws — a terminal that hung up answers `EIO`, and that must not crash the caller.
    package static func writeAll(_ bytes: [UInt8], to fd: Int32) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in
                FileIO.retrying { write(fd, buf.baseAddress.map { $0 + offset }, buf.count - offset) }
            }
            if n < 0 { throw SystemError(errno: errno, "write to descriptor \(fd)") }
            if n == 0 { throw SystemError(errno: EIO, "write to descriptor \(fd)") }
            offset += n
        }
    }
}
