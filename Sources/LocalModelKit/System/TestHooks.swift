import FoundationEssentials

/// Fault-injection points for the reliability tests: not API, and off unless the one
/// test-only switch is set.
///
/// `GLASSES_LOCAL_TEST_HOOK=<action>@<point>`:
/// - `hold@<point>`: the process prints `HOLD <point>` on stderr when it reaches the point
///   and then waits forever, so a test can `kill -9` it at exactly that instant;
/// - `pause@<point>`: it prints `PAUSE <point>` and stops itself (`SIGSTOP`); the test
///   changes the world (fills the disk) and sends `SIGCONT`. Only the first time: a point
///   reached again (`download` is reached at every progress tick) then goes on.
///
/// Unset (always, outside tests), a point costs one comparison. Points: `download` (first
/// bytes written), `hash` (a resume base hashed), `unpack` (first archive entry written),
/// `install` (tree moved to staging), `after-rename` (renamed into place, not committed),
/// `after-commit` (committed, not cleaned up), `records-write` (just before `verify`
/// records its result, or `delete` commits after freeing the space), `migrate` (a records
/// database older than this build read its version, before the write lock to migrate it).
enum TestHooks {
    enum Action: String { case hold, pause }

    /// The action and point the switch names, read once.
    static let armed: (action: Action, point: String)? = {
        guard let text = ProcessInfo.processInfo.environment["GLASSES_LOCAL_TEST_HOOK"], let at = text.firstIndex(of: "@"),
              let action = Action(rawValue: String(text[..<at])) else { return nil }
        return (action, String(text[text.index(after: at)...]))
    }()

    /// Whether the process has paused once already.
    private static let paused = Locked(false)

    @inline(__always)
    static func point(_ name: String) {
        guard let armed, armed.point == name else { return }
        switch armed.action {
        case .hold:
            try? ProcessEnvironment.writeAll(Array("HOLD \(name)\n".utf8), to: 2)
            Threads.sleepForever()
        case .pause:
            guard !paused.withLock({ (was: inout Bool) -> Bool in defer { was = true }; return was }) else { return }
            try? ProcessEnvironment.writeAll(Array("PAUSE \(name)\n".utf8), to: 2)
            Signals.stopSelf()
        }
    }
}
