import Testing
import GlassesTestSupport
@testable import LocalModelKit

/// `StreamWindow`: how many small files go as HTTP/2 streams of one connection after stalls.
@Suite("HTTP/2 streams after a stall (StreamWindow)", .networkGuard)
struct StreamWindowTests {
    @Test("a stall halves the streams then in flight, once per stall time; never under one")
    func stallsHalveOncePerStallTime() {
        var window = StreamWindow(ceiling: 100)
        #expect(window.limit == 100)
        // 64 in flight (fewer files than the ceiling): half of those, not of 100.
        var shrank = window.stalled(inFlight: 64, now: 10, stallTimeout: 30)
        #expect(shrank && window.limit == 32)
        // The other streams that stalled with it, and any stall within the stall time, are
        // the same sign of the same slow link.
        for i in 1...40 {
            shrank = window.stalled(inFlight: 64 - i, now: 10 + Double(i) * 0.5, stallTimeout: 30)
            #expect(!shrank)
        }
        #expect(window.limit == 32)
        // A stall time later: halved again, from the limit (fewer than it may be in flight).
        shrank = window.stalled(inFlight: 40, now: 40, stallTimeout: 30)
        #expect(shrank && window.limit == 16)
        var now = 40.0
        while window.limit > 1 {
            now += 30
            let before = window.limit
            shrank = window.stalled(inFlight: before, now: now, stallTimeout: 30)
            #expect(shrank && window.limit == max(1, before / 2))
        }
        shrank = window.stalled(inFlight: 1, now: now + 30, stallTimeout: 30)
        #expect(!shrank && window.limit == 1, "one stream is the least")
    }

    @Test("files that arrive widen it by one per window's worth, back up to where it started and no further")
    func arrivalsWidenItBackToTheCeiling() {
        var window = StreamWindow(ceiling: 8)
        window.stalled(inFlight: 8, now: 0, stallTimeout: 1)
        #expect(window.limit == 4)
        for _ in 0..<3 { window.arrivedWhole() }
        #expect(window.limit == 4, "three arrivals are less than a window of four")
        window.arrivedWhole()
        #expect(window.limit == 5)
        for _ in 0..<5 { window.arrivedWhole() }
        #expect(window.limit == 6)
        for _ in 0..<100 { window.arrivedWhole() }
        #expect(window.limit == 8, "never past the ceiling")
        // A stall after the growth starts the count again.
        window.stalled(inFlight: 8, now: 5, stallTimeout: 1)
        #expect(window.limit == 4)
        for _ in 0..<3 { window.arrivedWhole() }
        #expect(window.limit == 4)
    }

    @Test("a window with no streams to give (the session's ceiling of one) stays at one")
    func ceilingOfOne() {
        var window = StreamWindow(ceiling: 0)
        #expect(window.ceiling == 1 && window.limit == 1)
        let shrank = window.stalled(inFlight: 5, now: 100, stallTimeout: 1)
        #expect(!shrank)
        window.arrivedWhole()
        #expect(window.limit == 1)
    }
}
