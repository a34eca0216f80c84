/// The HTTP header values a transfer acts on, parsed strictly: a value out of range or
/// out of shape is refused (nil), never trapped on (P12).
enum HTTPHeader {
    /// One line of a response's header block, as libcurl hands it over (CRLF included).
    enum Line: Equatable {
        /// `HTTP/1.1 302 Found`: a new response begins (redirects and 1xx each start one);
        /// its status, 0 when it cannot be read (P12: at most three digits' worth, 999).
        case status(Int)
        /// The empty line that ends the block.
        case end
        /// `Name: value`: the name lowercased, the value without surrounding blanks.
        case field(name: String, value: String)
        /// Anything else (a line without a colon): ignored.
        case other

        init(_ raw: UnsafeRawBufferPointer) {
            let text = String(decoding: raw, as: UTF8.self)
            if text.hasPrefix("HTTP/") {
                let parts = text.split(separator: " ", maxSplits: 2)
                self = .status(parts.count > 1 ? ExternalNumber.decimal(parts[1]).flatMap { $0 <= 999 ? Int($0) : nil } ?? 0 : 0)
                return
            }
            let trimmed = text.trimmingWhitespace()
            if trimmed.isEmpty {
                self = .end
                return
            }
            guard let colon = trimmed.firstIndex(of: ":") else {
                self = .other
                return
            }
            self = .field(name: trimmed[..<colon].lowercased(), value: trimmed[trimmed.index(after: colon)...].trimmingWhitespace())
        }
    }

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
