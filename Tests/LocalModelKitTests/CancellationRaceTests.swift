import Foundation
import Synchronization
import Testing
@testable import LocalModelKit

/// A cancel from another thread racing a transfer's teardown: the multi handle a cancel
/// wakes must never be freed under it. 1,000 rounds of attach → detach → free while
/// another thread cancels in a tight loop; run it under `swift test --sanitize=thread`
/// (or address) to have the toolchain check every access.
@Suite("Cancellation races teardown")
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
        for _ in 0..<1_000 {
            let multi = try CurlMulti()
            flag.attach(multi.waker)
            // A poll the cancel can wake, as a session's loop does.
            multi.poll(timeoutMs: 0)
            flag.attach(nil)
            withExtendedLifetime(multi) {}
        }
        stop.store(true, ordering: .relaxed)
        #expect(flag.isCancelled)
        #expect(cancels.load(ordering: .relaxed) > 0, "the other thread really cancelled while handles came and went")
    }
}
