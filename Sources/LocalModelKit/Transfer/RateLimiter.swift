/// One byte budget for a whole download (`--rate-limit`), shared by all its connections:
/// a token bucket refilled at `bytesPerSecond`. A connection whose data finds the bucket
/// empty is paused (libcurl stops reading its socket) until tokens are back, so an idle
/// connection's share is never wasted, unlike a fixed per-connection cap.
final class RateLimiter {
    let bytesPerSecond: Double
    /// The most tokens saved up: a quarter second's worth (bursts stay short).
    private let capacity: Double
    private var tokens: Double
    private var last: Double

    init(bytesPerSecond: Int64, now: Double = SystemClock.monotonicSeconds()) {
        self.bytesPerSecond = Double(max(1, bytesPerSecond))
        capacity = max(64 * 1024, self.bytesPerSecond / 4)
        tokens = 0
        last = now
    }

    private func refill(_ now: Double) {
        tokens = min(capacity, tokens + (now - last) * bytesPerSecond)
        last = now
    }

    /// Takes `count` bytes' worth when any tokens are left (a chunk may run the bucket into
    /// debt, which the next refill pays back); false means pause and try again later.
    func take(_ count: Int, now: Double = SystemClock.monotonicSeconds()) -> Bool {
        refill(now)
        guard tokens > 0 else { return false }
        tokens -= Double(count)
        return true
    }

    /// Seconds until a paused connection may go on.
    func secondsUntilAvailable(now: Double = SystemClock.monotonicSeconds()) -> Double {
        refill(now)
        return tokens > 0 ? 0 : (-tokens + 1) / bytesPerSecond
    }
}

@available(*, unavailable)
extension RateLimiter: Sendable {}
