#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CSystem

/// Threads of this process: starting one, a lock with a condition to wait on, sleeping.
package enum Threads {
    /// A pthread mutex with a condition variable: for the few places that wait for another
    /// thread (the hash worker's queue) or must be visible to ThreadSanitizer (the
    /// cancellation flag). POSIX, so it lives here.
    package final class Lock: @unchecked Sendable {
        // @unchecked: the mutex and condition are only touched through pthread calls, which
        // are made for exactly this.
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

        /// A new, unlocked mutex and its condition.
        package init() {
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }

        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            condition.deallocate()
            mutex.deallocate()
        }

        /// Takes the mutex, waiting for it.
        package func lock() { pthread_mutex_lock(mutex) }
        /// Releases the mutex.
        package func unlock() { pthread_mutex_unlock(mutex) }

        /// Runs `body` holding the lock.
        package func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
            lock()
            defer { unlock() }
            return try body()
        }

        /// Waits for a `broadcast`; call it holding the lock, in a loop over the condition.
        package func wait() { pthread_cond_wait(condition, mutex) }

        /// `wait`, for at most `seconds` (realtime clock); returns on a broadcast, the time
        /// running out, or a spurious wake-up: callers loop over their condition.
        package func wait(seconds: Double) {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let seconds = min(max(seconds, 0), 3600)
            let whole = Int(seconds.rounded(.down))
            var nanos = Int(now.tv_nsec) + Int((seconds - Double(whole)) * 1e9)
            var deadline = timespec(tv_sec: now.tv_sec + whole + nanos / 1_000_000_000, tv_nsec: 0)
            nanos %= 1_000_000_000
            deadline.tv_nsec = nanos
            _ = pthread_cond_timedwait(condition, mutex, &deadline)
        }

        /// Wakes every thread in ``wait()``; call it holding the lock, after changing the condition.
        package func broadcast() { pthread_cond_broadcast(condition) }
    }

    /// Runs `body` on a thread of its own (a download's blocking transfer, the hash worker).
    /// - Parameters:
    ///   - name: the thread's name, as `top -H` and a debugger show it.
    ///   - stackSize: bytes of stack; the transfer's callbacks need little.
    ///   - body: the work; the thread ends when it returns.
    package static func start(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        if !tryStart(name: name, stackSize: stackSize, body) {
            // No thread: run it here rather than never (a process at its thread limit).
            body()
        }
    }

    /// Runs `body` on a thread of its own, or returns false without running it when no
    /// thread can be made (for work that has another way to be done, like the bzip2
    /// decoder's helpers, and would wait forever for itself if run in place).
    static func tryStart(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) -> Bool {
        final class Box: @unchecked Sendable {
            // @unchecked: handed to the new thread once, never shared.
            let name: String
            let body: @Sendable () -> Void
            init(name: String, body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN)))
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        #if os(Linux)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let started = pthread_create(&thread, &attributes, { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            #if os(Linux)
            // Linux limits thread names to 15 bytes.
            glasses_set_thread_name(String(decoding: box.name.utf8.prefix(15), as: UTF8.self))
            #endif
            box.body()
            return nil
        }, box)
        if started != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            return false
        }
        return true
    }

    /// Sleeps this thread for `microseconds`.
    package static func sleep(microseconds: UInt32) { _ = usleep(microseconds) }

    /// Waits forever (a test hook's hold, ended by `kill -9`).
    static func sleepForever() -> Never {
        while true { _ = posixSleep(60) }
    }
}

/// The C `sleep`, out of the way of `Threads.sleep(microseconds:)`.
private func posixSleep(_ seconds: UInt32) -> UInt32 { sleep(seconds) }


/// A value behind a pthread mutex: what `Synchronization.Mutex` does, in a form
/// ThreadSanitizer understands (on Linux `Mutex` is a futex the sanitizer cannot see, so
/// every access under it would be reported as a race). The engine's lock for shared state.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched while `lock` is held.
    private let lock = Threads.Lock()
    private var value: Value

    /// Guards `value`.
    package init(_ value: Value) { self.value = value }

    /// Runs `body` with the value, holding the lock.
    package func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try lock.withLock { () throws(E) -> T in try body(&value) }
    }
}
