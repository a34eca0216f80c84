/// Standard base64 (RFC 4648, with padding), for catalog signatures.
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The base64 of `bytes`, padded.
    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes, or nil for anything but canonical base64 (surrounding whitespace allowed).
    package static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.trimmingWhitespace().utf8)
        guard chars.count % 4 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): return c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): return c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): return 62
            case UInt8(ascii: "/"): return 63
            default: return nil
            }
        }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            let last = i + 4 == chars.count
            let pad = last ? (chars[i + 3] == UInt8(ascii: "=") ? (chars[i + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
            guard let a = value(chars[i]), let b = value(chars[i + 1]) else { return nil }
            out.append(a << 2 | b >> 4)
            if pad < 2 {
                guard let c = value(chars[i + 2]) else { return nil }
                out.append((b & 0x0F) << 4 | c >> 2)
                if pad < 1 {
                    guard let d = value(chars[i + 3]) else { return nil }
                    out.append((c & 0x03) << 6 | d)
                } else if c & 0x03 != 0 { return nil }
            } else if b & 0x0F != 0 { return nil }
            i += 4
        }
        return Base64.encode(out) == String(decoding: chars, as: UTF8.self) ? out : nil
    }
}
