import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// A catalog of 1,000 models or more is checked on two threads (each half in order); at 1 MiB
/// or more, its models are checked on a helper thread while the parser reads on
/// (`StreamedModelCheck`), and its JSON freed on another. Its result must be the one a single pass gives:
/// the models in catalog order, every problem reported, in document order, with its path.
@Suite(.networkGuard)
struct LargeCatalogTests {
    /// The issues decoding `bytes` reports (none, and a recorded failure, if it is accepted).
    static func issues(decoding bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> [CatalogIssue] {
        do {
            _ = try CatalogLoader().decode(bytes, source: "large.json")
            Issue.record("a catalog with five broken models was accepted", sourceLocation: sourceLocation)
            return []
        } catch {
            return error.issues
        }
    }

    /// `count` valid models (ids `m0`…), each with `files` files, as JSON text.
    static func catalog(models count: Int, files: Int = 3, edit: (Int, inout [String: Any]) -> Void = { _, _ in }) throws -> [UInt8] {
        var models: [[String: Any]] = []
        for n in 0..<count {
            var model: [String: Any] = [
                "id": "m\(n)", "kind": "llm", "displayName": "Model \(n)", "requiredMb": 100 + n, "autoEligible": n % 2 == 0,
                "files": (0..<files).map { ["path": "f\($0).bin", "size": 1 + $0, "sha256": String(repeating: "ab", count: 32)] },
                "sources": [["type": "files", "baseURL": "https://models.example.com/m\(n)/"]],
            ]
            edit(n, &model)
            models.append(model)
        }
        let doc: [String: Any] = ["schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-11-30T00:00:00Z", "models": models]
        return [UInt8](try JSONSerialization.data(withJSONObject: doc, options: [.prettyPrinted, .sortedKeys]))
    }

    @Test("2,400 valid models (over 1 MiB): all of them, in catalog order")
    func validModelsInOrder() throws {
        let bytes = try Self.catalog(models: 2_400, files: 4)
        try #require(bytes.count >= 1 << 20, "the document is \(bytes.count) bytes: under the size whose freeing moves to a thread")
        let catalog = try CatalogLoader().decode(bytes, source: "large.json")
        let ids = catalog.models.map(\.id)
        #expect(ids.count == 2_400)
        let misplaced = ids.indices.first { ids[$0] != "m\($0)" }
        #expect(misplaced == nil, "models[\(misplaced ?? -1)] is \(misplaced.map { ids[$0] } ?? "")")
        #expect(catalog.models[1_999].requiredMb == 2_099)
        #expect(catalog.models[2_399].files.map(\.path) == ["f0.bin", "f1.bin", "f2.bin", "f3.bin"])
        #expect(catalog.model(id: "m1234")?.displayName == "Model 1234")
    }

    @Test("problems in both halves and a duplicate id across them: every one reported, in document order")
    func problemsInDocumentOrder() throws {
        let bytes = try Self.catalog(models: 1_200) { n, model in
            switch n {
            case 7: model["requiredMb"] = 0
            case 599: model["kind"] = "robot"
            case 600: model["files"] = [["path": "../up.bin", "size": 1, "sha256": NSNull()]]
            case 1_100: model["id"] = "m5"
            case 1_199: model["displayName"] = ""; model["sources"] = [[String: Any]]()
            default: break
            }
        }
        let issues = Self.issues(decoding: bytes)
        #expect(issues.map(\.path) == [
            "models[7].requiredMb", "models[599].kind", "models[600].files[0].path", "models[1100].id",
            "models[1199].displayName", "models[1199].sources",
        ], "\(issues)")
        #expect(issues.first { $0.path == "models[1100].id" }?.message == "duplicate id \"m5\" (also models[5])")
    }

    @Test("over 1 MiB, models checked while the parser reads on: every problem in document order; a document that breaks after its models is only a JSON error")
    func streamedProblemsInDocumentOrder() throws {
        let bytes = try Self.catalog(models: 2_400, files: 4) { n, model in
            switch n {
            case 3: model["requiredMb"] = 0
            case 17: model["kind"] = "robot"
            case 1_000: model["files"] = [["path": "a", "size": 1, "sha256": NSNull()], ["path": "a/b", "size": 1, "sha256": NSNull()]]
            case 2_000: model["id"] = "m1"
            case 2_399: model["displayName"] = ""
            default: break
            }
        }
        try #require(bytes.count >= 1 << 20, "the document is \(bytes.count) bytes: under the size checked while parsed")
        let issues = Self.issues(decoding: bytes)
        #expect(issues.map(\.path) == [
            "models[3].requiredMb", "models[17].kind", "models[1000].files[0].path", "models[2000].id", "models[2399].displayName",
        ], "\(issues)")
        #expect(issues.first { $0.path == "models[2000].id" }?.message == "duplicate id \"m1\" (also models[1])")

        // The models were handed out and checked before the parser met the end: only the
        // JSON error is reported.
        guard let close = bytes.lastIndex(of: UInt8(ascii: "}")) else { return }
        var broken = bytes
        broken.removeSubrange(close...)
        do {
            _ = try CatalogLoader().decode(broken, source: "large.json")
            Issue.record("a document without its closing brace was accepted")
        } catch {
            #expect(error.issues.count == 1, "\(error.issues)")
            #expect(error.issues.first?.path == "$")
            #expect(error.issues.first?.message.hasPrefix("not valid JSON: ") == true, "\(error.issues)")
        }
    }
}
