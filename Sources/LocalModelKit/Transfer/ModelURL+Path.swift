extension ModelURL {
    /// The decoded path of a URL (`https://host/a%20b/` → `/a b/`); nil when it has none.
    /// The catalog loader has refused every source URL whose path could climb out
    /// (`CatalogRules.sourceURLPathProblem`), and `mirror`'s walk below `DIR` refuses `..`
    /// anyway. A delivery's mirror folder, and the Hugging Face cache's repository, read it.
    static func path(of url: String) -> String? {
        guard let rest = url.afterFirst("://"), let slash = rest.firstIndex(of: "/") else { return nil }
        let encoded = Array(rest[slash...].prefix { $0 != "?" && $0 != "#" }.utf8)
        var bytes: [UInt8] = []
        var i = 0
        while i < encoded.count {
            if encoded[i] == UInt8(ascii: "%"), i + 2 < encoded.count,
               let value = UInt8(String(decoding: encoded[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) {
                bytes.append(value)
                i += 3
            } else {
                bytes.append(encoded[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
