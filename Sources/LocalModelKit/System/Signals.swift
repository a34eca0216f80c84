#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Signals to this process, by name: the ones a download turns into a clean stop, and the
/// dispositions it reads and changes.
package enum Signals {
    /// Ctrl-C (`SIGINT`).
    package static let interrupt: Int32 = SIGINT
    /// A polite request to end (`SIGTERM`).
    package static let terminate: Int32 = SIGTERM
    /// A closed terminal or a dropped ssh session (`SIGHUP`).
    package static let hangup: Int32 = SIGHUP

    /// Whether `signal` is ignored now (a process started under `nohup` ignores SIGHUP).
    package static func isIgnored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        #if os(Linux)
        guard let handler = current.__sigaction_handler.sa_handler else { return false }
        #else
        guard let handler = current.__sigaction_u.__sa_handler else { return false }
        #endif
        return unsafeBitCast(handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }

    /// Ignores `signal`'s default action (a dispatch source then receives it).
    package static func ignore(_ signal: Int32) {
        _ = posixSignal(signal, SIG_IGN)
    }

    /// Stops this process (`SIGSTOP`) until a `SIGCONT` (a test hook's pause).
    static func stopSelf() { _ = raise(SIGSTOP) }
}

/// The C `signal`, out of the way of the parameters named `signal`.
private func posixSignal(_ number: Int32, _ handler: sighandler_t?) -> sighandler_t? { signal(number, handler) }
