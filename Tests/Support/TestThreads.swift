// Threads of their own for tests that wait: on a child process, a server, a file lock.
import Foundation
import Testing

/// The runner's cooperative pool has one thread per core (two on the CI machine). A test
/// that blocks while a child process runs holds one of them, and every other test, async
/// ones included, queues behind it: the test phase then takes the sum of the waits and the
/// reported durations mean nothing. Tests under `.ownThreads` run on this executor instead,
/// a fixed set of ordinary threads, so their waiting never starves the pool.
public final class WaitingTestExecutor: TaskExecutor, @unchecked Sendable {
    /// Enough for the runner's parallel tests to wait at once; each thread mostly sleeps.
    public static let shared = WaitingTestExecutor(threads: 8)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []   // guarded by `condition`

    init(threads: Int) {
        for index in 0..<threads {
            let thread = Thread { [unowned self] in self.serve() }
            thread.name = "test-wait-\(index)"
            thread.stackSize = 8 << 20
            thread.start()
        }
    }

    private func serve() {
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }
}

/// Runs each test of a suite (and its cases) with `WaitingTestExecutor` as its executor.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(WaitingTestExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// The suite's tests wait (child processes, servers, locks) on threads of their own.
    public static var ownThreads: Self { OwnThreadsTrait() }
}

/// A forked child holds a copy of every descriptor of this process until it `exec`s (even
/// `O_CLOEXEC` ones), and with them any `flock` this process holds: a lock released here
/// stays held for the moment a test elsewhere in the process is spawning a program. Tests
/// that take a lock, release it and expect it free at once run under `.noSpawnsMeanwhile`;
/// every program the tests start is spawned through `SpawnGate.spawn`, which waits for them.
public enum SpawnGate {
    private static let condition = NSCondition()
    private nonisolated(unsafe) static var spawning = 0          // guarded by `condition`
    private nonisolated(unsafe) static var exclusive = false     // guarded by `condition`
    private nonisolated(unsafe) static var waitingExclusive = 0  // guarded by `condition`

    /// Runs `body` (a `Process.run()`, which returns once the child has exec'd) unless a
    /// test that must see no spawn holds the gate.
    public static func spawn<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        while exclusive || waitingExclusive > 0 { condition.wait() }
        spawning += 1
        condition.unlock()
        defer {
            condition.lock()
            spawning -= 1
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }

    static func acquireExclusive() {
        condition.lock()
        waitingExclusive += 1
        while exclusive || spawning > 0 { condition.wait() }
        waitingExclusive -= 1
        exclusive = true
        condition.unlock()
    }

    static func releaseExclusive() {
        condition.lock()
        exclusive = false
        condition.broadcast()
        condition.unlock()
    }
}

/// The test runs while no program is being spawned (it must not spawn one itself).
public struct NoSpawnsMeanwhileTrait: TestTrait, TestScoping {
    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        SpawnGate.acquireExclusive()
        defer { SpawnGate.releaseExclusive() }
        try await function()
    }
}

extension Trait where Self == NoSpawnsMeanwhileTrait {
    /// No program is spawned while the test runs (for in-process `flock` checks).
    public static var noSpawnsMeanwhile: Self { NoSpawnsMeanwhileTrait() }
}
