import Foundation
import Synchronization
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// A cancel from another thread racing a transfer's teardown: the multi handle a cancel
/// wakes must never be freed under it. 1,000 rounds of attach → detach → free while
/// another thread cancels in a tight loop; run it under `swift test --sanitize=thread`
/// (or address) to have the toolchain check every access.
@Suite("Cancellation races teardown", .ownThreads, .networkGuard)
struct CancellationRaceTests {
    @Test("cancel() in a tight loop on one thread, attach/detach/free of real multi handles on another, 1,000 rounds")
    func cancelRacesTeardown() throws {
        let flag = CancellationFlag()
        let stop = Atomic<Bool>(false)
        let cancels = Atomic<Int>(0)
        let canceller = Thread {
            while !stop.load(ordering: .relaxed) {
                flag.cancel()
                cancels.add(1, ordering: .relaxed)
            }
        }
        canceller.start()
        defer { stop.store(true, ordering: .relaxed) }
        // A barrier, not a time window: the rounds start once the canceller is running.
        while cancels.load(ordering: .relaxed) == 0 { Thread.sleep(forTimeInterval: 0.001) }
        // Rounds in which a cancel landed while a handle was attached: the race itself. At
        // least 1,000 rounds, and on until 10 of them overlapped (whatever the scheduler did).
        var rounds = 0
        var overlapped = 0
        while rounds < 1_000 || (overlapped < 10 && rounds < 200_000) {
            let multi = try CurlMulti()
            flag.attach(multi.waker)
            let before = cancels.load(ordering: .relaxed)
            // A poll the cancel can wake, as a session's loop does.
            multi.poll(timeoutMs: 0)
            if cancels.load(ordering: .relaxed) != before { overlapped += 1 }
            flag.attach(nil)
            withExtendedLifetime(multi) {}
            rounds += 1
        }
        stop.store(true, ordering: .relaxed)
        // What this test is for is seen by ThreadSanitizer and AddressSanitizer
        // (`Scripts/test --sanitize thread|address` runs it, and CI does): a wake of a freed
        // handle. Here: the race really happened, many times.
        #expect(overlapped >= 10, "cancels landed while a handle was attached in \(overlapped) of \(rounds) rounds")
    }
}

/// The number of connections follows the work.
@Suite("Transfer parallelism", .ownThreads, .networkGuard)
struct TransferParallelismTests {
    static func requests(_ sizes: [Int64]) -> [FileRequest] {
        sizes.enumerated().map { FileRequest(name: "f\($0.offset)", url: "http://127.0.0.1/f", partialPath: "/x/f\($0.offset)",
                                             boundary: "/x", size: $0.element, sha256: nil) }
    }

    @Test("many small files get more connections, a few big ones keep 4, --parallel N is N")
    func parallelism() {
        var policy = TransferPolicy(environment: [:])
        #expect(policy.parallelism(for: Self.requests(Array(repeating: 40_000, count: 358))) == 16, "the voice bundle")
        #expect(policy.parallelism(for: Self.requests(Array(repeating: 40_000, count: 20))) == 8)
        #expect(policy.parallelism(for: Self.requests([4 << 30, 2 << 30, 1 << 20, 11_000])) == 4, "an LLM: a few big files")
        policy.parallelFiles = 2
        policy.adaptiveParallelism = false
        #expect(policy.parallelism(for: Self.requests(Array(repeating: 40_000, count: 358))) == 2)
        policy.adaptiveParallelism = true
        policy.parallelFiles = 24
        #expect(policy.parallelism(for: Self.requests(Array(repeating: 40_000, count: 358))) == 24, "never fewer than asked")
    }
}

@Suite("The shared rate limit", .ownThreads, .networkGuard)
struct RateLimiterTests {
    @Test("the bucket hands out its rate per second, whatever the number of takers, and says when to come back")
    func tokenBucket() {
        let limiter = RateLimiter(bytesPerSecond: 1_000_000, now: 0)
        var granted = 0
        // Four connections offering 16 KiB chunks every millisecond for two seconds.
        for ms in 0..<2000 {
            for _ in 0..<4 where limiter.take(16 * 1024, now: Double(ms) / 1000) { granted += 16 * 1024 }
        }
        #expect(granted >= 1_800_000 && granted <= 2_300_000, "about 2 s × 1 MB/s: \(granted)")
        #expect(limiter.secondsUntilAvailable(now: 2.0) > 0, "spent: come back later")
        #expect(limiter.secondsUntilAvailable(now: 3.0) == 0)
    }
}
