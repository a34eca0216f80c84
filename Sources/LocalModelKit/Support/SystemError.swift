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
