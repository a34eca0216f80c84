/// The few string operations the engine and the command need, in plain Swift (Foundation's
/// versions would bring its ICU data into a command that must start like a C tool).
extension StringProtocol {
    /// Without leading and trailing spaces, tabs, carriage returns and newlines.
    package func trimmingWhitespace() -> String {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// The text after the first occurrence of `separator`, or nil when it does not occur.
    package func afterFirst(_ separator: String) -> String? {
        let text = Array(utf8)
        let sep = Array(separator.utf8)
        guard !sep.isEmpty, text.count >= sep.count else { return nil }
        for i in 0...(text.count - sep.count) where text[i..<(i + sep.count)].elementsEqual(sep) {
            return String(decoding: text[(i + sep.count)...], as: UTF8.self)
        }
        return nil
    }

    /// The text after the last occurrence of `separator`, or nil when it does not occur.
    package func afterLast(_ separator: String) -> String? {
        let text = Array(utf8)
        let sep = Array(separator.utf8)
        guard !sep.isEmpty, text.count >= sep.count else { return nil }
        var i = text.count - sep.count
        while i >= 0 {
            if text[i..<(i + sep.count)].elementsEqual(sep) { return String(decoding: text[(i + sep.count)...], as: UTF8.self) }
            i -= 1
        }
        return nil
    }

    /// Left-aligned in a column `width` characters wide (longer text is kept whole).
    package func padded(to width: Int) -> String {
        let text = String(self)
        return text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
}
