/// `--mirror`: the origin (scheme://host:port) of a URL replaced, its path kept; a path
/// in the mirror URL is prepended.
package enum MirrorRewrite {
    /// `url` with its origin replaced by `mirror`'s (`url` unchanged when `mirror` is nil).
    package static func apply(_ mirror: String?, to url: String) -> String {
        guard let mirror, let afterScheme = url.afterFirst("://") else { return url }
        let path = afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
        let base = mirror.hasSuffix("/") ? String(mirror.dropLast()) : mirror
        return base + path
    }
}

/// `HF_ENDPOINT`, the Hub client's convention for a Hub mirror (`https://hf-mirror.com`):
/// every source URL on `https://huggingface.co` is fetched from the endpoint instead, its
/// path kept (a path in the endpoint is prepended), and the Hugging Face token goes to the
/// endpoint's origin only. Trailing `/` are stripped, as the client strips them; an empty
/// value is unset. `--mirror` wins over it.
package struct HubEndpoint: Sendable, Equatable {
    /// The origin the endpoint stands in for.
    package static let hubOrigin = "https://huggingface.co:443"
    /// The endpoint, trailing `/` stripped.
    package let url: String
    /// Why it cannot be used (not an https URL, plain http to a host off loopback, user
    /// info, a query); nil when it can.
    package let problem: String?

    /// Nil when `HF_ENDPOINT` is unset or empty.
    package init?(environment: [String: String]) {
        guard let raw = environment["HF_ENDPOINT"], !raw.isEmpty else { return nil }
        self.init(raw)
    }

    init(_ raw: String) {
        var url = raw
        while url.hasSuffix("/") { url.removeLast() }
        self.url = url
        if let problem = CatalogRules.urlProblem(url) {
            self.problem = problem
        } else if url.contains("?") || url.contains("#") {
            problem = "a query or fragment cannot prefix a path"
        } else {
            problem = nil
        }
    }

    /// Whether `url` is on `https://huggingface.co` (any case, port 443 written or not).
    package static func isOnHub(_ url: String) -> Bool { URLOrigin.of(url) == hubOrigin }

    /// `url` through the endpoint when it is on `https://huggingface.co`; any other URL, or
    /// any URL while the endpoint cannot be used, as it is.
    package func apply(to url: String) -> String {
        guard problem == nil, Self.isOnHub(url) else { return url }
        return MirrorRewrite.apply(self.url, to: url)
    }
}

/// How a catalog path becomes part of a source URL.
package enum ModelURL {
    /// Percent-encodes a catalog path for a URL (RFC 3986 unreserved characters and '/' stay).
    package static func percentEncode(_ path: String) -> String {
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
