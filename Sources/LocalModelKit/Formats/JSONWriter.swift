import FoundationEssentials

extension JSONValue {
    /// Serializes the value. `pretty` indents by two spaces, as the catalog files are.
    package func serialized(pretty: Bool = false) -> String {
        String(decoding: serializedUTF8(pretty: pretty), as: UTF8.self)
    }

    /// The same text as ``serialized(pretty:)``, as UTF-8 bytes: what a caller writes out
    /// needs no String (`list --json` of a big catalog writes megabytes; appending to a
    /// String scalar by scalar cost a fifth of that command).
    package func serializedUTF8(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(4096)
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    private func write(into out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): JSONValue.writeInteger(i, into: &out)
        case .bigInteger(let s): out.append(contentsOf: s.utf8)
        case .double(let d):
            if d.isFinite {
                if d == d.rounded(), abs(d) < 1e15 { out.append(contentsOf: String(Int64(d)).utf8) } else { out.append(contentsOf: "\(d)".utf8) }
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            if items.isEmpty { out.append(contentsOf: "[]".utf8); return }
            out.append(UInt8(ascii: "["))
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { JSONValue.newline(into: &out, indent: indent + 1) }
                item.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(into: &out, indent: indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            if members.isEmpty { out.append(contentsOf: "{}".utf8); return }
            out.append(UInt8(ascii: "{"))
            for (n, member) in members.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { JSONValue.newline(into: &out, indent: indent + 1) }
                JSONValue.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                member.value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(into: &out, indent: indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func newline(into out: inout [UInt8], indent: Int) {
        out.append(UInt8(ascii: "\n"))
        for _ in 0..<indent { out.append(UInt8(ascii: " ")); out.append(UInt8(ascii: " ")) }
    }

    /// An integer's decimal digits, written in place (`String(i)` made a string per number).
    private static func writeInteger(_ i: Int64, into out: inout [UInt8]) {
        if i < 0 { out.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned: Int64.min has none as a signed number.
        var rest = i.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var n = 20
            repeat {
                n -= 1
                digits[n] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[n...]))
        }
    }

    /// A string literal: `"`, `\\` and the control characters escaped, every other byte of the
    /// UTF-8 as it is (a String's UTF-8 is valid, so whole runs are copied at once).
    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // A native string's bytes are read in place; a small one's from a copy on the stack.
        if let done = s.utf8.withContiguousStorageIfAvailable({ bytes -> Bool in
            // Most strings (ids, names, keys) need no escape: one scan, one copy.
            if !bytes.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
                out.append(contentsOf: bytes)
                return true
            }
            return false
        }), done {
            out.append(UInt8(ascii: "\""))
            return
        }
        var s = s
        s.withUTF8 { bytes in
            var runStart = 0
            for (i, b) in bytes.enumerated() where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                runStart = i + 1
                switch b {
                case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                case UInt8(ascii: "\n"): out.append(contentsOf: "\\n".utf8)
                case UInt8(ascii: "\r"): out.append(contentsOf: "\\r".utf8)
                case UInt8(ascii: "\t"): out.append(contentsOf: "\\t".utf8)
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(hex[Int(b >> 4)])
                    out.append(hex[Int(b & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Building JSON output without ceremony: `["id": .string(id), "fits": .bool(true)]`.
extension JSONValue: ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByStringLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral
{
    /// An object whose members keep the literal's order.
    package init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements.map { (key: $0.0, value: $0.1) }) }
    /// An array.
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// A string.
    package init(stringLiteral value: String) { self = .string(value) }
    /// `true` or `false`.
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An integer.
    package init(integerLiteral value: Int64) { self = .int(value) }
    /// `null`.
    package init(nilLiteral: ()) { self = .null }

    /// An integer.
    package init(_ value: Int) { self = .int(Int64(value)) }
    /// An integer.
    package init(_ value: Int64) { self = .int(value) }
    /// A string, or `null` for nil.
    package init(_ value: String?) { self = value.map { .string($0) } ?? .null }
}
