// A small, strict JSON reader and writer (RFC 8259).
//
// Why not JSONSerialization/JSONDecoder: a catalog is untrusted input, and the loader
// must report *every* problem with its JSON path. That needs exact integers (a size
// of 2^70 is an error, not a rounded Double), duplicate keys detected instead of
// silently overwritten, key order preserved, nesting and size bounded, and no
// exception path that can crash. It is also several times faster on Linux, which
// matters for start-up.

/// A parsed JSON document node.
package enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer literal that fits in `Int64`.
    case int(Int64)
    /// A number with a fraction or exponent.
    case double(Double)
    /// An integer literal outside `Int64`; kept as text so it can be reported.
    case bigInteger(String)
    /// A string, unescaped.
    case string(String)
    /// An array, in document order.
    case array([JSONValue])
    /// Members in document order. Keys are unique (the parser rejects duplicates).
    case object([(key: String, value: JSONValue)])

    /// Equal values of the same case; objects compare their members in order.
    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.bigInteger(a), .bigInteger(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The member named `key` of an object, or nil.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    /// A short name of the value's type, for error messages ("expected integer, found string").
    package var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .bigInteger: return "integer"
        case .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// Why a text is not JSON, with where.
package struct JSONParseError: Error, Equatable, CustomStringConvertible {
    /// What is wrong ("expected ',' or '}'").
    package var message: String
    /// The line where it is, from 1.
    package var line: Int
    /// The column (in bytes) where it is, from 1.
    package var column: Int
    /// `line L, column C: message`.
    package var description: String { "line \(line), column \(column): \(message)" }
}

/// Parses JSON from UTF-8 bytes with fixed limits.
package struct JSONParser {
    /// Deepest nesting accepted; a catalog needs 5.
    package var maxDepth = 64

    /// A parser with the default limits.
    package init() {}

    /// Parses one JSON document (RFC 8259) from UTF-8 bytes.
    /// - Parameter bytes: the whole document.
    /// - Returns: its value; integers that fit `Int64` stay exact.
    /// - Throws: ``JSONParseError`` with the line and column of the first problem
    ///   (a duplicate key, nesting past ``maxDepth``, anything after the value).
    package func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try parse(bytes, elementsOf: nil, to: nil)
    }

    /// Parses like ``parse(_:)``, and hands each element of the top-level object's array
    /// member `key` to `sink` as soon as it is read (in order, from 0), while the rest of the
    /// document is still being parsed: a caller can start working on them at once (the
    /// catalog's models are checked on another core meanwhile). Elements were handed out
    /// also when the document turns out not to be JSON after all.
    package func parse(_ bytes: [UInt8], elementsOf key: String?, to sink: ((JSONValue) -> Void)?) throws(JSONParseError) -> JSONValue {
        // The reader walks a buffer pointer that lives only for this call: no bounds check or
        // reference count per byte.
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, maxDepth: maxDepth)
            reader.observedKey = key
            reader.sink = sink
            do throws(JSONParseError) {
                return .success(try reader.parseDocument())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Parses one JSON document from text.
    /// - Parameter text: the whole document.
    /// - Returns: its value.
    /// - Throws: ``JSONParseError`` at the first problem.
    package func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct Reader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    /// The members (elements) of the objects (arrays) being read, one buffer per nesting
    /// level, reused: each object and array is then allocated once, at its size, instead of
    /// growing from empty (a catalog's file entry took three allocations, its files array five).
    var memberScratch: [[(key: String, value: JSONValue)]] = []
    var elementScratch: [[JSONValue]] = []
    /// The top-level object's array member whose elements go to `sink` as they are read.
    var observedKey: String?
    var sink: ((JSONValue) -> Void)?

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        // A UTF-8 byte-order mark is not JSON (RFC 8259 §8.1), but editors add it; tolerate it.
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
        if index == bytes.count { throw fail("the document is empty") }
        let value = try parseValue()
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected text after the JSON value") }
        return value
    }

    func fail(_ message: String, at position: Int? = nil) -> JSONParseError {
        let end = min(position ?? index, bytes.count)
        var line = 1
        var column = 1
        var i = 0
        while i < end {
            if bytes[i] == UInt8(ascii: "\n") { line += 1; column = 1 } else if bytes[i] & 0xC0 != 0x80 { column += 1 }
            i += 1
        }
        return JSONParseError(message: message, line: line, column: column)
    }

    /// The 8 bytes at `offset` as one word (callers check that they are there).
    func word(at offset: Int) -> UInt64 {
        guard let base = bytes.baseAddress else { return 0 }
        return UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self)
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            // A pretty-printed catalog is a fifth indentation: eight spaces at a time.
            if index + 8 <= bytes.count && word(at: index) == 0x2020_2020_2020_2020 {
                index += 8
                continue
            }
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    func describeByte(_ byte: UInt8) -> String {
        if byte == 0 { return "a NUL byte" }
        if byte >= 0x20 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x" + String(byte, radix: 16, uppercase: true)
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of document") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw fail("unexpected \(describeByte(bytes[index])) where a value should start")
        }
    }

    mutating func expectLiteral(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        let ok = word.withUTF8Buffer { literal in
            index + count <= bytes.count && bytes[index..<index + count].elementsEqual(literal)
        }
        guard ok else { throw fail("invalid literal (expected \(word))") }
        index += count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth { throw fail("nesting deeper than \(maxDepth) levels") }
    }

    /// `scratch`'s elements moved into an array of their number, and `scratch` emptied
    /// (keeping its room) for the next one. Moved, not copied: no reference count changes
    /// per element. The slots left behind are refilled with `placeholder`, a value that
    /// holds no reference, so that emptying `scratch` releases nothing twice.
    static func take<Element>(_ scratch: inout [Element], placeholder: Element) -> [Element] {
        let taken = [Element](unsafeUninitializedCapacity: scratch.count) { buffer, count in
            count = scratch.withUnsafeMutableBufferPointer { source in
                let moved = buffer.moveInitialize(fromContentsOf: source)
                source.initialize(repeating: placeholder)
                return moved
            }
        }
        scratch.removeAll(keepingCapacity: true)
        return taken
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        let level = depth - 1
        while memberScratch.count <= level { memberScratch.append([]) }
        // Small objects (all of a catalog's) check duplicates by a linear scan; a set only
        // pays off for big ones.
        var seen: Set<String>?
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "}") {
            index += 1; depth -= 1
            return .object([])
        }
        // A failure anywhere below leaves members behind: the next object at this level starts empty.
        memberScratch[level].removeAll(keepingCapacity: true)
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of document inside an object") }
            guard bytes[index] == UInt8(ascii: "\"") else {
                throw fail("expected a quoted key, found \(describeByte(bytes[index]))")
            }
            let keyStart = index
            let key = try parseString()
            let duplicate: Bool
            if memberScratch[level].count < 16 {
                duplicate = memberScratch[level].contains { $0.key == key }
            } else {
                if seen == nil { seen = Set(memberScratch[level].map(\.key)) }
                duplicate = seen?.insert(key).inserted == false
            }
            if duplicate { throw fail("duplicate key \"\(key)\"", at: keyStart) }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':' after key \"\(key)\"") }
            index += 1
            skipWhitespace()
            let value: JSONValue
            if level == 0, let sink, let observedKey, key == observedKey, index < bytes.count, bytes[index] == UInt8(ascii: "[") {
                value = try parseArray(handingElementsTo: sink)
            } else {
                value = try parseValue()
            }
            memberScratch[level].append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of document inside an object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw fail("expected ',' or '}' in an object, found \(describeByte(bytes[index]))")
        }
        depth -= 1
        return .object(Self.take(&memberScratch[level], placeholder: (key: "", value: .null)))
    }

    mutating func parseArray(handingElementsTo sink: ((JSONValue) -> Void)? = nil) throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        let level = depth - 1
        while elementScratch.count <= level { elementScratch.append([]) }
        skipWhitespace()
        if index < bytes.count && bytes[index] == UInt8(ascii: "]") {
            index += 1; depth -= 1
            return .array([])
        }
        elementScratch[level].removeAll(keepingCapacity: true)
        while true {
            skipWhitespace()
            let element = try parseValue()
            sink?(element)
            elementScratch[level].append(element)
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of document inside an array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw fail("expected ',' or ']' in an array, found \(describeByte(bytes[index]))")
        }
        depth -= 1
        return .array(Self.take(&elementScratch[level], placeholder: .null))
    }

    mutating func parseString() throws(JSONParseError) -> String {
        let start = index
        index += 1
        // Fast path: no escapes.
        var scan = index
        var high: UInt8 = 0
        // Eight bytes at a time while none is '"', '\\', a control byte or a byte of a
        // multi-byte character (a word test that may also stop early: the loop below then
        // looks at each byte).
        while scan + 8 <= bytes.count {
            let w = word(at: scan)
            let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
            let quote = w ^ (0x22 &* ones), backslash = w ^ (0x5C &* ones)
            let stop = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((w &- 0x20 &* ones) & ~w) | w
            if stop & highs != 0 { break }
            scan += 8
        }
        while scan < bytes.count {
            let b = bytes[scan]
            if b == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[index..<scan])
                // ASCII (nearly every catalog string) is valid UTF-8 as it stands: decoded
                // directly, without the generic validating initializer (a tenth of a big
                // catalog's load went there).
                let text: String
                if high < 0x80 {
                    text = String(decoding: run, as: UTF8.self)
                } else {
                    guard let valid = String(validating: run, as: UTF8.self) else {
                        throw fail("a string is not valid UTF-8", at: start)
                    }
                    text = valid
                }
                index = scan + 1
                return text
            }
            if b == UInt8(ascii: "\\") || b < 0x20 { break }
            high |= b
            scan += 1
        }
        var out: [UInt8] = []
        out.reserveCapacity(scan - index + 16)
        while true {
            guard index < bytes.count else { throw fail("unterminated string", at: start) }
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else {
                    throw fail("a string is not valid UTF-8", at: start)
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired UTF-16 surrogate in a \\u escape")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired UTF-16 surrogate in a \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired UTF-16 surrogate in a \\u escape")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: UTF8.encode(u).map { Array($0) } ?? [])
                default:
                    throw fail("invalid escape '\\\(Character(Unicode.Scalar(e)))'", at: index - 2)
                }
            default:
                if b < 0x20 { throw fail("\(describeByte(b)) inside a string (control characters must be escaped)") }
                out.append(b)
                index += 1
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in a \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number", at: start) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw fail("numbers must not have leading zeros", at: start) }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number (digit expected after '.')", at: start) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("invalid number (digit expected in exponent)", at: start) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        // The slice is ASCII digits, sign, '.', 'e' only: always valid UTF-8.
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger {
            if let value = Int64(text) { return .int(value) }
            return .bigInteger(text)
        }
        guard let value = Double(text), value.isFinite else { return .bigInteger(text) }
        return .double(value)
    }
}
