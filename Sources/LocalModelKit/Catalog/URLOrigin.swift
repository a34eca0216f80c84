/// A URL's origin: `scheme://host:port`, lowercased, the port always written (443 for
/// https, 80 for http), any userinfo dropped. Two URLs with the same origin are the same
/// server as far as credentials go (RFC 6454).
package enum URLOrigin {
    /// The origin of `url` (`https://huggingface.co:443`), or nil when it is not an http(s)
    /// URL with a host.
    package static func of(_ url: String) -> String? {
        let b = Array(url.utf8)
        guard let schemeEnd = schemeEnd(b) else { return nil }
        let scheme = String(decoding: b[..<(schemeEnd - 3)].map { $0 | 0x20 }, as: UTF8.self)
        guard scheme == "https" || scheme == "http" else { return nil }
        var authority = b[schemeEnd...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        guard let host = CatalogRules.hostOf(authority), !host.isEmpty else { return nil }
        // The port: after the host, or after the closing bracket of an IPv6 literal.
        let hostEnd: Int
        if authority.first == UInt8(ascii: "[") {
            hostEnd = authority.firstIndex(of: UInt8(ascii: "]")).map { $0 + 1 } ?? authority.endIndex
        } else {
            hostEnd = authority.firstIndex(of: UInt8(ascii: ":")) ?? authority.endIndex
        }
        let afterHost = authority[hostEnd...]
        var port: Int64 = scheme == "https" ? 443 : 80
        if afterHost.first == UInt8(ascii: ":"), afterHost.count > 1 {
            let digits = String(decoding: afterHost.dropFirst(), as: UTF8.self)
            guard digits.utf8.count <= 5, let value = ExternalNumber.decimal(digits), value <= 65_535 else { return nil }
            port = value
        }
        return scheme + "://" + host + ":" + String(port)
    }

    /// `url` with any userinfo (`user:password@`) replaced by `***@`, for every message that
    /// echoes a URL.
    package static func redacted(_ url: String) -> String {
        let b = Array(url.utf8)
        guard let start = schemeEnd(b) else { return url }
        let authority = b[start...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard let at = authority.lastIndex(of: UInt8(ascii: "@")) else { return url }
        return String(decoding: b[..<start], as: UTF8.self) + "***" + String(decoding: b[at...], as: UTF8.self)
    }

    /// The index after `scheme://`, or nil when there is none.
    private static func schemeEnd(_ b: [UInt8]) -> Int? {
        guard let colon = b.firstIndex(of: UInt8(ascii: ":")), colon > 0, b.count > colon + 2,
              b[colon + 1] == UInt8(ascii: "/"), b[colon + 2] == UInt8(ascii: "/") else { return nil }
        return colon + 3
    }
}
