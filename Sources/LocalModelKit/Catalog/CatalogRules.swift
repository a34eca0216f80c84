import FoundationEssentials

/// The individual rules, shared by the loader and `catalog hash`.
package enum CatalogRules {
    /// Whether `s` is 64 lowercase hex characters.
    package static func isSHA256(_ s: String) -> Bool {
        func check(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
            guard b.count == 64, let base = UnsafeRawPointer(b.baseAddress) else { return false }
            // Eight bytes at a time. With no byte at 0x80 or above, adding a constant to the word
            // carries into no neighbour, and sets a byte's top bit exactly when the byte is at
            // least 0x80 minus that constant: `0`…`9` is at least 0x30 and not above 0x39,
            // `a`…`f` at least 0x61 and not above 0x66.
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            for offset in stride(from: 0, to: 64, by: 8) {
                let w = base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                guard w & highs == 0 else { return false }
                let digit = (w &+ 0x50 &* ones) & ~(w &+ 0x46 &* ones)
                let letter = (w &+ 0x1F &* ones) & ~(w &+ 0x19 &* ones)
                guard (digit | letter) & highs == highs else { return false }
            }
            return true
        }
        // A native string's bytes are read in place; every file of every catalog model has one.
        if let valid = s.utf8.withContiguousStorageIfAvailable(check) { return valid }
        var s = s
        return s.withUTF8(check)
    }

    /// Why `id` is not a safe model id (a folder name in the store), or nil.
    package static func idProblem(_ id: String) -> String? {
        let bytes = Array(id.utf8)
        guard let first = bytes.first else { return "must not be empty" }
        func lowerAlnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        guard lowerAlnum(first) else {
            return "\"\(id)\" is not a safe folder name: it must start with a lowercase letter or digit"
        }
        guard bytes.allSatisfy({ lowerAlnum($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }) else {
            return "\"\(id)\" is not a safe folder name: use lowercase letters, digits, '.', '_' and '-' only"
        }
        if CatalogLoader.reservedIds.contains(id) { return "\"\(id)\" is reserved by the store layout" }
        return nil
    }

    /// Why `path` is not a safe relative file path, or nil.
    package static func pathProblem(_ path: String) -> String? {
        // One pass over the UTF-8 bytes (this runs for every file of every model at start-up),
        // read in place when the string holds them so.
        if let problem = path.utf8.withContiguousStorageIfAvailable({ pathProblem(path, $0) }) { return problem }
        return pathProblem(path, path.utf8)
    }

    private static func pathProblem(_ path: String, _ bytes: some Collection<UInt8>) -> String? {
        if bytes.isEmpty { return "must not be empty" }
        if bytes.first == UInt8(ascii: "/") { return "\"\(path)\" is an absolute path; paths are relative to the model folder" }
        var dots = 0
        var length = 0
        var problem: String?
        func endSegment() -> String? {
            if length == 0 { return "\"\(path)\" contains an empty segment ('//' or a trailing '/')" }
            if dots == length && length == 2 { return "\"\(path)\" contains '..' (it would escape the model folder)" }
            if dots == length && length == 1 { return "\"\(path)\" contains a '.' segment" }
            if length > 255 { return "a segment of \"\(path)\" is longer than 255 bytes" }
            return nil
        }
        for byte in bytes {
            if byte == UInt8(ascii: "\\") { return "\"\(path)\" contains a backslash; use '/' between folders" }
            if byte == UInt8(ascii: "/") {
                if let p = endSegment() { problem = problem ?? p }
                dots = 0
                length = 0
            } else {
                if byte == UInt8(ascii: ".") { dots += 1 }
                length += 1
            }
        }
        if let p = endSegment() { problem = problem ?? p }
        return problem
    }

    /// ASCII lowercase, with a fast path for the common all-lowercase ASCII path.
    static func foldedCase(_ s: String) -> String {
        func scan(_ bytes: some Sequence<UInt8>) -> (nonASCII: Bool, upper: Bool) {
            var upper = false
            for b in bytes {
                if b >= 0x80 { return (true, upper) }
                if b >= 0x41 && b <= 0x5A { upper = true }
            }
            return (false, upper)
        }
        // A native string's bytes in place (every file of every model passes here).
        let found = s.utf8.withContiguousStorageIfAvailable { scan($0) } ?? scan(s.utf8)
        return found.nonASCII || found.upper ? s.lowercased() : s
    }

    /// Whether `url` is plain http (then allowed only to loopback, and redirects may stay
    /// on plain http; an https URL never redirects down to it).
    package static func isPlainHTTP(_ url: String) -> Bool {
        url.utf8.count >= 7 && url.utf8.prefix(7).map { $0 | 0x20 } == Array("http://".utf8)
    }

    /// Why `url` may not be fetched, or nil: https only, plain http only to loopback.
    package static func urlProblem(_ url: String) -> String? {
        // Over the UTF-8 bytes: every delimiter here is ASCII, and this runs for every
        // source of every model at start-up.
        let b = Array(url.utf8)
        func hasSchemePrefix(_ scheme: StaticString) -> Bool {
            let n = scheme.utf8CodeUnitCount
            guard b.count >= n else { return false }
            return scheme.withUTF8Buffer { p in (0..<n).allSatisfy { i in b[i] | 0x20 == p[i] | 0x20 } }
        }
        let start: Int
        let secure: Bool
        if hasSchemePrefix("https://") {
            start = 8; secure = true
        } else if hasSchemePrefix("http://") {
            start = 7; secure = false
        } else {
            return "\"\(URLOrigin.redacted(url).prefix(80))\" is not an https URL"
        }
        // In UTF-8 a scalar <= 0x20 or 0x7F is exactly such a byte.
        if b.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            return "contains spaces or control characters; percent-encode them"
        }
        var end = start
        while end < b.count, b[end] != UInt8(ascii: "/"), b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") { end += 1 }
        let authority = b[start..<end]
        if authority.contains(UInt8(ascii: "@")) {
            return "must not carry credentials (user@host): a URL is shown and recorded; give a mirror's login in ~/.netrc (or $NETRC)"
        }
        guard let host = hostOf(authority), !host.isEmpty else { return "\"\(url.prefix(80))\" has no host" }
        if !secure && !isLoopback(host) {
            return "\"\(url.prefix(80))\" is plain http; only https is allowed (http only to 127.0.0.1/localhost)"
        }
        return nil
    }

    /// The lowercased host of a URL (`https://CDN.example:8443/x` → `cdn.example`), or nil.
    package static func host(of url: String) -> String? {
        guard let rest = url.afterFirst("://") else { return nil }
        let authority = Array(rest.utf8.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        let withoutUser = authority.lastIndex(of: UInt8(ascii: "@")).map { authority[($0 + 1)...] } ?? authority[...]
        return hostOf(withoutUser)
    }

    /// Why the path of a catalog source URL could climb out of its folder, or nil. The
    /// loader applies it to every `baseURL` and archive `url` (on top of `urlProblem`):
    /// `glasses-local mirror` writes files under these paths, and a server may decode
    /// them, so no spelling of `.`, `..` or a separator may hide in one. Only the part
    /// before `?` or `#` is a path. Refused there: a backslash, `%25` (double encoding:
    /// `%252e` decodes to `%2e`), `%00`, `%2F`, `%5C` (either case), a `%` without two hex
    /// digits, and, after percent-decoding, a segment that is `.` or `..`.
    /// Redirects and `--mirror` are checked by `urlProblem` alone (a mirror URL is an
    /// origin, not a folder a model's files are written under).
    package static func sourceURLPathProblem(_ url: String) -> String? {
        let b = Array(url.utf8)
        var start = 0
        if let colon = b.firstIndex(of: UInt8(ascii: ":")), b.count > colon + 2,
           b[colon + 1] == UInt8(ascii: "/"), b[colon + 2] == UInt8(ascii: "/") {
            start = colon + 3
            while start < b.count, b[start] != UInt8(ascii: "/"), b[start] != UInt8(ascii: "?"), b[start] != UInt8(ascii: "#") {
                start += 1
            }
        }
        var end = start
        while end < b.count, b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") { end += 1 }
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        let shown = "\"\(url.prefix(120))\""
        // The decoded bytes of the current segment: only its dots matter.
        var dots = 0
        var length = 0
        func dotSegment() -> String? {
            guard dots == length, length == 1 || length == 2 else { return nil }
            return "the URL path of \(shown) has a '\(length == 1 ? "." : "..")' segment (however it is encoded, '%2e' included); a source's URL path must not climb out of its folder or point at it"
        }
        var i = start
        while i < end {
            let c = b[i]
            if c == UInt8(ascii: "\\") {
                return "the URL path of \(shown) contains a backslash; use '/' between folders"
            }
            if c == UInt8(ascii: "/") {
                if let problem = dotSegment() { return problem }
                dots = 0
                length = 0
                i += 1
                continue
            }
            var decoded = c
            if c == UInt8(ascii: "%") {
                guard i + 2 < end, let high = hexValue(b[i + 1]), let low = hexValue(b[i + 2]) else {
                    return "the URL path of \(shown) has a '%' not followed by two hex digits; percent-encode a '%' as '%25'"
                }
                decoded = high << 4 | low
                switch decoded {
                case 0x25:
                    return "the URL path of \(shown) contains '%25' (an encoded '%'): double encoding can hide '..' or a separator from this check"
                case 0x00:
                    return "the URL path of \(shown) contains '%00' (an encoded NUL)"
                case UInt8(ascii: "/"):
                    return "the URL path of \(shown) contains '%2F' (an encoded '/'); use '/' between folders"
                case UInt8(ascii: "\\"):
                    return "the URL path of \(shown) contains '%5C' (an encoded '\\'); use '/' between folders"
                default:
                    break
                }
                i += 3
            } else {
                i += 1
            }
            if decoded == UInt8(ascii: ".") { dots += 1 }
            length += 1
        }
        return dotSegment()
    }

    /// The lowercased host of an authority (`host[:port]` or `[v6]:port`), or nil.
    static func hostOf(_ authority: ArraySlice<UInt8>) -> String? {
        func lowered(_ bytes: ArraySlice<UInt8>) -> String {
            // Non-ASCII hosts (IDNs) are lowercased by Unicode's rules.
            if bytes.contains(where: { $0 >= 0x80 }) { return String(decoding: bytes, as: UTF8.self).lowercased() }
            return String(decoding: bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            // After the bracket only the end or ":port" may follow ("[::1].evil" is not loopback).
            let rest = authority[(close + 1)...]
            guard rest.isEmpty || (rest.first == UInt8(ascii: ":") && rest.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }) else {
                return lowered(authority)   // not a bracketed IP literal: never loopback
            }
            return lowered(authority[...close])
        }
        return lowered(authority.prefix { $0 != UInt8(ascii: ":") })
    }

    /// Loopback hosts: `localhost`, `127.0.0.0/8`, `[::1]`.
    package static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// A byte of a key name: ASCII letters, digits, `.`, `_`, `-` (a file name anywhere).
    package static func isKeyNameByte(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F || b == 0x2D
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, optionally with fractional seconds.
    package static func isTimestamp(_ s: String) -> Bool {
        epochSeconds(s) != nil
    }

    /// The whole seconds since 1970-01-01T00:00:00Z of a timestamp `isTimestamp` accepts
    /// (fractions dropped), or nil when `s` is not one.
    package static func epochSeconds(_ s: String) -> Int64? {
        let b = Array(s.utf8)
        guard b.count >= 20, b.last == UInt8(ascii: "Z") else { return nil }
        let digitsAt = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        func digit(_ i: Int) -> Bool { b[i] >= 0x30 && b[i] <= 0x39 }
        guard digitsAt.allSatisfy(digit), b[4] == 0x2D, b[7] == 0x2D, b[10] == UInt8(ascii: "T"), b[13] == 0x3A, b[16] == 0x3A else { return nil }
        if b.count > 20 {
            guard b[19] == UInt8(ascii: "."), b.count > 21, (20..<(b.count - 1)).allSatisfy(digit) else { return nil }
        }
        func number(_ i: Int, _ n: Int) -> Int { (i..<(i + n)).reduce(0) { $0 * 10 + Int(b[$1] - 0x30) } }
        let year = number(0, 4), month = number(5, 2), day = number(8, 2)
        let hour = number(11, 2), minute = number(14, 2), second = number(17, 2)
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...days[month - 1]).contains(day) else { return nil }
        // Seconds up to 60 for a leap second.
        guard hour <= 23, minute <= 59, second <= 60 else { return nil }
        let day0 = CivilTime.days(year: Int64(year), month: Int64(month), day: Int64(day))
        return day0 * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }
}
