/// The HTTP header values a transfer acts on, parsed strictly: a value out of range or
/// out of shape is refused (nil), never trapped on (P12).
enum HTTPHeader {
    /// `bytes 100-199/1000` (or `/*`); nil for anything else, a number beyond `Int64`
    /// included (P12).
    static func contentRange(_ value: String) -> (start: Int64, end: Int64, total: Int64?)? {
        let v = value.lowercased()
        guard v.hasPrefix("bytes ") else { return nil }
        let spec = v.dropFirst(6)
        let parts = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let range = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard range.count == 2, let start = ExternalNumber.decimal(range[0]), let end = ExternalNumber.decimal(range[1]),
              end >= start else { return nil }
        if parts[1] == "*" { return (start, end, nil) }
        guard let total = ExternalNumber.decimal(parts[1]), total > end else { return nil }
        return (start, end, total)
    }

    /// `Retry-After: 120` (saturating: ten thousand digits is simply too long) or an HTTP
    /// date, as whole seconds from `now`; nil for anything else (P12).
    static func retryAfter(_ value: String, now: Double = SystemClock.wallSeconds()) -> Int64? {
        if let seconds = ExternalNumber.saturatingDecimal(value) { return seconds }
        guard let date = CivilTime.httpDate(value) else { return nil }
        return max(0, date - (ExternalNumber.int64(clamping: now.rounded(.down)) ?? 0))
    }
}
