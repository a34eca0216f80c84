// Test-only: a filesystem of one test's own, for checks on free space.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tmpfs mounted for one test (root only). The free space of the shared temporary folder
/// moves while parallel tests write tens of MiB into it, so a reading there can only be
/// compared with a tolerance; here nothing else writes, and an empty tmpfs of `size` bytes
/// reports exactly `size` available (rounded up to whole pages), so readings are exact.
/// Nothing is taken from memory until something is written.
public final class PrivateTmpfs {
    public let path: String
    private var mounted = false

    /// Mounts a tmpfs of `size` bytes at a new folder under the temporary folder.
    public init(size: Int64) throws {
        path = NSTemporaryDirectory() + "glasses-tmpfs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let r = try Self.tool(["mount", "-t", "tmpfs", "-o", "size=\(size),mode=0755", "tmpfs", path])
        guard r.status == 0 else {
            try? FileManager.default.removeItem(atPath: path)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "mount tmpfs at \(path) failed (needs root): \(r)"])
        }
        mounted = true
    }

    deinit { remove() }

    /// Unmounts (lazily if something still holds it) and removes the folder. Safe to call twice.
    public func remove() {
        guard mounted else { return }
        mounted = false
        if (try? Self.tool(["umount", path]))?.status != 0 { _ = try? Self.tool(["umount", "-l", path]) }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Bytes free for writing, as `statvfs` says (`f_bavail × f_frsize`).
    public var availableBytes: Int64 {
        var vfs = statvfs()
        guard statvfs(path, &vfs) == 0 else { return -1 }
        return Int64(vfs.f_bavail) * Int64(vfs.f_frsize)
    }

    /// The page size the kernel rounds a tmpfs to.
    public static var pageSize: Int64 { Int64(sysconf(Int32(_SC_PAGESIZE))) }

    private static func tool(_ arguments: [String]) throws -> ChildResult {
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = (environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin:/usr/bin:/bin"
        return try ChildProcess.run("/usr/bin/env", arguments, environment: environment, timeout: 30)
    }
}
