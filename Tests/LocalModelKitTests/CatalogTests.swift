import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// The catalog loader: the shipped catalog against the real facts it was built from,
/// every rejection rule (each with its JSON path and message), and robustness against
/// hostile bytes.
@Suite(.networkGuard)
struct CatalogTests {
    // MARK: - Locations

    static let testsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let inputs = testsFolder.appendingPathComponent("Inputs")
    static let packageRoot = testsFolder.deletingLastPathComponent().deletingLastPathComponent()
    static let shippedCatalogPath = packageRoot.appendingPathComponent("Catalog/catalog.json").path
    /// The shipped catalog's bytes, as the file holds them (a missing file is an error, not
    /// an empty input every check would pass on).
    static func shippedCatalogBytes() throws -> [UInt8] {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: shippedCatalogPath)))
        try #require(!bytes.isEmpty, "\(shippedCatalogPath) is empty")
        return bytes
    }

    /// Runs `body` in a fresh temporary directory that is removed afterwards.
    static func withTemporaryDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("catalog-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        return try body(dir)
    }

    // MARK: - Asserting on the loader

    /// The issues the loader reports for `bytes`, or nil when it accepts them.
    static func issues(_ bytes: [UInt8]) -> [CatalogIssue]? {
        do {
            _ = try CatalogLoader().decode(bytes, source: "test.json")
            return nil
        } catch {
            return error.issues
        }
    }

    /// The error `load(contentsOf:)` throws for `path`, or nil when it loads.
    static func loadError(_ path: String) -> CatalogError? {
        do {
            _ = try CatalogLoader().load(contentsOf: path)
            return nil
        } catch {
            return error
        }
    }

    static func listing(_ issues: [CatalogIssue]) -> String {
        issues.map { "  \($0)" }.joined(separator: "\n")
    }

    /// Expects the loader to refuse `bytes` with an issue at `path` whose message contains
    /// `fragment`, and (unless `count` is nil) exactly `count` issues in all.
    static func expectRejected(_ bytes: [UInt8], at path: String, saying fragment: String, count: Int? = 1,
                               sourceLocation: SourceLocation = #_sourceLocation) {
        guard let issues = issues(bytes) else {
            Issue.record("the catalog was accepted; expected \(path): …\(fragment)…", sourceLocation: sourceLocation)
            return
        }
        let hit = issues.contains { $0.path == path && $0.message.contains(fragment) }
        #expect(hit, "no issue at \(path) saying \"\(fragment)\"; the loader said:\n\(listing(issues))",
                sourceLocation: sourceLocation)
        if let count {
            #expect(issues.count == count, "expected \(count) issue(s), got:\n\(listing(issues))",
                    sourceLocation: sourceLocation)
        }
    }

    static func expectAccepted(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> Catalog? {
        do {
            return try CatalogLoader().decode(bytes, source: "test.json")
        } catch {
            Issue.record("the catalog was refused:\n\(listing(error.issues))", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: - A small valid catalog, and variants of it

    static let hashA = String(repeating: "a", count: 64)
    static let hashB = String(repeating: "0123456789abcdef", count: 4)

    /// Two models: an llm fetched file by file (one file hashed, one size-only) and a voice
    /// bundle with an archive source and a loopback per-file fallback.
    static let baseText = """
        {
          "schemaVersion": 1,
          "catalogVersion": 3,
          "generatedAt": "2026-11-30T00:00:00Z",
          "models": [
            {
              "id": "tiny-llm",
              "kind": "llm",
              "displayName": "Tiny LLM",
              "requiredMb": 100,
              "autoEligible": true,
              "revision": "abc123",
              "files": [
                { "path": "config.json", "size": 10, "sha256": "\(hashA)" },
                { "path": "weights/model.bin", "size": 2048, "sha256": null }
              ],
              "sources": [ { "type": "files", "baseURL": "https://example.com/tiny/" } ]
            },
            {
              "id": "tiny-voice",
              "kind": "voice",
              "displayName": "Tiny Voice",
              "requiredMb": 50,
              "autoEligible": false,
              "files": [
                { "path": "voices.bin", "size": 500, "sha256": null },
                { "path": "espeak-ng-data/en_dict", "size": 7, "sha256": null }
              ],
              "sources": [
                { "type": "archive", "url": "https://example.com/voice.tar.bz2", "format": "tar.bz2",
                  "size": 400, "sha256": "\(hashB)", "stripComponents": 1 },
                { "type": "files", "baseURL": "http://127.0.0.1:8080/voice/" }
              ]
            }
          ]
        }
        """

    static let base: JSONValue = {
        do { return try JSONParser().parse(baseText) } catch { fatalError("the test base catalog is not JSON: \(error)") }
    }()

    enum Step { case key(String), index(Int) }

    /// "models[0].files[1].size" → key models, index 0, key files, index 1, key size.
    static func steps(_ path: String) -> [Step] {
        var out: [Step] = []
        for part in path.split(separator: ".") {
            var name = Substring(part)
            var indices: [Int] = []
            while name.hasSuffix("]"), let open = name.lastIndex(of: "[") {
                indices.insert(Int(name[name.index(after: open)..<name.index(before: name.endIndex)])!, at: 0)
                name = name[..<open]
            }
            if !name.isEmpty { out.append(.key(String(name))) }
            out.append(contentsOf: indices.map { Step.index($0) })
        }
        return out
    }

    /// `value` with the node at `steps` replaced by `new`, added (a new key or the next
    /// array index) or removed (`new == nil`). Returns nil for "remove this node".
    static func replacing(_ value: JSONValue, _ steps: ArraySlice<Step>, with new: JSONValue?) -> JSONValue? {
        guard let step = steps.first else { return new }
        switch (step, value) {
        case (.key(let key), .object(var members)):
            if let i = members.firstIndex(where: { $0.key == key }) {
                if let v = replacing(members[i].value, steps.dropFirst(), with: new) {
                    members[i].value = v
                } else {
                    members.remove(at: i)
                }
            } else {
                precondition(steps.count == 1, "no key \(key) on the way")
                if let new { members.append((key: key, value: new)) }
            }
            return .object(members)
        case (.index(let n), .array(var items)):
            if n == items.count, steps.count == 1 {
                if let new { items.append(new) }
            } else if let v = replacing(items[n], steps.dropFirst(), with: new) {
                items[n] = v
            } else {
                items.remove(at: n)
            }
            return .array(items)
        default:
            preconditionFailure("path step \(step) does not fit \(value.typeName)")
        }
    }

    /// The base catalog with each (path, value) edit applied; a nil value removes the key.
    static func variant(_ edits: [(String, JSONValue?)]) -> JSONValue {
        var doc = base
        for (path, value) in edits {
            doc = replacing(doc, steps(path)[...], with: value)!
        }
        return doc
    }

    /// For edits: remove the key.
    static let removed: JSONValue? = .none

    static func bytes(_ value: JSONValue) -> [UInt8] { Array(value.serialized(pretty: true).utf8) }

    /// One rejection rule: a catalog that breaks it, and the issue it must produce.
    struct Rejection: Sendable, CustomTestStringConvertible {
        var rule: String
        var bytes: [UInt8]
        var path: String
        var message: String
        var count: Int = 1
        var testDescription: String { rule }
    }

    /// The base with `path` set to `value` (nil removes it); the issue is expected at
    /// `issuePath` (default: `path`).
    static func rule(_ rule: String, _ path: String, _ value: JSONValue?, _ message: String,
                     at issuePath: String? = nil, and more: [(String, JSONValue?)] = [], count: Int = 1) -> Rejection {
        Rejection(rule: rule, bytes: bytes(variant([(path, value)] + more)), path: issuePath ?? path,
                  message: message, count: count)
    }

    /// The base, serialized, with one textual replacement (for what a JSONValue cannot express).
    static func rawRule(_ rule: String, replacing target: String, with replacement: String, _ message: String,
                        at path: String = "$") -> Rejection {
        let text = base.serialized(pretty: true)
        precondition(text.contains(target), "\(target) not in the base")
        return Rejection(rule: rule, bytes: Array(text.replacingOccurrences(of: target, with: replacement).utf8),
                         path: path, message: message)
    }

    // MARK: - The base is valid (so every rejection below is caused by its one edit)

    @Test func baseCatalogIsAcceptedWithEveryField() throws {
        guard let catalog = Self.expectAccepted(Self.bytes(Self.base)) else { return }
        #expect(catalog.schemaVersion == 1)
        #expect(catalog.catalogVersion == 3)
        #expect(catalog.generatedAt == "2026-11-30T00:00:00Z")
        #expect(catalog.models.map(\.id) == ["tiny-llm", "tiny-voice"])
        #expect(catalog.models.filter { $0.kind == .llm }.map(\.id) == ["tiny-llm"])

        let llm = try #require(catalog.model(id: "tiny-llm"))
        #expect(llm.kind == .llm)
        #expect(llm.displayName == "Tiny LLM")
        #expect(llm.requiredMb == 100)
        #expect(llm.autoEligible)
        #expect(llm.revision == "abc123")
        #expect(llm.files == [CatalogFile(path: "config.json", size: 10, sha256: Self.hashA),
                              CatalogFile(path: "weights/model.bin", size: 2048, sha256: nil)])
        #expect(llm.sources == [.files(baseURL: "https://example.com/tiny/")])
        #expect(llm.installedBytes == 2058)
        #expect(llm.downloadBytes == 2058)
        #expect(llm.hasSizeOnlyFiles)

        let voice = try #require(catalog.model(id: "tiny-voice"))
        #expect(voice.kind == .voice)
        #expect(!voice.autoEligible)
        #expect(voice.revision == nil)
        #expect(voice.sources == [
            .archive(ArchiveSource(url: "https://example.com/voice.tar.bz2", format: .tarBz2, size: 400,
                                   sha256: Self.hashB, stripComponents: 1)),
            .files(baseURL: "http://127.0.0.1:8080/voice/"),
        ])
        #expect(voice.installedBytes == 507)
        #expect(voice.downloadBytes == 400)
        #expect(!voice.hasSizeOnlyFiles, "the archive hash covers the size-only files")
        #expect(catalog.model(id: "nope") == nil)
    }

    @Test func catalogWithNoModelsIsAccepted() throws {
        let text = #"{"schemaVersion":1,"catalogVersion":1,"generatedAt":"2026-11-30T00:00:00Z","models":[]}"#
        guard let catalog = Self.expectAccepted(Array(text.utf8)) else { return }
        #expect(catalog.models.isEmpty)
        #expect(catalog.models.filter { $0.kind == .llm }.isEmpty)
        #expect(catalog.catalogVersion == 1)
    }

    // MARK: - The shipped catalog

    static let shippedIds = ["local-qwen3-0.6b", "local-qwen25-1.5b", "local-qwen3-1.7b", "local-qwen3-4b",
                             "local-qwen3-8b", "kokoro-en-v0_19"]

    @Test func bundledCatalogValidates() throws {
        let catalog = CatalogLoader().bundled()
        #expect(catalog.schemaVersion == 1)
        #expect(catalog.catalogVersion >= 1)
        #expect(catalog.models.map(\.id) == Self.shippedIds)
    }

    @Test func shippedCatalogFileLoadsAndEqualsTheBundledOne() throws {
        let loaded = try CatalogLoader().load(contentsOf: Self.shippedCatalogPath)
        let bundled = CatalogLoader().bundled()
        #expect(loaded.models.map(\.id) == Self.shippedIds)
        // (Compared as a Bool: on a failure, the message matters, not two 400-entry dumps.)
        let valuesMatch = loaded.models == bundled.models
        let firstDifferent = zip(loaded.models, bundled.models).first { $0 != $1 }.map { $0.0.id } ?? "(model count)"
        #expect(valuesMatch, "BundledCatalog.swift differs from Catalog/catalog.json at \(firstDifferent): run Scripts/embed-catalog")
        #expect(loaded.catalogVersion == bundled.catalogVersion)
        #expect(loaded.generatedAt == bundled.generatedAt)
        #expect(loaded.schemaVersion == bundled.schemaVersion)
    }

    @Test func shippedFilePathsAreByteOrderSorted() throws {
        for model in CatalogLoader().bundled().models {
            let paths = model.files.map(\.path)
            let sorted = paths.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            #expect(paths == sorted, "\(model.id): files are not in byte order")
        }
    }

    // MARK: - The shipped catalog against the facts

    struct FactsFile: Decodable {
        var path: String
        var url: String?
        var size: Int64
        var sha256: String?
    }

    struct FactsModel: Decodable {
        var id: String
        var revision: String?
        var files: [FactsFile]
        var totalBytes: Int64?
    }

    struct Facts: Decodable { var models: [FactsModel] }

    struct KokoroFacts: Decodable {
        struct Archive: Decodable {
            var url: String
            var size: Int64
            var sha256: String
            var format: String
            var topFolder: String
        }
        var bundle: String
        var baseURL: String
        var totalBytes: Int64
        var files: [FactsFile]
        var archive: Archive
    }

    /// Read with Foundation's decoder, independent of the JSON reader under test.
    static func facts() throws -> Facts {
        try JSONDecoder().decode(Facts.self, from: Data(contentsOf: inputs.appendingPathComponent("models.facts.json")))
    }

    static func kokoroFacts() throws -> KokoroFacts {
        try JSONDecoder().decode(KokoroFacts.self,
                                 from: Data(contentsOf: inputs.appendingPathComponent("kokoro-en-v0_19.files.json")))
    }

    /// The ladder table of shared/data/README.md.
    struct Rung: Sendable, CustomTestStringConvertible {
        var id: String
        var repo: String
        var requiredMb: Int
        var autoEligible: Bool
        var displayName: String
        var testDescription: String { id }
    }

    static let ladderTable: [Rung] = [
        Rung(id: "local-qwen3-0.6b", repo: "mlx-community/Qwen3-0.6B-4bit", requiredMb: 500, autoEligible: false,
             displayName: "Qwen 3 Mini Local"),
        Rung(id: "local-qwen25-1.5b", repo: "mlx-community/Qwen2.5-1.5B-Instruct-4bit", requiredMb: 1000,
             autoEligible: false, displayName: "Qwen 2.5 Local"),
        Rung(id: "local-qwen3-1.7b", repo: "mlx-community/Qwen3-1.7B-4bit", requiredMb: 1200, autoEligible: true,
             displayName: "Qwen 3 Local"),
        Rung(id: "local-qwen3-4b", repo: "mlx-community/Qwen3-4B-4bit", requiredMb: 2900, autoEligible: true,
             displayName: "Qwen 3 4B Local"),
        Rung(id: "local-qwen3-8b", repo: "mlx-community/Qwen3-8B-4bit", requiredMb: 5800, autoEligible: true,
             displayName: "Qwen 3 8B Local"),
    ]

    @Test(arguments: ladderTable)
    func ladderModelMatchesFacts(_ rung: Rung) throws {
        let model = try #require(CatalogLoader().bundled().model(id: rung.id))
        let fact = try #require(try Self.facts().models.first { $0.id == rung.repo }, "no facts for \(rung.repo)")
        let revision = try #require(fact.revision)

        #expect(model.kind == .llm)
        #expect(model.displayName == rung.displayName)
        #expect(model.requiredMb == rung.requiredMb)
        #expect(model.autoEligible == rung.autoEligible)
        #expect(model.revision == revision)

        #expect(fact.totalBytes != nil)
        #expect(model.installedBytes == fact.totalBytes)
        #expect(model.downloadBytes == fact.totalBytes)
        #expect(!model.hasSizeOnlyFiles)
        #expect(model.files.map(\.path) == fact.files.map(\.path))
        for (file, expected) in zip(model.files, fact.files) {
            #expect(file.size == expected.size, "\(rung.id) \(file.path)")
            #expect(file.sha256 == expected.sha256, "\(rung.id) \(file.path)")
            #expect(file.sha256 != nil, "\(rung.id) \(file.path) has a known hash in the facts")
        }

        let baseURL = "https://huggingface.co/\(rung.repo)/resolve/\(revision)/"
        #expect(model.sources == [.files(baseURL: baseURL)])
        for file in fact.files {
            #expect(file.url == baseURL + file.path, "baseURL + path is the facts' URL of \(file.path)")
        }
    }

    @Test func ladderIsTheLlmsInOrderSmallestFirst() throws {
        let ladder = CatalogLoader().bundled().models.filter { $0.kind == .llm }
        #expect(ladder.map(\.id) == Self.ladderTable.map(\.id))
        let sizes = ladder.map(\.requiredMb)
        #expect(sizes == sizes.sorted())
    }

    @Test func kokoroVoiceMatchesFacts() throws {
        let model = try #require(CatalogLoader().bundled().model(id: "kokoro-en-v0_19"))
        let kokoro = try Self.kokoroFacts()
        let release = try #require(try Self.facts().models.first { $0.id == "sherpa-onnx/kokoro-en-v0_19" })
        let releaseFile = try #require(release.files.first)

        #expect(model.kind == .voice)
        #expect(!model.autoEligible)
        #expect(model.files.count == 358)
        #expect(kokoro.files.count == 358)
        #expect(model.installedBytes == 369_304_124)
        #expect(kokoro.totalBytes == 369_304_124)
        #expect(model.files.map(\.path) == kokoro.files.map(\.path))
        for (file, expected) in zip(model.files, kokoro.files) {
            #expect(file.size == expected.size, "\(file.path)")
            #expect(file.sha256 == expected.sha256, "\(file.path)")
        }

        try #require(model.sources.count == 2)
        guard case .archive(let archive) = model.sources[0] else {
            Issue.record("the first source is not the archive: \(model.sources[0])")
            return
        }
        #expect(archive.url == kokoro.archive.url)
        #expect(archive.url == releaseFile.url)
        #expect(archive.format == .tarBz2)
        #expect(archive.format.rawValue == kokoro.archive.format)
        #expect(archive.size == 319_625_534)
        #expect(archive.size == kokoro.archive.size)
        #expect(archive.size == releaseFile.size)
        #expect(archive.sha256 == kokoro.archive.sha256)
        #expect(archive.sha256 == releaseFile.sha256)
        #expect(archive.stripComponents == 1, "the archive's top folder \(kokoro.archive.topFolder) is stripped")
        #expect(model.sources[1] == .files(baseURL: kokoro.baseURL))
        #expect(model.downloadBytes == 319_625_534)
        #expect(!model.hasSizeOnlyFiles, "the archive hash covers the files without their own hash")
    }

    // MARK: - Rejections: the document itself

    static let minimalText = #"{"schemaVersion":1,"catalogVersion":1,"generatedAt":"2026-11-30T00:00:00Z","models":[]}"#

    static let documentRejections: [Rejection] = [
        Rejection(rule: "empty file", bytes: [], path: "$", message: "the document is empty"),
        Rejection(rule: "only whitespace", bytes: Array(" \n\t\n".utf8), path: "$", message: "the document is empty"),
        Rejection(rule: "not JSON (YAML)", bytes: Array("schemaVersion: 1\nmodels: []\n".utf8), path: "$",
                  message: "not valid JSON: line 1, column 1: unexpected 's'"),
        Rejection(rule: "not JSON (truncated)", bytes: Array(minimalText.dropLast().utf8), path: "$",
                  message: "unexpected end of document inside an object"),
        rawRule("raw NUL byte inside a string", replacing: "Tiny LLM", with: "Tiny\u{0}LLM",
                "a NUL byte inside a string"),
        rawRule("raw NUL byte between tokens", replacing: #""kind": "llm""#, with: "\"kind\": \u{0}\"llm\"",
                "a NUL byte where a value should start"),
        Rejection(rule: "raw NUL byte after the document", bytes: Array(minimalText.utf8) + [0], path: "$",
                  message: "unexpected text after the JSON value"),
        Rejection(rule: "the document is an array", bytes: Array("[]".utf8), path: "$",
                  message: "expected an object, found array"),
        Rejection(rule: "the document is a string", bytes: Array("\"catalog\"".utf8), path: "$",
                  message: "expected an object, found string"),
        rawRule("duplicate key in the top object", replacing: #""catalogVersion": 3,"#,
                with: #""catalogVersion": 3, "catalogVersion": 4,"#, "duplicate key \"catalogVersion\""),
        rawRule("duplicate key in a file object", replacing: #""size": 10,"#, with: #""size": 10, "size": 11,"#,
                "duplicate key \"size\""),
        rawRule("duplicate key spelled with an escape", replacing: #""kind": "llm""#,
                with: #""kind": "llm", "\u006bind": "voice""#, "duplicate key \"kind\""),
    ]

    @Test(arguments: documentRejections)
    func documentIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test func notJSONMessageSaysWhere() throws {
        let text = "{\n  \"schemaVersion\": 1,\n  \"catalogVersion\": 01\n}"
        let issues = try #require(Self.issues(Array(text.utf8)))
        #expect(issues == [CatalogIssue(path: "$", message: "not valid JSON: line 3, column 21: numbers must not have leading zeros")])
    }

    // MARK: - Rejections: types

    static let typeRejections: [Rejection] = [
        rule("string for a file size", "models[0].files[0].size", "10", "expected an integer, found string"),
        rule("number for an id", "models[0].id", 7, "expected a string, found integer"),
        rule("object for files", "models[0].files", ["path": "a"], "expected an array, found object"),
        rule("object for sources", "models[0].sources", [:], "expected an array, found object"),
        rule("object for models", "models", [:], "expected an array, found object"),
        rule("string for a model", "models[0]", "tiny-llm", "expected an object, found string"),
        rule("array for a file", "models[0].files[0]", [], "expected an object, found array"),
        rule("string for a source", "models[0].sources[0]", "https://example.com/tiny/",
             "expected an object, found string"),
        rule("string for autoEligible", "models[0].autoEligible", "yes", "expected true or false, found string"),
        rule("boolean for requiredMb", "models[0].requiredMb", true, "expected an integer, found boolean"),
        rule("null for displayName", "models[0].displayName", .null, "expected a string, found null"),
        rule("string for catalogVersion", "catalogVersion", "3", "expected an integer, found string"),
        rule("number for generatedAt", "generatedAt", 20261130, "expected a string, found integer"),
        rule("number for a path", "models[0].files[0].path", 1, "expected a string, found integer"),
        rule("number for a baseURL", "models[0].sources[0].baseURL", 443, "expected a string, found integer"),
        rule("string for stripComponents", "models[1].sources[0].stripComponents", "1",
             "expected an integer, found string"),
        rule("number for kind", "models[0].kind", 1, "expected a string, found integer"),
        rule("number for revision", "models[0].revision", 5, "expected a string, found integer"),
    ]

    @Test(arguments: typeRejections)
    func wrongTypeIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    static let missingKeyRejections: [Rejection] = [
        rule("missing schemaVersion", "schemaVersion", removed, "missing"),
        rule("missing generatedAt", "generatedAt", removed, "missing"),
        rule("missing models", "models", removed, "missing"),
        rule("missing id", "models[0].id", removed, "missing"),
        rule("missing requiredMb", "models[0].requiredMb", removed, "missing"),
        rule("missing autoEligible", "models[0].autoEligible", removed, "missing"),
        rule("missing files", "models[0].files", removed, "missing"),
        rule("missing sources", "models[0].sources", removed, "missing"),
        rule("missing file path", "models[0].files[0].path", removed, "missing"),
        rule("missing file size", "models[0].files[0].size", removed, "missing"),
        rule("missing baseURL", "models[0].sources[0].baseURL", removed, "missing"),
        rule("missing source type", "models[0].sources[0].type", removed, "missing (\"files\" or \"archive\")"),
        rule("missing archive url", "models[1].sources[0].url", removed, "missing"),
        rule("missing archive format", "models[1].sources[0].format", removed, "missing"),
        rule("missing archive size", "models[1].sources[0].size", removed, "missing"),
    ]

    @Test(arguments: missingKeyRejections)
    func missingKeyIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    // MARK: - Rejections: numbers

    static let numberRejections: [Rejection] = [
        rule("size 2^70", "models[0].files[0].size", .bigInteger("1180591620717411303424"),
             "number 1180591620717411303424 is out of range"),
        rule("size Int64.max + 1", "models[0].files[0].size", .bigInteger("9223372036854775808"), "is out of range"),
        rule("size 1e400", "models[0].files[0].size", .bigInteger("1e400"), "number 1e400 is out of range"),
        rule("size 1 TiB + 1", "models[0].files[0].size", .int((1 << 40) + 1),
             "1099511627777 bytes is larger than the limit of 1099511627776 bytes"),
        rule("archive size 1 TiB + 1", "models[1].sources[0].size", .int((1 << 40) + 1),
             "larger than the limit of 1099511627776 bytes"),
        rule("files adding up to more than 1 TiB", "models[0].files[0].size", .int(1 << 40),
             "more than the 1 TiB limit", at: "models[0].files", and: [("models[0].files[1].size", .int(1 << 40))]),
        rule("requiredMb too big", "models[0].requiredMb", 1_048_577,
             "1048577 MB is larger than the limit of 1048576 MB"),
        rule("requiredMb 2^70", "models[0].requiredMb", .bigInteger("1180591620717411303424"), "out of range"),
        rule("size zero", "models[0].files[0].size", 0, "must be positive, found 0"),
        rule("size negative", "models[0].files[0].size", -1, "must be positive, found -1"),
        rule("size very negative", "models[0].files[0].size", .int(.min), "must be positive, found -9223372036854775808"),
        rule("archive size zero", "models[1].sources[0].size", 0, "must be positive, found 0"),
        rule("requiredMb zero", "models[0].requiredMb", 0, "must be positive, found 0"),
        rule("float size", "models[0].files[0].size", .double(10.5), "expected an integer, found 10.5"),
        rule("float requiredMb", "models[0].requiredMb", .double(99.5), "expected an integer, found 99.5"),
    ]

    @Test(arguments: numberRejections)
    func badNumberIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test func sizeOfExactlyOneTiBIsAccepted() {
        // One file of exactly 1 TiB (the other file removed so the total is 1 TiB too).
        let doc = Self.variant([("models[0].files[1].size", .int(1 << 40)), ("models[0].files[0]", Self.removed)])
        guard let catalog = Self.expectAccepted(Self.bytes(doc)) else { return }
        #expect(catalog.model(id: "tiny-llm")?.files.map(\.size) == [1 << 40])
        #expect(catalog.model(id: "tiny-llm")?.installedBytes == 1 << 40)
    }

    // MARK: - Rejections: ids, kinds, names

    static let idRejections: [Rejection] = [
        rule("id ../x", "models[0].id", "../x", "\"../x\" is not a safe folder name"),
        rule("id with uppercase A", "models[0].id", "A", "\"A\" is not a safe folder name"),
        rule("id with uppercase inside", "models[0].id", "qwen-A", "\"qwen-A\" is not a safe folder name"),
        rule("id .hidden", "models[0].id", ".hidden", "\".hidden\" is not a safe folder name"),
        rule("id a/b", "models[0].id", "a/b", "\"a/b\" is not a safe folder name"),
        rule("id with a space", "models[0].id", "a b", "is not a safe folder name"),
        rule("id empty", "models[0].id", "", "must not be empty"),
        rule("id voices (reserved)", "models[0].id", "voices", "\"voices\" is reserved"),
        rule("id records.sqlite3 (reserved)", "models[0].id", "records.sqlite3", "reserved"),
        rule("id of 65 characters", "models[0].id", .string(String(repeating: "a", count: 65)), "longer than 64 bytes"),
        rule("id with a control character", "models[0].id", "a\u{1}b", "control character"),
    ]

    @Test(arguments: idRejections)
    func unsafeIdIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test(arguments: ["a", "0", "local-qwen3-0.6b", "kokoro-en-v0_19", String(repeating: "z", count: 64)])
    func safeIdIsAccepted(_ id: String) throws {
        guard let catalog = Self.expectAccepted(Self.bytes(Self.variant([("models[0].id", .string(id))]))) else { return }
        #expect(catalog.models.first?.id == id)
    }

    static let modelRejections: [Rejection] = [
        rule("unknown kind", "models[0].kind", "tts", "unknown kind \"tts\" (known: llm, voice)"),
        rule("kind in the wrong case", "models[0].kind", "LLM", "unknown kind \"LLM\""),
        rule("duplicate id", "models[1].id", "tiny-llm", "duplicate id \"tiny-llm\" (also models[0])"),
        rule("autoEligible on a voice model", "models[1].autoEligible", true, "only llm models can be auto-eligible"),
        rule("blank displayName", "models[0].displayName", "   ", "must not be empty"),
        rule("displayName over 200 bytes", "models[0].displayName", .string(String(repeating: "x", count: 201)),
             "longer than 200 bytes"),
        rule("empty files", "models[0].files", [], "must not be empty"),
        rule("empty sources", "models[0].sources", [], "must not be empty"),
        rule("unknown source type", "models[0].sources[0].type", "torrent",
             "unknown source type \"torrent\" (known: files, archive)"),
    ]

    @Test(arguments: modelRejections)
    func badModelIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test func duplicateIdIsReportedEvenWhenTheFirstModelHasOtherProblems() {
        // "Every problem, not just the first": fixing models[0].files must not reveal a new error.
        let doc = Self.variant([("models[0].files[0].size", 0), ("models[1].id", "tiny-llm")])
        Self.expectRejected(Self.bytes(doc), at: "models[1].id", saying: "duplicate id \"tiny-llm\" (also models[0])",
                            count: 2)
    }

    @Test func duplicateIdFurtherDownNamesTheFirstIndex() {
        // A third model reusing the voice's id: the message names models[1], not models[0].
        guard case .array(let models)? = Self.base["models"] else { Issue.record("no models"); return }
        let doc = Self.variant([("models[2]", models[1])])
        Self.expectRejected(Self.bytes(doc), at: "models[2].id", saying: "duplicate id \"tiny-voice\" (also models[1])")
    }

    // MARK: - Rejections: file paths

    static let pathRejections: [Rejection] = [
        rule("absolute path", "models[0].files[0].path", "/etc/passwd", "\"/etc/passwd\" is an absolute path"),
        rule("path starting with ..", "models[0].files[0].path", "../escape", "contains '..'"),
        rule("path with .. inside", "models[0].files[0].path", "a/../../b", "contains '..'"),
        rule("path that is ..", "models[0].files[0].path", "..", "contains '..'"),
        rule("path with a . segment", "models[0].files[0].path", "./config.json", "contains a '.' segment"),
        rule("path with a . segment inside", "models[0].files[0].path", "a/./b", "contains a '.' segment"),
        rule("path with //", "models[0].files[0].path", "a//b", "contains an empty segment"),
        rule("path with a trailing /", "models[0].files[0].path", "dir/", "contains an empty segment"),
        rule("path with a backslash", "models[0].files[0].path", "a\\b", "contains a backslash"),
        rule("path with a backslash escape", "models[0].files[0].path", "..\\..\\x", "contains a backslash"),
        rule("empty path", "models[0].files[0].path", "", "must not be empty"),
        rule("path with a control character", "models[0].files[0].path", "a\nb", "control character"),
        rule("path segment over 255 bytes", "models[0].files[0].path",
             .string("d/" + String(repeating: "x", count: 256)), "longer than 255 bytes"),
        rule("duplicate path", "models[0].files[1].path", "config.json",
             "duplicate path \"config.json\" (also models[0].files[0])"),
        rule("case-only duplicate path", "models[0].files[1].path", "Config.JSON",
             "differs only in letter case from models[0].files[0]"),
        rule("a file that another path needs as a folder", "models[0].files[0].path", "weights",
             "\"weights\" is a file but \"weights/model.bin\" needs it to be a folder"),
        rule("a folder-needing path before the file", "models[0].files[0].path", "config.json/inner",
             "\"config.json\" is a file but \"config.json/inner\" needs it to be a folder", at: "models[0].files[1].path",
             and: [("models[0].files[1].path", "config.json")]),
    ]

    @Test(arguments: pathRejections)
    func unsafePathIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test func nonASCIIAndDeepPathsAreAccepted() throws {
        let doc = Self.variant([("models[0].files[0].path", "données/é ü.json"),
                                ("models[0].files[1].path", "a/b/c/d/e/f.bin")])
        guard let catalog = Self.expectAccepted(Self.bytes(doc)) else { return }
        #expect(catalog.models[0].files.map(\.path) == ["données/é ü.json", "a/b/c/d/e/f.bin"])
    }

    // MARK: - Rejections: hashes

    static let hashRejections: [Rejection] = [
        rule("uppercase sha256", "models[0].files[0].sha256", .string(String(repeating: "A", count: 64)),
             "not 64 lowercase hex characters"),
        rule("sha256 of 63 characters", "models[0].files[0].sha256", .string(String(repeating: "a", count: 63)),
             "not 64 lowercase hex characters"),
        rule("sha256 of 65 characters", "models[0].files[0].sha256", .string(String(repeating: "a", count: 65)),
             "not 64 lowercase hex characters"),
        rule("non-hex sha256", "models[0].files[0].sha256", .string(String(repeating: "g", count: 64)),
             "not 64 lowercase hex characters"),
        rule("sha256 with a prefix", "models[0].files[0].sha256", .string("sha256:" + String(repeating: "a", count: 57)),
             "not 64 lowercase hex characters"),
        rule("sha256 as a number", "models[0].files[0].sha256", 1234, "expected a string, found integer"),
        rule("missing sha256 key", "models[0].files[0].sha256", removed, "missing (use null when the hash is unknown)"),
        rule("archive sha256 null", "models[1].sources[0].sha256", .null, "must be a SHA-256 (64 lowercase hex characters), not null"),
        rule("archive sha256 missing", "models[1].sources[0].sha256", removed, "missing"),
        rule("archive sha256 uppercase", "models[1].sources[0].sha256", .string(Self.hashB.uppercased()),
             "not 64 lowercase hex characters"),
    ]

    @Test(arguments: hashRejections)
    func malformedHashIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test func missingArchiveHashIsNotToldToUseNull() throws {
        // null is refused for an archive (its hash is what makes size-only files safe), so the
        // message for a missing archive sha256 must not advise null.
        let doc = Self.variant([("models[1].sources[0].sha256", Self.removed)])
        let issues = try #require(Self.issues(Self.bytes(doc)))
        let issue = try #require(issues.first { $0.path == "models[1].sources[0].sha256" })
        #expect(!issue.message.contains("null"), "advises null, which the loader then refuses: \(issue)")
    }

    // MARK: - Rejections: URLs

    static let urlRejections: [Rejection] = [
        rule("http to a public host", "models[0].sources[0].baseURL", "http://example.com/tiny/",
             "is plain http; only https is allowed"),
        rule("http archive to a public host", "models[1].sources[0].url", "http://example.com/voice.tar.bz2",
             "is plain http; only https is allowed"),
        rule("http to a host that starts like 127.0.0.1", "models[0].sources[0].baseURL", "http://127.0.0.1.evil.example/x/",
             "is plain http"),
        rule("http to a host that starts like localhost", "models[0].sources[0].baseURL", "http://localhost.evil.example/x/",
             "is plain http"),
        rule("http to a host that starts like [::1]", "models[0].sources[0].baseURL", "http://[::1].evil.example/x/",
             "is plain http"),
        rule("ftp", "models[0].sources[0].baseURL", "ftp://example.com/tiny/", "is not an https URL"),
        rule("file URL", "models[0].sources[0].baseURL", "file:///etc/", "is not an https URL"),
        rule("relative URL", "models[1].sources[0].url", "voice.tar.bz2", "is not an https URL"),
        rule("credentials", "models[0].sources[0].baseURL", "https://user:secret@example.com/tiny/",
             "must not carry credentials"),
        rule("credentials hiding a public host behind localhost", "models[0].sources[0].baseURL",
             "http://localhost:80@example.com/tiny/", "must not carry credentials"),
        rule("no host", "models[0].sources[0].baseURL", "https:///tiny/", "has no host"),
        rule("a space", "models[0].sources[0].baseURL", "https://example.com/my models/", "contains spaces"),
        rule("baseURL without a trailing slash", "models[0].sources[0].baseURL", "https://example.com/tiny",
             "must end with '/'"),
    ]

    @Test(arguments: urlRejections)
    func unsafeURLIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test(arguments: ["http://127.0.0.1/m/", "http://127.0.0.1:8080/m/", "http://127.9.8.7:1/m/", "http://localhost/m/",
                      "http://localhost:3000/a/b/", "http://[::1]/m/", "http://[::1]:9000/m/", "HTTPS://Example.COM/m/",
                      "https://huggingface.co/x/resolve/0123/"])
    func allowedBaseURLIsAccepted(_ url: String) throws {
        guard let catalog = Self.expectAccepted(Self.bytes(Self.variant([("models[0].sources[0].baseURL", .string(url))]))) else { return }
        #expect(catalog.models[0].sources == [.files(baseURL: url)])
    }

    // MARK: - Rejections: source URL paths that climb out

    /// `..`, `.`, an encoded separator, an encoded NUL or double encoding in the path of a
    /// source URL: a mirror writes files under that path, so it must not climb out.
    static let urlPathRejections: [Rejection] = [
        ("'..'", "https://example.com/a/../tiny/", "'..' segment"),
        ("'.'", "https://example.com/a/./tiny/", "'.' segment"),
        ("%2e%2e", "https://example.com/%2e%2e/tiny/", "'..' segment"),
        ("%2E%2E", "https://example.com/a/%2E%2E/tiny/", "'..' segment"),
        (".%2e", "https://example.com/.%2e/tiny/", "'..' segment"),
        ("%2e.", "https://example.com/%2e./tiny/", "'..' segment"),
        ("%2e", "https://example.com/%2e/tiny/", "'.' segment"),
        ("%2F", "https://example.com/a%2F..%2Ftiny/", "encoded '/'"),
        ("%2f", "https://example.com/a%2ftiny/", "encoded '/'"),
        ("%5C", "https://example.com/a%5C..%5Ctiny/", "encoded '\\'"),
        ("%5c", "https://example.com/a%5ctiny/", "encoded '\\'"),
        ("%00", "https://example.com/a%00/tiny/", "encoded NUL"),
        ("%252e", "https://example.com/%252e%252e/tiny/", "'%25'"),
        ("a backslash", "https://example.com/a\\..\\tiny/", "backslash"),
        ("a '%' without two hex digits", "https://example.com/a%zz/tiny/", "two hex digits"),
        ("a '%' at the end", "https://example.com/tiny/%", "two hex digits"),
    ].map { name, url, message in rule("baseURL with \(name)", "models[0].sources[0].baseURL", .string(url), message) }
    + [
        rule("archive url with %2e%2e", "models[1].sources[0].url", "https://example.com/x/%2e%2e/voice.tar.bz2", "'..' segment"),
        rule("archive url with '..'", "models[1].sources[0].url", "https://example.com/x/../voice.tar.bz2", "'..' segment"),
        rule("archive url with %2F", "models[1].sources[0].url", "https://example.com/x%2Fvoice.tar.bz2", "encoded '/'"),
    ]

    @Test(arguments: urlPathRejections)
    func climbingURLPathIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    /// Dots inside a name, `...`, encoded ordinary characters, and anything after `?` or `#`
    /// are not a way out of the folder.
    @Test(arguments: ["https://example.com/a..b/", "https://example.com/.../", "https://example.com/.hidden/",
                      "https://example.com/my%20models/", "https://example.com/a%2Eb/", "https://example.com/m/?p=../%2F/",
                      "https://example.com/m/#../"])
    func harmlessURLPathIsAccepted(_ url: String) throws {
        guard let catalog = Self.expectAccepted(Self.bytes(Self.variant([("models[0].sources[0].baseURL", .string(url))]))) else { return }
        #expect(catalog.models[0].sources == [.files(baseURL: url)])
    }

    @Test func loopbackArchiveURLIsAccepted() throws {
        let url = "http://127.0.0.1:8080/voice.tar.bz2"
        guard let catalog = Self.expectAccepted(Self.bytes(Self.variant([("models[1].sources[0].url", .string(url))]))) else { return }
        #expect(catalog.models[1].sources.first?.primaryURL == url)
    }

    // MARK: - Rejections: archive sources

    static let archiveRejections: [Rejection] = [
        rule("unknown archive format", "models[1].sources[0].format", "rar",
             "unknown format \"rar\" (known: tar.bz2, tar.gz, tar.xz, tar.zst, tar, zip)"),
        rule("archive format in the wrong case", "models[1].sources[0].format", "TAR.BZ2", "unknown format \"TAR.BZ2\""),
        rule("stripComponents negative", "models[1].sources[0].stripComponents", -1, "must be at least 0, found -1"),
        rule("stripComponents 17", "models[1].sources[0].stripComponents", 17, "17 is larger than the limit of 16"),
        rule("stripComponents float", "models[1].sources[0].stripComponents", .double(1.5), "expected an integer, found 1.5"),
    ]

    @Test(arguments: archiveRejections)
    func badArchiveSourceIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    static let authRejections: [Rejection] = [
        rule("unknown credential on a files source", "models[0].sources[0].auth", "github", "unknown credential \"github\" (known: huggingface)"),
        rule("unknown credential on an archive source", "models[1].sources[0].auth", "HuggingFace", "unknown credential \"HuggingFace\""),
        rule("credential that is not a string", "models[0].sources[0].auth", true, "expected a string, found boolean"),
    ]

    @Test(arguments: authRejections)
    func badSourceAuthIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test("a source's \"auth\": \"huggingface\" is read onto that source only")
    func sourceAuthIsRead() {
        let doc = Self.variant([("models[1].sources[0].auth", "huggingface")])
        guard let catalog = Self.expectAccepted(Self.bytes(doc)) else { return }
        #expect(catalog.models[0].sourceAuth.isEmpty)
        #expect(catalog.models[1].sourceAuth == [catalog.models[1].sources[0]: .huggingface])
    }

    @Test(arguments: [0, 16])
    func stripComponentsAtTheLimitsIsAccepted(_ strip: Int) throws {
        let doc = Self.variant([("models[1].sources[0].stripComponents", JSONValue(strip))])
        guard let catalog = Self.expectAccepted(Self.bytes(doc)) else { return }
        guard case .archive(let archive)? = catalog.models[1].sources.first else {
            Issue.record("no archive source")
            return
        }
        #expect(archive.stripComponents == strip)
    }

    // MARK: - Rejections: unknown keys

    static let unknownKeyRejections: [Rejection] = [
        rule("unknown key at the top", "comment", "hi", "unknown key (allowed: schemaVersion, catalogVersion, generatedAt, models, expiresAt, nextKey)"),
        rule("unknown key in a model", "models[0].size", 5, "unknown key (allowed: id, kind, displayName"),
        rule("unknown key in a file", "models[0].files[0].md5", "x", "unknown key (allowed: path, size, sha256)"),
        rule("unknown key in a files source", "models[0].sources[0].mirror", "https://example.org/",
             "unknown key (allowed: type, baseURL, auth)"),
        rule("unknown key in an archive source", "models[1].sources[0].strip", 1,
             "unknown key (allowed: type, url, format, size, sha256, stripComponents, auth)"),
        rule("misspelt sha256 key", "models[0].files[0].sha265", .string(hashA), "unknown key",
             and: [("models[0].files[0].sha256", removed)], count: 2),
    ]

    @Test(arguments: unknownKeyRejections)
    func unknownKeyIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    // MARK: - Rejections: the top-level fields

    static let topRejections: [Rejection] = [
        rule("schemaVersion 2 (newer)", "schemaVersion", 2,
             "2 is newer than this glasses-local understands (1); update glasses-local"),
        rule("schemaVersion 0", "schemaVersion", 0, "must be positive, found 0"),
        rule("catalogVersion 0", "catalogVersion", 0, "must be positive, found 0"),
        rule("catalogVersion negative", "catalogVersion", -3, "must be positive, found -3"),
        rule("catalogVersion beyond Int32", "catalogVersion", .int(1 << 31), "larger than the limit of 2147483647"),
        rule("generatedAt is a date only", "generatedAt", "2026-11-30", "not an RFC 3339 UTC time"),
        rule("generatedAt is prose", "generatedAt", "yesterday", "not an RFC 3339 UTC time"),
        rule("generatedAt has an offset", "generatedAt", "2026-11-30T00:00:00+01:00", "not an RFC 3339 UTC time"),
        rule("generatedAt has a space", "generatedAt", "2026-11-30 00:00:00Z", "not an RFC 3339 UTC time"),
        rule("generatedAt with an empty fraction", "generatedAt", "2026-11-30T00:00:00.Z", "not an RFC 3339 UTC time"),
        rule("generatedAt with month 13", "generatedAt", "2026-13-01T00:00:00Z", "not an RFC 3339 UTC time"),
        rule("generatedAt at 25 o'clock", "generatedAt", "2026-11-30T25:00:00Z", "not an RFC 3339 UTC time"),
    ]

    @Test(arguments: topRejections)
    func badTopLevelFieldIsRejected(_ c: Rejection) {
        Self.expectRejected(c.bytes, at: c.path, saying: c.message, count: c.count)
    }

    @Test(arguments: ["2026-11-30T00:00:00Z", "2026-11-30T23:59:59.123456Z", "1999-01-01T00:00:00Z"])
    func goodGeneratedAtIsAccepted(_ stamp: String) throws {
        guard let catalog = Self.expectAccepted(Self.bytes(Self.variant([("generatedAt", .string(stamp))]))) else { return }
        #expect(catalog.generatedAt == stamp)
    }

    // MARK: - Every problem, not just the first

    @Test func severalProblemsAreAllReported() throws {
        let doc = Self.variant([
            ("catalogVersion", 0),
            ("comment", "stray"),
            ("models[0].id", "Tiny"),
            ("models[0].files[0].size", -5),
            ("models[0].files[1].sha256", "ABC"),
            ("models[1].sources[0].url", "http://example.com/voice.tar.bz2"),
            ("models[1].kind", "speech"),
        ])
        let issues = try #require(Self.issues(Self.bytes(doc)))
        let expected: [(String, String)] = [
            ("comment", "unknown key"),
            ("catalogVersion", "must be positive"),
            ("models[0].id", "not a safe folder name"),
            ("models[0].files[0].size", "must be positive"),
            ("models[0].files[1].sha256", "not 64 lowercase hex"),
            ("models[1].kind", "unknown kind \"speech\""),
            ("models[1].sources[0].url", "plain http"),
        ]
        #expect(issues.count == expected.count, "got:\n\(Self.listing(issues))")
        #expect(Set(issues.map(\.path)) == Set(expected.map(\.0)))
        for (path, fragment) in expected {
            #expect(issues.contains { $0.path == path && $0.message.contains(fragment) },
                    "missing \(path): …\(fragment)…; got:\n\(Self.listing(issues))")
        }
    }

    @Test func brokenFixtureFileReportsEveryProblemAndNamesTheFile() throws {
        let path = Self.inputs.appendingPathComponent("catalogs/several-problems.json").path
        let error = try #require(Self.loadError(path), "the broken fixture was accepted")
        #expect(error.source == path)
        #expect(error.issues.map(\.path) == [
            "models[0].id", "models[0].files[0].path", "models[0].files[1].size",
            "models[0].sources[0].baseURL", "models[1].autoEligible",
        ], "got:\n\(Self.listing(error.issues))")
        let text = error.description
        #expect(text.contains("catalog \(path) is invalid (5 problems):"))
        #expect(text.contains("\n  models[0].files[0].path: \"/etc/passwd\" is an absolute path"))
        #expect(text.contains("\n  models[1].autoEligible: only llm models can be auto-eligible"))
        #expect(text.hasSuffix("Fix the catalog (see Catalog/catalog.schema.json) or pass a valid one with --catalog."))
    }

    @Test func windowsEditedFixtureWithBOMAndCRLFLoads() throws {
        let path = Self.inputs.appendingPathComponent("catalogs/bom-crlf.json").path
        let raw = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(raw.starts(with: [0xEF, 0xBB, 0xBF]), "the fixture keeps its byte-order mark")
        #expect(raw.contains(0x0D), "the fixture keeps its CRLF line ends")
        let catalog = try CatalogLoader().load(contentsOf: path)
        #expect(catalog.models.map(\.id) == ["crlf-model"])
        #expect(catalog.models.first?.files == [CatalogFile(path: "model.bin", size: 42, sha256: nil)])
    }

    // MARK: - Files on disk

    @Test func emptyFileOnDiskIsRejected() throws {
        try Self.withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("catalog.json").path
            #expect(FileManager.default.createFile(atPath: path, contents: Data()))
            let error = try #require(Self.loadError(path), "an empty file was accepted")
            #expect(error.source == path)
            #expect(error.issues == [CatalogIssue(path: "$", message: "not valid JSON: line 1, column 1: the document is empty")])
        }
    }

    @Test func missingFileIsReportedWithItsPath() throws {
        try Self.withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("nope.json").path
            let error = try #require(Self.loadError(path), "a missing file was accepted")
            #expect(error.source == path)
            #expect(error.issues.count == 1)
            #expect(error.issues.first?.path == "$")
            #expect(error.issues.first?.message.contains("No such file or directory") == true, "\(error)")
        }
    }

    @Test func directoryInsteadOfAFileIsRejected() throws {
        try Self.withTemporaryDirectory { dir in
            let error = try #require(Self.loadError(dir.path), "a directory was accepted")
            #expect(error.issues.count == 1)
            #expect(error.issues.first?.message.contains("is a folder, not a regular file") == true, "\(error)")
        }
    }

    @Test func fileLargerThanTheCapIsRefused() throws {
        try Self.withTemporaryDirectory { dir in
            // Valid JSON padded with spaces: the size alone must make it fail.
            let path = dir.appendingPathComponent("huge.json").path
            var bytes = Array(Self.minimalText.utf8)
            bytes += [UInt8](repeating: 0x20, count: CatalogLoader.maxCatalogBytes + 1 - bytes.count)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let error = try #require(Self.loadError(path), "a file over \(CatalogLoader.maxCatalogBytes) bytes was accepted")
            #expect(error.source == path)
            #expect(error.issues.count == 1)
            #expect(error.issues.first?.path == "$")
            let message = error.issues.first?.message ?? ""
            #expect(message.contains("larger than the \(CatalogLoader.maxCatalogBytes) byte limit"), "\(message)")
        }
    }

    @Test func fileExactlyAtTheCapIsRead() throws {
        try Self.withTemporaryDirectory { dir in
            let path = dir.appendingPathComponent("full.json").path
            var bytes = Array(Self.minimalText.utf8)
            bytes += [UInt8](repeating: 0x20, count: CatalogLoader.maxCatalogBytes - bytes.count)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let catalog = try CatalogLoader().load(contentsOf: path)
            #expect(catalog.models.isEmpty)
        }
    }

    @Test func bytesLargerThanTheCapAreRefusedByDecode() {
        var bytes = Array(Self.minimalText.utf8)
        bytes += [UInt8](repeating: 0x20, count: CatalogLoader.maxCatalogBytes + 1 - bytes.count)
        Self.expectRejected(bytes, at: "$", saying: "larger than the 16 MiB limit for a catalog")
    }

    // MARK: - Robustness

    /// SplitMix64: a tiny seeded generator, so every run feeds the same mutations.
    struct SplitMix64: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Bytes that matter to a JSON reader, more likely to reach deep code than random ones.
    static let interestingBytes: [UInt8] = Array("\"{}[],:\\0123456789-+.eEtfnu /".utf8) + [0x00, 0x0A, 0x1F, 0x7F, 0x80, 0xC3, 0xED, 0xEF, 0xFF]

    static func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            guard !bytes.isEmpty else { break }
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<6, using: &rng) {
            case 0:
                bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &rng)
            case 1:
                bytes[at] = interestingBytes.randomElement(using: &rng)!
            case 2:
                bytes.removeSubrange(at...)
            case 3:
                let insert = (0..<Int.random(in: 1...8, using: &rng)).map { _ in
                    Bool.random(using: &rng) ? interestingBytes.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
                }
                bytes.insert(contentsOf: insert, at: at)
            case 4:
                bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...64, using: &rng)))
            default:
                let end = min(bytes.count, at + Int.random(in: 1...200, using: &rng))
                let copy = bytes[at..<end]
                bytes.insert(contentsOf: copy, at: Int.random(in: 0...bytes.count, using: &rng))
            }
        }
        return bytes
    }

    /// What an accepted catalog must still guarantee, whatever bytes it came from.
    static func checkInvariants(_ catalog: Catalog) -> [String] {
        var problems: [String] = []
        if Set(catalog.models.map(\.id)).count != catalog.models.count { problems.append("duplicate ids") }
        for model in catalog.models {
            if let p = CatalogRules.idProblem(model.id) { problems.append("id: \(p)") }
            if model.files.isEmpty || model.sources.isEmpty { problems.append("\(model.id): no files or sources") }
            if model.autoEligible && model.kind != .llm { problems.append("\(model.id): auto-eligible voice") }
            for file in model.files {
                if let p = CatalogRules.pathProblem(file.path) { problems.append("path: \(p)") }
                if file.size < 1 || file.size > CatalogLoader.maxFileSize { problems.append("size \(file.size)") }
                if let h = file.sha256, !CatalogRules.isSHA256(h) { problems.append("hash \(h)") }
            }
            for source in model.sources {
                if let p = CatalogRules.urlProblem(source.primaryURL) { problems.append("url: \(p)") }
            }
        }
        return problems
    }

    /// The catalog as JSON, in the loader's own shape (an archive's `stripComponents` always
    /// written), to compare with the document it came from.
    static func json(_ catalog: Catalog) -> JSONValue {
        var top: [(key: String, value: JSONValue)] = [
            ("schemaVersion", JSONValue(catalog.schemaVersion)), ("catalogVersion", JSONValue(catalog.catalogVersion)),
            ("generatedAt", .string(catalog.generatedAt)),
        ]
        if let expiresAt = catalog.expiresAt { top.append(("expiresAt", .string(expiresAt))) }
        if let key = catalog.nextKey { top.append(("nextKey", ["name": .string(key.name), "publicKey": .string(key.publicKey)])) }
        top.append(("models", .array(catalog.models.map { model in
            var m: [(key: String, value: JSONValue)] = [
                ("id", .string(model.id)), ("kind", .string(model.kind.rawValue)), ("displayName", .string(model.displayName)),
                ("requiredMb", JSONValue(model.requiredMb)), ("autoEligible", .bool(model.autoEligible)),
            ]
            if let revision = model.revision { m.append(("revision", .string(revision))) }
            m.append(("files", .array(model.files.map {
                ["path": .string($0.path), "size": .int($0.size), "sha256": $0.sha256.map(JSONValue.string) ?? .null]
            })))
            m.append(("sources", .array(model.sources.map { source -> JSONValue in
                let auth: [(key: String, value: JSONValue)] = model.sourceAuth[source].map { [("auth", .string($0.rawValue))] } ?? []
                switch source {
                case .files(let base): return .object([("type", "files"), ("baseURL", .string(base))] + auth)
                case .archive(let a):
                    return .object([("type", "archive"), ("url", .string(a.url)), ("format", .string(a.format.rawValue)), ("size", .int(a.size)),
                                    ("sha256", .string(a.sha256)), ("stripComponents", JSONValue(a.stripComponents))] + auth)
                }
            })))
            return .object(m)
        })))
        return .object(top)
    }

    /// `value` with every object's members sorted by key, and `stripComponents: 0` written
    /// where an archive source leaves it out (the loader's default).
    static func normalized(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array(let items): return .array(items.map(normalized))
        case .object(var members):
            if members.contains(where: { $0.key == "type" && $0.value == .string("archive") }),
               !members.contains(where: { $0.key == "stripComponents" }) {
                members.append((key: "stripComponents", value: .int(0)))
            }
            return .object(members.map { (key: $0.key, value: normalized($0.value)) }.sorted { $0.key < $1.key })
        default: return value
        }
    }

    /// The JSON paths, in the loader's spelling (`models[2].files[0].size`), where two
    /// documents differ: a value changed, a member or element added or removed.
    static func differences(_ a: JSONValue, _ b: JSONValue, at path: String = "$") -> [String] {
        func join(_ key: String) -> String { path == "$" ? key : "\(path).\(key)" }
        switch (a, b) {
        case let (.object(x), .object(y)):
            var out: [String] = []
            for key in Set(x.map(\.key)).union(y.map(\.key)) {
                if let u = a[key], let v = b[key] { out += differences(u, v, at: join(key)) } else { out.append(join(key)) }
            }
            return out
        case let (.array(x), .array(y)):
            var out = x.count == y.count ? [] : [path]
            for n in 0..<max(x.count, y.count) {
                if n < x.count && n < y.count { out += differences(x[n], y[n], at: "\(path)[\(n)]") } else { out.append("\(path)[\(n)]") }
            }
            return out
        default:
            return a == b ? [] : [path]
        }
    }

    /// The parent of a JSON path (`models[2].files` for `models[2].files[0]`; "$" at the top).
    static func parent(_ path: String) -> String {
        guard let cut = path.lastIndex(where: { $0 == "." || $0 == "[" }) else { return "$" }
        return String(path[..<cut])
    }

    /// Whether an issue at `issue` speaks of a change at `changed`: at the changed node or
    /// inside it, at its container (a sum of sizes, an empty array), or at a sibling (a rule
    /// between two fields of one object: autoEligible and kind, generatedAt and expiresAt).
    /// Never "$", which names no field.
    static func related(_ issue: String, _ changed: String) -> Bool {
        guard issue != "$" else { return false }
        let inside = issue == changed || issue.hasPrefix(changed + ".") || issue.hasPrefix(changed + "[")
        return inside || issue == parent(changed) || parent(issue) == parent(changed)
    }

    /// Every node with its path, in document order, the root ("$") first.
    static func nodes(_ value: JSONValue, at path: String = "$") -> [(path: String, value: JSONValue)] {
        func join(_ key: String) -> String { path == "$" ? key : "\(path).\(key)" }
        switch value {
        case .object(let members): return [(path, value)] + members.flatMap { nodes($0.value, at: join($0.key)) }
        case .array(let items): return [(path, value)] + items.indices.flatMap { nodes(items[$0], at: "\(path)[\($0)]") }
        default: return [(path, value)]
        }
    }

    /// `value` with the node at `target` given to `transform`: its result replaces the node,
    /// nil removes it (from its object or array).
    static func replacing(_ value: JSONValue, at target: String, path: String = "$",
                          with transform: (JSONValue) -> JSONValue?) -> JSONValue? {
        if path == target { return transform(value) }
        func join(_ key: String) -> String { path == "$" ? key : "\(path).\(key)" }
        /// Only the one child on the way to `target` is rebuilt.
        func leadsThere(_ child: String) -> Bool {
            target == child || target.hasPrefix(child + ".") || target.hasPrefix(child + "[")
        }
        switch value {
        case .object(let members):
            return .object(members.compactMap { member in
                let child = join(member.key)
                guard leadsThere(child) else { return member }
                return replacing(member.value, at: target, path: child, with: transform).map { (key: member.key, value: $0) }
            })
        case .array(let items):
            return .array(items.indices.compactMap { n in
                let child = "\(path)[\(n)]"
                return leadsThere(child) ? replacing(items[n], at: target, path: child, with: transform) : items[n]
            })
        default:
            return value
        }
    }

    /// Values that break, or just pass, a catalog field's rules.
    static let interestingValues: [JSONValue] = [
        .int(-1), .int(0), .int(1), .int(Int64.max), .bigInteger("1" + String(repeating: "0", count: 30)), .double(1.5),
        .string(""), .string("../x"), .string("/abs/path"), .string("a\u{0}b"), .string("renamed.bin"), .string("Name"),
        .string("http://example.com/m/"), .string("https://example.com/other/"), .string(String(repeating: "ab", count: 32)),
        .null, .bool(true), .bool(false), .array([]), .object([]),
    ]

    /// One structural mutation of a parsed catalog (`nodes` are its nodes): a node replaced
    /// by an interesting value, removed, given an unknown member, or (an array element)
    /// repeated at the array's end.
    /// - Returns: the mutated document and the path the change is at.
    static func mutateTree(_ tree: JSONValue, nodes: [(path: String, value: JSONValue)], _ rng: inout SplitMix64) -> (JSONValue, String) {
        let target = nodes.dropFirst().randomElement(using: &rng)!   // never the root itself
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            let value = interestingValues.randomElement(using: &rng)!
            return (replacing(tree, at: target.path) { _ in value }!, target.path)
        case 1:
            return (replacing(tree, at: target.path) { _ in nil }!, target.path)
        case 2:
            let object = nodes.filter { if case .object = $0.value { return true } else { return false } }.randomElement(using: &rng)!
            return (replacing(tree, at: object.path) { node in
                guard case .object(let members) = node else { return node }
                return .object(members + [(key: "extra", value: .int(1))])
            }!, object.path == "$" ? "extra" : object.path + ".extra")
        default:
            let element = nodes.filter { $0.path.hasSuffix("]") }.randomElement(using: &rng)!
            let array = parent(element.path)
            guard case .array(let items)? = nodes.first(where: { $0.path == array })?.value else { return (tree, element.path) }
            return (replacing(tree, at: array) { _ in .array(items + [element.value]) }!, "\(array)[\(items.count)]")
        }
    }

    /// An accepted catalog keeps the rules, says what its document says, and re-validates
    /// to itself.
    static func expectFaithful(_ catalog: Catalog, document: JSONValue, _ label: String,
                               sourceLocation: SourceLocation = #_sourceLocation) throws {
        let problems = checkInvariants(catalog)
        #expect(problems.isEmpty, "\(label) was accepted but breaks the rules: \(problems)", sourceLocation: sourceLocation)
        let written = json(catalog)
        #expect(normalized(written) == normalized(document),
                "\(label): the accepted catalog differs from its document at \(differences(normalized(written), normalized(document)))",
                sourceLocation: sourceLocation)
        let again = try CatalogLoader().decode(Array(written.serialized().utf8), source: label + " again")
        #expect(again.models == catalog.models && again.catalogVersion == catalog.catalogVersion && again.schemaVersion == catalog.schemaVersion
                && again.generatedAt == catalog.generatedAt && again.expiresAt == catalog.expiresAt && again.nextKey == catalog.nextKey,
                "\(label) does not round-trip", sourceLocation: sourceLocation)
    }

    @Test func randomMutationsOfTheBundledCatalogDecodeOrFailCleanly() throws {
        let original = try Self.shippedCatalogBytes()
        let originalTree = try JSONParser().parse(original)
        try Self.expectFaithful(try CatalogLoader().decode(original, source: "shipped"), document: originalTree, "the shipped catalog")
        var rng = SplitMix64(state: 0x5EED_CA7A_1061)
        var accepted = 0
        var rejected = 0
        var rejectedAsJSON = 0
        for n in 0..<300 {
            let mutant = Self.mutate(original, &rng)
            switch Result(catching: { () throws(CatalogError) in try CatalogLoader().decode(mutant, source: "mutant \(n)") }) {
            case .success(let catalog):
                accepted += 1
                try Self.expectFaithful(catalog, document: try JSONParser().parse(mutant), "mutant \(n)")
            case .failure(let error):
                rejected += 1
                #expect(!error.issues.isEmpty, "mutant \(n) was refused without any issue")
                #expect(error.issues.allSatisfy { !$0.path.isEmpty && !$0.message.isEmpty }, "mutant \(n): \(error)")
                #expect(error.source == "mutant \(n)")
                // A refusal names where the bytes changed: not JSON at all at "$", else at
                // (or around) a JSON path whose value the mutation changed.
                guard let tree = try? JSONParser().parse(mutant) else {
                    #expect(error.issues.count == 1 && error.issues.first?.path == "$"
                            && error.issues.first?.message.hasPrefix("not valid JSON") == true, "mutant \(n): \(error)")
                    continue
                }
                rejectedAsJSON += 1
                let changed = Self.differences(originalTree, tree)
                #expect(!changed.isEmpty, "mutant \(n) is the same document, yet refused: \(error)")
                #expect(error.issues.contains { issue in changed.contains { Self.related(issue.path, $0) } },
                        "mutant \(n): no issue names a changed place \(changed.prefix(8)): \(error)")
            }
        }
        #expect(accepted > 0 && rejected > 150, "some mutations keep a valid catalog and most break it: \(accepted) accepted, \(rejected) refused")
        #expect(rejectedAsJSON > 0, "some refused mutants were still JSON, so their paths were checked")

        // Mutations of the document's structure, where the changed path is known exactly
        // (fewer: each is valid JSON, so each is validated in full).
        let originalNodes = Self.nodes(originalTree)
        var treeAccepted = 0
        var treeRejected = 0
        for n in 0..<120 {
            let (tree, changed) = Self.mutateTree(originalTree, nodes: originalNodes, &rng)
            let label = "tree mutant \(n) (at \(changed))"
            switch Result(catching: { () throws(CatalogError) in try CatalogLoader().decode(Array(tree.serialized().utf8), source: label) }) {
            case .success(let catalog):
                treeAccepted += 1
                try Self.expectFaithful(catalog, document: tree, label)
            case .failure(let error):
                treeRejected += 1
                #expect(error.issues.contains { Self.related($0.path, changed) }, "\(label): no issue names it: \(error)")
            }
        }
        #expect(treeAccepted > 0 && treeRejected > 0, "\(treeAccepted) accepted, \(treeRejected) refused")
        print("catalog mutations: bytes \(accepted) accepted, \(rejected) refused (\(rejectedAsJSON) still JSON); tree \(treeAccepted) accepted, \(treeRejected) refused")
    }

    @Test func everyTruncationOfTheBundledCatalogIsRejectedAsNotJSON() throws {
        // The JSON document itself, without the file's final newline (cutting only that leaves valid JSON).
        var original = try Self.shippedCatalogBytes()
        while original.last == UInt8(ascii: "\n") { original.removeLast() }
        var rng = SplitMix64(state: 42)
        var lengths = [0, 1, original.count - 1]
        lengths += (0..<100).map { _ in Int.random(in: 0..<original.count, using: &rng) }
        for length in lengths {
            let issues = Self.issues(Array(original[..<length]))
            #expect(issues?.count == 1, "truncated to \(length) bytes")
            #expect(issues?.first?.path == "$", "truncated to \(length) bytes")
            #expect(issues?.first?.message.hasPrefix("not valid JSON") == true, "truncated to \(length) bytes")
        }
    }

    @Test func randomGarbageIsRejected() {
        var rng = SplitMix64(state: 7)
        for n in 0..<100 {
            let garbage = (0..<Int.random(in: 0...512, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let issues = Self.issues(garbage)
            #expect(issues?.isEmpty == false, "garbage \(n) was not refused with issues")
        }
    }

    @Test func deepNestingIsAnErrorNotAStackOverflow() {
        let arrays = [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
        Self.expectRejected(arrays, at: "$", saying: "nesting deeper than 64 levels")
        let objects = Array(String(repeating: #"{"a":"#, count: 100_000).utf8)
        Self.expectRejected(objects, at: "$", saying: "nesting deeper than 64 levels")
        let models = Array(("{\"schemaVersion\":1,\"models\":" + String(repeating: "[", count: 100_000)).utf8)
        Self.expectRejected(models, at: "$", saying: "nesting deeper than 64 levels")
    }
}
