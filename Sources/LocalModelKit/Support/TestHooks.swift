import Foundation

/// Fault-injection points for the reliability tests (`kill -9` at each phase).
///
/// When the environment variable `GLASSES_LOCAL_HOLD_AT` names a point, the process
/// prints `HOLD <point>` on stderr when it reaches it and then waits forever, so a test
/// can kill it at exactly that instant. Unset (always, outside tests), a point costs one
/// comparison. Points: `download` (first bytes written), `hash` (a resume base hashed),
/// `unpack` (first archive entry written), `install` (tree moved to staging),
/// `after-rename` (renamed into place, not committed), `after-commit` (committed, not
/// cleaned up).
public enum TestHooks {
    static let holdAt: String? = ProcessInfo.processInfo.environment["GLASSES_LOCAL_HOLD_AT"]

    @inline(__always)
    public static func point(_ name: String) {
        guard let holdAt, holdAt == name else { return }
        FileHandle.standardError.write(Data("HOLD \(name)\n".utf8))
        while true { sleep(60) }
    }
}
