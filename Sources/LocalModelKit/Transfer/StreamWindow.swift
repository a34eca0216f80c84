/// How many small files may be in flight as HTTP/2 streams of one connection: TCP's own
/// rule for its window, applied to streams (additive increase, multiplicative decrease).
///
/// Every stream of a connection shares its bandwidth, and a server sends small files
/// mostly one after another (nginx writes a file of up to `http2_chunk_size` at once): on a
/// slow link the files at the back of a long queue of streams receive nothing for longer
/// than the stall time and are dropped, however well the link is used. A stall halves the
/// window (to half the streams then in flight), at most once per stall time, since streams
/// that queued on one slow link stall together and are one sign of it; each window's worth
/// of files that arrive without a stall widens it by one again, up to where it started.
struct StreamWindow: Sendable, Equatable {
    /// Where it started, and the most it grows back to.
    let ceiling: Int
    /// Streams allowed in flight now (at least 1).
    private(set) var limit: Int
    private var loweredAt = -Double.infinity
    /// Files that arrived since the last change of `limit`.
    private var arrived = 0

    init(ceiling: Int) {
        self.ceiling = max(1, ceiling)
        limit = self.ceiling
    }

    /// One of `inFlight` streams stalled at `now` (monotonic seconds). Returns whether the
    /// window shrank.
    @discardableResult
    mutating func stalled(inFlight: Int, now: Double, stallTimeout: Double) -> Bool {
        guard limit > 1, now - loweredAt >= stallTimeout else { return false }
        limit = max(1, min(limit, inFlight) / 2)
        loweredAt = now
        arrived = 0
        return true
    }

    /// A stream's file arrived whole, without a stall.
    mutating func arrivedWhole() {
        guard limit < ceiling else { return }
        arrived += 1
        if arrived >= limit {
            limit += 1
            arrived = 0
        }
    }
}
