/// `--mirror`: the origin (scheme://host:port) of a URL replaced, its path kept; a path
/// in the mirror URL is prepended.
public enum MirrorRewrite {
    public static func apply(_ mirror: String?, to url: String) -> String {
        guard let mirror, let afterScheme = url.afterFirst("://") else { return url }
        let path = afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
        let base = mirror.hasSuffix("/") ? String(mirror.dropLast()) : mirror
        return base + path
    }
}

public enum ModelURL {
    /// Percent-encodes a catalog path for a URL (RFC 3986 unreserved characters and '/' stay).
    public static func percentEncode(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}
