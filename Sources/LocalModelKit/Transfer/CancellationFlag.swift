import Synchronization

/// A flag another thread sets to stop a transfer within a poll interval.
public final class CancellationFlag: Sendable {
    private let state = Mutex<(cancelled: Bool, waker: CurlWaker?)>((false, nil))

    public init() {}

    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    public func cancel() {
        // Woken under the lock: `attach(nil)` waits for it, and the session frees its multi
        // handle only after `attach(nil)` returned, so a wake never reaches a freed handle.
        state.withLock { s in
            s.cancelled = true
            s.waker?.wake()
        }
    }

    /// Attaches the multi handle a cancel must wake, or detaches it (nil). The owner keeps
    /// the handle alive until its `attach(nil)` has returned.
    func attach(_ waker: CurlWaker?) {
        state.withLock { $0.waker = waker }
    }
}
