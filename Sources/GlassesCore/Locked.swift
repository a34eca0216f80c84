#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: what `Synchronization.Mutex` does, in a form
/// ThreadSanitizer understands. On Linux `Mutex` is a futex the sanitizer cannot see, so
/// every access under it is reported as a race and a sanitizer run proves nothing; pthread
/// locks are intercepted, so `Scripts/test --sanitize thread` checks the real ordering.
/// The seam's lock (the engine has its own in `LocalModelKit`: the seam depends on nothing).
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched between pthread_mutex_lock and _unlock.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value

    init(_ value: Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock.
    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
