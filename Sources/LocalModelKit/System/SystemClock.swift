#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system's clocks: the wall clock, a clock that never jumps, and the local time of day.
/// (Not `Clock`: that name is the standard library's clock protocol.)
package enum SystemClock {
    /// Seconds since 1970 on the wall clock (CLOCK_REALTIME).
    package static func wallSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds on a clock that never jumps (CLOCK_MONOTONIC).
    package static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Seconds after local midnight (the system's time zone).
    package static func localSecondOfDay() -> Int {
        var t = time(nil)
        var parts = tm()
        guard localtime_r(&t, &parts) != nil else { return Int(t % 86_400) }
        return Int(parts.tm_hour) * 3600 + Int(parts.tm_min) * 60 + Int(parts.tm_sec)
    }
}

/// Seconds on a clock that never jumps (CLOCK_MONOTONIC), for rates and timeouts.
package func monotonicSeconds() -> Double { SystemClock.monotonicSeconds() }
