import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// The strict JSON reader and writer under the catalog loader.
@Suite(.networkGuard)
struct JSONTests {
    static func parse(_ text: String) throws(JSONParseError) -> JSONValue { try JSONParser().parse(text) }

    /// The parse error for `bytes`, or nil when they parse.
    static func parseError(_ bytes: [UInt8], maxDepth: Int = 64) -> JSONParseError? {
        var parser = JSONParser()
        parser.maxDepth = maxDepth
        do {
            _ = try parser.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    static func parseError(_ text: String) -> JSONParseError? { parseError(Array(text.utf8)) }

    // MARK: - Rejected input, with where

    struct Bad: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var message: String
        var line: Int
        var column: Int
        var testDescription: String { name }

        init(_ name: String, _ text: String, _ message: String, line: Int = 1, column: Int) {
            self.init(name, Array(text.utf8), message, line: line, column: column)
        }

        init(_ name: String, _ bytes: [UInt8], _ message: String, line: Int = 1, column: Int) {
            self.name = name
            self.bytes = bytes
            self.message = message
            self.line = line
            self.column = column
        }
    }

    static let badInputs: [Bad] = [
        // Numbers
        Bad("leading zero", "01", "numbers must not have leading zeros", column: 1),
        Bad("negative leading zero", "-01", "numbers must not have leading zeros", column: 1),
        Bad("double zero in an array", "[00]", "numbers must not have leading zeros", column: 2),
        Bad("dot without digits", "1.", "digit expected after '.'", column: 1),
        Bad("leading dot", ".5", "unexpected '.' where a value should start", column: 1),
        Bad("exponent without digits", "1e", "digit expected in exponent", column: 1),
        Bad("exponent sign without digits", "1e+", "digit expected in exponent", column: 1),
        Bad("plus sign", "+1", "unexpected '+' where a value should start", column: 1),
        Bad("lone minus", "-", "invalid number", column: 1),
        Bad("minus before a letter", "-x", "invalid number", column: 1),
        Bad("hexadecimal", "0x10", "unexpected text after the JSON value", column: 2),
        Bad("NaN", "NaN", "unexpected 'N' where a value should start", column: 1),
        Bad("Infinity", "[Infinity]", "unexpected 'I' where a value should start", column: 2),
        // Trailing commas and structure
        Bad("trailing comma in an array", "[1,]", "unexpected ']' where a value should start", column: 4),
        Bad("trailing comma in an object", #"{"a":1,}"#, "expected a quoted key, found '}'", column: 8),
        Bad("double comma", "[1,,2]", "unexpected ',' where a value should start", column: 4),
        Bad("missing comma in an array", "[1 2]", "expected ',' or ']' in an array, found '2'", column: 4),
        Bad("missing comma in an object", #"{"a":1 "b":2}"#, "expected ',' or '}' in an object, found '\"'", column: 8),
        Bad("missing colon", #"{"a" 1}"#, "expected ':' after key \"a\"", column: 6),
        Bad("unquoted key", "{a:1}", "expected a quoted key, found 'a'", column: 2),
        Bad("single-quoted string", "['a']", "unexpected ''' where a value should start", column: 2),
        Bad("unclosed array", "[", "unexpected end of document", column: 2),
        Bad("unclosed object", #"{"a":1"#, "unexpected end of document inside an object", column: 7),
        Bad("two documents", "{} {}", "unexpected text after the JSON value", column: 4),
        Bad("comment", "[1] // one", "unexpected text after the JSON value", column: 5),
        Bad("empty document", "", "the document is empty", column: 1),
        Bad("only whitespace", " \n ", "the document is empty", line: 2, column: 2),
        Bad("misspelt true", "tru", "invalid literal (expected true)", column: 1),
        Bad("capitalised True", "True", "unexpected 'T' where a value should start", column: 1),
        Bad("misspelt null", "[nul]", "invalid literal (expected null)", column: 2),
        Bad("duplicate key", #"{"a":1,"a":2}"#, "duplicate key \"a\"", column: 8),
        Bad("duplicate key spelled with an escape", #"{"a":1,"\u0061":2}"#, "duplicate key \"a\"", column: 8),
        Bad("BOM in the middle", [UInt8(ascii: "[")] + [0xEF, 0xBB, 0xBF] + [UInt8(ascii: "]")],
            "unexpected byte 0xEF where a value should start", column: 2),
        // Strings
        Bad("unterminated string", #""abc"#, "unterminated string", column: 1),
        Bad("unterminated string in an array", #"["abc]"#, "unterminated string", column: 2),
        Bad("unterminated escape", #""abc\"#, "unterminated escape", column: 6),
        Bad("invalid escape \\x", #""\x""#, "invalid escape '\\x'", column: 2),
        Bad("invalid escape \\'", #""a\'""#, "invalid escape '\\''", column: 3),
        Bad("invalid escape \\U", #""\U0041""#, "invalid escape '\\U'", column: 2),
        Bad("non-hex \\u escape", #""\u12G4""#, "invalid hex digit in a \\u escape", column: 6),
        Bad("truncated \\u escape", #""\u12""#, "truncated \\u escape", column: 4),
        Bad("lone high surrogate", #""\ud800""#, "unpaired UTF-16 surrogate", column: 8),
        Bad("lone low surrogate", #""\udc00""#, "unpaired UTF-16 surrogate", column: 8),
        Bad("high surrogate then a letter", #""\ud800\u0041""#, "unpaired UTF-16 surrogate", column: 14),
        Bad("high surrogate then a plain character", #""\ud800x""#, "unpaired UTF-16 surrogate", column: 8),
        Bad("raw control character", "\"a\u{01}b\"", "byte 0x1 inside a string (control characters must be escaped)",
            column: 3),
        Bad("raw newline in a string", "\"a\nb\"", "byte 0xA inside a string", column: 3),
        Bad("raw tab in a string", "\"a\tb\"", "byte 0x9 inside a string", column: 3),
        Bad("raw NUL in a string", [0x22, 0x61, 0x00, 0x22], "a NUL byte inside a string", column: 3),
        Bad("raw control character after an escape", "\"\\n\u{1F}\"", "byte 0x1F inside a string", column: 4),
        Bad("invalid UTF-8", [0x22, 0xFF, 0x22], "a string is not valid UTF-8", column: 1),
        Bad("overlong UTF-8 after an escape", [0x22, 0x5C, 0x6E, 0xC0, 0xAF, 0x22], "a string is not valid UTF-8",
            column: 1),
        Bad("UTF-8 encoded surrogate", [0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D], "a string is not valid UTF-8",
            column: 2),
        Bad("truncated UTF-8 sequence", [0x22, 0xC3, 0x22], "a string is not valid UTF-8", column: 1),
    ]

    @Test(arguments: badInputs)
    func invalidJSONIsRejectedWithWhere(_ bad: Bad) throws {
        let error = try #require(Self.parseError(bad.bytes), "accepted: \(bad.bytes)")
        #expect(error.message.contains(bad.message), "\(error)")
        #expect(error.line == bad.line, "\(error)")
        #expect(error.column == bad.column, "\(error)")
        #expect(error.description == "line \(error.line), column \(error.column): \(error.message)")
    }

    // MARK: - Positions over several lines and multi-byte characters

    struct Where: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var line: Int
        var column: Int
        var testDescription: String { name }
    }

    static let positions: [Where] = [
        Where(name: "third line", text: "{\n  \"schemaVersion\": 1,\n  \"catalogVersion\": 01\n}", line: 3, column: 21),
        Where(name: "start of a line", text: "[\n1,\n,2]", line: 3, column: 1),
        Where(name: "CRLF line ends", text: "[\r\n1,\r\n,]", line: 3, column: 1),
        Where(name: "duplicate key on line 2", text: "{\"a\": 1,\n \"a\": 2}", line: 2, column: 2),
        Where(name: "after a two-byte character", text: "[\"é\", x]", line: 1, column: 7),
        Where(name: "after a four-byte character", text: "\"😀\" x", line: 1, column: 5),
        Where(name: "after escapes", text: "[\"\\u00e9\\n\", -]", line: 1, column: 14),
        Where(name: "unterminated string starting on line 2", text: "[\n  \"abc", line: 2, column: 3),
    ]

    @Test(arguments: positions)
    func errorNamesLineAndColumn(_ c: Where) throws {
        let error = try #require(Self.parseError(c.text))
        #expect(error.line == c.line, "\(error)")
        #expect(error.column == c.column, "\(error)")
    }

    // MARK: - Accepted input

    struct Good: Sendable, CustomTestStringConvertible {
        var text: String
        var value: JSONValue
        var testDescription: String { text.count > 40 ? "\(text.prefix(20))… (\(text.count) characters)" : text }
    }

    static let goodInputs: [Good] = [
        Good(text: "0", value: .int(0)),
        Good(text: "-0", value: .int(0)),
        Good(text: "7", value: .int(7)),
        Good(text: "-42", value: .int(-42)),
        Good(text: "9223372036854775807", value: .int(Int64.max)),
        Good(text: "-9223372036854775808", value: .int(Int64.min)),
        Good(text: "9223372036854775808", value: .bigInteger("9223372036854775808")),
        Good(text: "-9223372036854775809", value: .bigInteger("-9223372036854775809")),
        Good(text: "1180591620717411303424", value: .bigInteger("1180591620717411303424")),
        Good(text: "1" + String(repeating: "0", count: 400), value: .bigInteger("1" + String(repeating: "0", count: 400))),
        Good(text: "1.5", value: .double(1.5)),
        Good(text: "0.5", value: .double(0.5)),
        Good(text: "-0.25", value: .double(-0.25)),
        Good(text: "1.0", value: .double(1)),
        Good(text: "1E3", value: .double(1000)),
        Good(text: "1e+2", value: .double(100)),
        Good(text: "-2.5e-3", value: .double(-0.0025)),
        Good(text: "0.1", value: .double(0.1)),
        Good(text: "1e400", value: .bigInteger("1e400")),
        Good(text: "-1e400", value: .bigInteger("-1e400")),
        Good(text: "true", value: .bool(true)),
        Good(text: "false", value: .bool(false)),
        Good(text: "null", value: .null),
        Good(text: "[]", value: .array([])),
        Good(text: "{}", value: .object([])),
        Good(text: " \t\r\n[ 1 , [ ] , { } ]\n", value: [1, [], [:]]),
        Good(text: #"{"b":1,"a":{"c":[true,null]}}"#, value: ["b": 1, "a": ["c": [true, nil]]]),
        Good(text: #"{"a":1,"b":{"a":2}}"#, value: ["a": 1, "b": ["a": 2]]),
        Good(text: #""\"\\\/\b\f\n\r\t""#, value: .string("\"\\/\u{8}\u{C}\n\r\t")),
        Good(text: #""\u00e9\u20AC""#, value: .string("é€")),
        Good(text: #""\ud83d\ude00""#, value: .string("😀")),
        Good(text: #""\uD83D\uDE00!""#, value: .string("😀!")),
        Good(text: #""\u0000""#, value: .string("\u{0}")),
        Good(text: "\"é😀 raw\"", value: .string("é😀 raw")),
        Good(text: "\"del\u{7F}\"", value: .string("del\u{7F}")),
        Good(text: "\"\"", value: .string("")),
    ]

    @Test(arguments: goodInputs)
    func validJSONParsesExactly(_ c: Good) throws {
        let value = try Self.parse(c.text)
        #expect(value == c.value)
    }

    @Test func integersAreExactNotRounded() throws {
        // 2^53 + 1 is not representable as a Double; an Int64 keeps it.
        #expect(try Self.parse("9007199254740993") == .int(9_007_199_254_740_993))
        #expect(try Self.parse("1099511627777") == .int(1_099_511_627_777))
    }

    @Test func byteOrderMarkIsTolerated() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        #expect(try JSONParser().parse(bom + Array(#"{"a":1}"#.utf8)) == ["a": 1])
        #expect(try JSONParser().parse(bom + Array(" [true] ".utf8)) == [true])
        let onlyBOM = try #require(Self.parseError(bom))
        #expect(onlyBOM.message == "the document is empty")
        let twoBOMs = try #require(Self.parseError(bom + bom + Array("1".utf8)))
        #expect(twoBOMs.message.contains("byte 0xEF"))
    }

    @Test func objectsKeepDocumentOrderAndAnswerByKey() throws {
        let value = try Self.parse(#"{"z":1,"a":2,"m":3}"#)
        guard case .object(let members) = value else {
            Issue.record("not an object: \(value)")
            return
        }
        #expect(members.map(\.key) == ["z", "a", "m"])
        #expect(value["a"] == .int(2))
        #expect(value["missing"] == nil)
        #expect(JSONValue.array([1])["a"] == nil)
        #expect(value != (["a": 2, "z": 1, "m": 3] as JSONValue), "order is part of equality")
    }

    @Test func typeNamesForMessages() {
        let names = ([nil, true, 1, .bigInteger("99999999999999999999"), .double(1.5), "s", [], [:]] as [JSONValue]).map(\.typeName)
        #expect(names == ["null", "boolean", "integer", "integer", "number", "string", "array", "object"])
    }

    // MARK: - Depth

    @Test func nestingUpToTheLimitParsesAndOneMoreFails() throws {
        let deepest = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try Self.parse(deepest) }
        let tooDeep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        let error = try #require(Self.parseError(tooDeep))
        #expect(error.message == "nesting deeper than 64 levels")
        #expect(error.column == 65)
    }

    @Test func depthLimitIsConfigurable() throws {
        let text = Array(#"{"a":{"b":{"c":1}}}"#.utf8)
        #expect(Self.parseError(text, maxDepth: 3) == nil)
        let error = try #require(Self.parseError(text, maxDepth: 2))
        #expect(error.message == "nesting deeper than 2 levels")
    }

    @Test func hundredThousandOpeningBracketsFailWithoutStackOverflow() throws {
        let arrays = try #require(Self.parseError([UInt8](repeating: UInt8(ascii: "["), count: 100_000)))
        #expect(arrays.message == "nesting deeper than 64 levels")
        let objects = try #require(Self.parseError(String(repeating: #"{"k":"#, count: 100_000)))
        #expect(objects.message == "nesting deeper than 64 levels")
        let mixed = try #require(Self.parseError(String(repeating: #"[{"k":"#, count: 50_000)))
        #expect(mixed.message == "nesting deeper than 64 levels")
    }

    // MARK: - Writing

    static let awkwardStrings: [String] = [
        "", "plain", "quote \" inside", "back\\slash", "new\nline", "carriage\rreturn", "tab\there",
        "nul\u{0}byte", "bell\u{7}", "unit separator\u{1F}", "delete\u{7F}", "slash/and</script>",
        "é€", "😀👍🏽", "\u{2028}\u{2029}", "\u{FEFF}bom", "\\u0041 not an escape", "\"\\\"\\\\\"",
    ]

    @Test(arguments: awkwardStrings)
    func stringsRoundTripThroughTheWriter(_ s: String) throws {
        let written = JSONValue.string(s).serialized()
        #expect(try Self.parse(written) == .string(s), "written as \(written)")
        #expect(!written.utf8.contains { $0 < 0x20 }, "raw control byte in \(written.debugDescription)")
        // As an object key too, compact and pretty.
        let object: JSONValue = .object([(key: s, value: .string(s)), (key: s + "2", value: [.string(s)])])
        #expect(try Self.parse(object.serialized()) == object)
        #expect(try Self.parse(object.serialized(pretty: true)) == object)
    }

    @Test func escapesAreTheShortForms() {
        let written = JSONValue.string("a\"b\\c\nd\re\tf\u{1}g\u{1F}h/").serialized()
        #expect(written == #""a\"b\\c\nd\re\tf\u0001g\u001fh/""#)
    }

    @Test func compactOutputIsExact() {
        let value: JSONValue = ["id": "x", "n": 1, "ok": true, "none": nil, "list": [1, 2], "empty": [:], "no": []]
        #expect(value.serialized() == #"{"id":"x","n":1,"ok":true,"none":null,"list":[1,2],"empty":{},"no":[]}"#)
    }

    @Test func prettyOutputIndentsByTwoSpaces() {
        let value: JSONValue = ["a": [1, 2], "b": [:], "c": [], "d": ["e": "f"]]
        #expect(value.serialized(pretty: true) == """
            {
              "a": [
                1,
                2
              ],
              "b": {},
              "c": [],
              "d": {
                "e": "f"
              }
            }
            """)
    }

    @Test func numbersRoundTrip() throws {
        for value: JSONValue in [.int(Int64.max), .int(Int64.min), .int(0), .bigInteger("123456789012345678901234567890"),
                                 .double(1.5), .double(-0.0025), .double(0.1), .double(1e300), .double(1.25e-300)] {
            #expect(try Self.parse(value.serialized()) == value, "\(value.serialized())")
        }
        #expect(JSONValue.int(Int64.min).serialized() == "-9223372036854775808")
        #expect(JSONValue.double(2).serialized() == "2")
        #expect(JSONValue.double(.infinity).serialized() == "null")
        #expect(JSONValue.double(.nan).serialized() == "null")
    }

    @Test func shippedCatalogRoundTripsByteForByte() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Catalog/catalog.json")
        let file = [UInt8](try Data(contentsOf: url))
        let value = try JSONParser().parse(file)
        let rewritten = Array((value.serialized(pretty: true) + "\n").utf8)
        let same = rewritten == file
        #expect(same, "the writer does not reproduce Catalog/catalog.json (\(rewritten.count) vs \(file.count) bytes)")
        #expect(try JSONParser().parse(value.serialized()) == value)
    }

    @Test func literalConveniences() {
        #expect(JSONValue(5) == .int(5))
        #expect(JSONValue(Int64(-5)) == .int(-5))
        #expect(JSONValue(String?.none) == .null)
        #expect(JSONValue(Optional("x")) == .string("x"))
    }
}
