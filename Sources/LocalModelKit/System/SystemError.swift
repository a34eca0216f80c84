#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed system call, with the errno and what was being attempted.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `errno` (0 for an error that did not come from a system call).
    package var errno: Int32
    /// "open /x/records.sqlite3: No such file or directory".
    package var message: String
    /// The ``message``.
    package var description: String { message }

    /// A failure of the call `what` ("open /x/records.sqlite3"), with `strerror`'s words.
    package init(errno: Int32, _ what: String) {
        self.errno = errno
        self.message = "\(what): \(String(cString: strerror(errno)))"
    }

    /// A failure described in full by `message`.
    package init(message: String, errno: Int32 = 0) {
        self.errno = errno
        self.message = message
    }

    /// True for "no space left" and "quota exceeded".
    package var isOutOfSpace: Bool { errno == ENOSPC || errno == EDQUOT }
}

/// What a failure's errno means, by name: callers outside the file layer ask these and
/// never compare errno values themselves.
extension SystemError {
    /// Nothing is at the path (`ENOENT`).
    package var isNotFound: Bool { errno == ENOENT }

    /// Something on the way that must be a folder is not one (`ENOTDIR`).
    package var isNotAFolder: Bool { errno == ENOTDIR }

    /// A symbolic link stands where the file layer never follows one (`ELOOP`: an
    /// `O_NOFOLLOW` open met a link).
    package var isLink: Bool { errno == ELOOP }

    /// The permission bits refuse it (`EACCES`).
    package var isAccessDenied: Bool { errno == EACCES }

    /// The filesystem is mounted read-only (`EROFS`).
    package var isReadOnlyFileSystem: Bool { errno == EROFS }

    /// This user may not do it here, whatever the reason: the permission bits (`EACCES`),
    /// a rule of the system (`EPERM`), or a read-only filesystem (`EROFS`).
    package var isPermissionDenied: Bool { errno == EACCES || errno == EPERM || errno == EROFS }

    /// The same failure, said as a failed attempt to do `what` ("open lock file /x: Permission
    /// denied"), for a caller that knows better what was being done.
    package func attempting(_ what: String) -> SystemError { SystemError(errno: errno, what) }

    /// A failure that says `message` and means "not a folder" (`ENOTDIR`).
    package static func notAFolder(_ message: String) -> SystemError { SystemError(message: message, errno: ENOTDIR) }

    /// A failure that says `message` and means "out of memory" (`ENOMEM`).
    package static func outOfMemory(_ message: String) -> SystemError { SystemError(message: message, errno: ENOMEM) }
}
