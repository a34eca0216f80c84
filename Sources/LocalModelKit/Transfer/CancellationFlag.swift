/// A flag another thread sets to stop a transfer within a poll interval.
public final class CancellationFlag: @unchecked Sendable {
    // @unchecked: both fields are read and written only under `lock`. A pthread mutex
    // rather than `Mutex`: ThreadSanitizer sees pthread locks, not the futex behind `Mutex`
    // on Linux, so `swift test --sanitize=thread` can check the race test without false reports.
    private let lock = Threads.Lock()
    private var cancelled = false
    private var waker: CurlWaker?

    /// A flag not set yet.
    public init() {}

    /// Whether ``cancel()`` was called.
    public var isCancelled: Bool { lock.withLock { cancelled } }

    /// Sets the flag and wakes the transfer's poll, so it stops within a poll interval.
    public func cancel() {
        // Woken under the lock: `attach(nil)` waits for it, and the session frees its multi
        // handle only after `attach(nil)` returned, so a wake never reaches a freed handle.
        lock.withLock {
            cancelled = true
            waker?.wake()
        }
    }

    /// Attaches the multi handle a cancel must wake, or detaches it (nil). The owner keeps
    /// the handle alive until its `attach(nil)` has returned.
    func attach(_ waker: CurlWaker?) {
        lock.withLock { self.waker = waker }
    }
}
