import FoundationEssentials

/// Fault-injection points for the reliability tests.
///
/// - `GLASSES_LOCAL_HOLD_AT=<point>`: the process prints `HOLD <point>` on stderr when it
///   reaches the point and then waits forever, so a test can `kill -9` it at exactly that
///   instant.
/// - `GLASSES_LOCAL_PAUSE_AT=<point>`: the process prints `PAUSE <point>` and stops itself
///   (`SIGSTOP`); the test changes the world (fills the disk) and sends `SIGCONT`.
///
/// Unset (always, outside tests), a point costs one comparison. Points: `download` (first
/// bytes written), `hash` (a resume base hashed), `unpack` (first archive entry written),
/// `install` (tree moved to staging), `after-rename` (renamed into place, not committed),
/// `after-commit` (committed, not cleaned up), `records-write` (just before `verify`
/// records its result, or `delete` commits after freeing the space), `migrate` (a records
/// database older than this build read its version, before the write lock to migrate it).
public enum TestHooks {
    static let holdAt: String? = ProcessInfo.processInfo.environment["GLASSES_LOCAL_HOLD_AT"]
    static let pauseAt: String? = ProcessInfo.processInfo.environment["GLASSES_LOCAL_PAUSE_AT"]

    @inline(__always)
    public static func point(_ name: String) {
        if let holdAt, holdAt == name {
            try? FileIO.writeAll(Array("HOLD \(name)\n".utf8), to: 2)
            FileIO.sleepForever()
        }
        if let pauseAt, pauseAt == name {
            try? FileIO.writeAll(Array("PAUSE \(name)\n".utf8), to: 2)
            FileIO.stopSelf()
        }
    }
}
