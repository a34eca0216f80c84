/// Numbers from outside the program — a server's headers, a catalog, the environment,
/// the records database — are parsed and range-checked here before any conversion (P12):
/// a hostile value is refused (nil) or saturated, never a trap.
///
/// Swift's `Int(someDouble)` traps on NaN, infinities and values beyond `Int.max`, and
/// `+` traps on overflow; nothing that passes through this file can reach either.
package enum ExternalNumber {
    /// A decimal integer as HTTP writes them (`1*DIGIT`: no sign, no spaces, no
    /// exponent), or nil — including for anything beyond `Int64.max`.
    package static func decimal<S: StringProtocol>(_ text: S) -> Int64? {
        var value: Int64 = 0
        var digits = 0
        for byte in text.utf8 {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            if o1 || o2 { return nil }
            value = next
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// The same, but a value beyond `Int64.max` saturates to it: for quantities where
    /// "too big" has a meaning of its own (a `Retry-After` of 10,000 digits is simply too long).
    package static func saturatingDecimal<S: StringProtocol>(_ text: S) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return decimal(text) ?? .max
    }

    /// A `Double` as `Int64`: nil for NaN, infinities clamp to the ends, fractions round
    /// toward zero, values beyond the range clamp.
    package static func int64(clamping value: Double) -> Int64? {
        guard !value.isNaN else { return nil }
        // 2^63 is exactly representable; everything at or above it is out of range.
        if value >= 9_223_372_036_854_775_808.0 { return .max }
        if value <= -9_223_372_036_854_775_808.0 { return .min }
        return Int64(value)
    }

    /// Sum that stops at `Int64.max` instead of trapping (negative terms count as 0).
    package static func saturatingSum<S: Sequence>(_ values: S) -> Int64 where S.Element == Int64 {
        var total: Int64 = 0
        for v in values where v > 0 {
            let (sum, overflow) = total.addingReportingOverflow(v)
            if overflow { return .max }
            total = sum
        }
        return total
    }
}
