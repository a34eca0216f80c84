// The pieces of `add` (issue 29) one by one: the memory estimate and its exact values, the
// safetensors header parser against hostile headers, config.json's KV-cache shape, the
// file selection's globs, the id rule, Hub references, and the Hub's model information.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// A safetensors header's JSON as bytes, and the file size it describes (8 + N + data).
private func header(_ json: String, data: Int64) -> (bytes: [UInt8], fileSize: Int64) {
    let bytes = Array(json.utf8)
    return (bytes, 8 + Int64(bytes.count) + data)
}

private func headerProblem(_ json: String, data: Int64) -> String? {
    let (bytes, size) = header(json, data: data)
    do {
        _ = try SafetensorsHeader.parse(bytes, fileSize: size)
        return nil
    } catch {
        return error.reason
    }
}

@Suite("add: the memory estimate", .networkGuard)
struct MemoryEstimateTests {
    @Test("requiredMb = ceil((weights × 1.2 + KV) / 2^20) + 100, exactly", arguments: [
        // The CLI fixture: 3.5 MiB of weights, 1 MiB of KV: ceil(5.2) + 100.
        (Int64(3_670_016), Int64(1_048_576), 106),
        // The same without the 1.2 would be 105, without the KV 105: the factors matter.
        (Int64(0), Int64(0), 100),
        (Int64(1), Int64(0), 101),
        // Exactly 5 MiB × 1.2 = 6 MiB: no rounding up.
        (Int64(5 << 20), Int64(0), 106),
        (Int64(5 << 20) + 1, Int64(0), 107),
        // The sharded fixture: 3,411,968 B and 6 MiB of KV: ceil(9.9) + 100.
        (Int64(3_411_968), Int64(6_291_456), 110),
        // Qwen3-0.6B-4bit's weights (the safetensors file's size) and its 448 MiB KV cache.
        (Int64(335_450_584), Int64(469_762_048), 932),
    ])
    func exactValues(weights: Int64, kv: Int64, expected: Int) {
        #expect(MemoryEstimate.requiredMb(weightsBytes: weights, kvCacheBytes: kv) == expected)
    }

    @Test("numbers that leave 64 bits, or are negative, give no estimate (never a trap)")
    func overflow() {
        #expect(MemoryEstimate.requiredMb(weightsBytes: .max / 5, kvCacheBytes: 0) == nil)
        #expect(MemoryEstimate.requiredMb(weightsBytes: 0, kvCacheBytes: .max / 4) == nil)
        #expect(MemoryEstimate.requiredMb(weightsBytes: -1, kvCacheBytes: 0) == nil)
        #expect(KVCacheShape(layers: 1 << 40, kvHeads: 1 << 20, headDim: 1 << 10).bytes == nil)
        #expect(throws: EstimateOverflow.self) { try MemoryEstimate(weightsBytes: 0, kvCache: KVCacheShape(layers: 1 << 40, kvHeads: 1 << 20, headDim: 1 << 10)) }
    }

    @Test("config.json: num_key_value_heads else num_attention_heads; head_dim else hidden_size / heads (rounded up); text_config for a model that also sees images")
    func kvShape() throws {
        let qwen3 = #"{"num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 1024}"#
        let a = try KVCacheShape.read(config: Array(qwen3.utf8))
        #expect(a.shape == KVCacheShape(layers: 28, kvHeads: 8, headDim: 128))
        #expect(a.shape?.bytes == 469_762_048, "2 × 28 × 8 × 128 × 4096 × 2")
        let qwen25 = #"{"num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2, "hidden_size": 1536}"#
        #expect(try KVCacheShape.read(config: Array(qwen25.utf8)).shape == KVCacheShape(layers: 28, kvHeads: 2, headDim: 128))
        let noKV = #"{"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 64, "num_key_value_heads": null}"#
        #expect(try KVCacheShape.read(config: Array(noKV.utf8)).shape == KVCacheShape(layers: 2, kvHeads: 3, headDim: 22))
        let vision = #"{"vision_config": {"num_hidden_layers": 99}, "text_config": {"num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 8}}"#
        let v = try KVCacheShape.read(config: Array(vision.utf8))
        #expect(v.shape == KVCacheShape(layers: 4, kvHeads: 4, headDim: 8, from: "config.json (text_config)"))
        let unknown = try KVCacheShape.read(config: Array(#"{"n_layer": 12}"#.utf8))
        #expect(unknown.shape == nil && unknown.note?.contains("num_hidden_layers") == true)
    }

    @Test("a config.json with hostile values is refused, naming the key", arguments: [
        (#"{"num_hidden_layers": -1}"#, "num_hidden_layers"),
        (#"{"num_hidden_layers": 0}"#, "num_hidden_layers"),
        (#"{"num_hidden_layers": 28.5}"#, "num_hidden_layers"),
        (#"{"num_hidden_layers": "28"}"#, "num_hidden_layers"),
        (#"{"num_hidden_layers": 123456789012345678901234567890}"#, "num_hidden_layers"),
        (#"{"num_hidden_layers": 2, "head_dim": 99999999999}"#, "head_dim"),
        (#"[28]"#, "not a JSON object"),
        (#"{"num_hidden_layers": 2,"#, "not JSON"),
    ])
    func hostileConfig(json: String, named: String) {
        #expect(throws: ReadProblem.self) { try KVCacheShape.read(config: Array(json.utf8)) }
        do { _ = try KVCacheShape.read(config: Array(json.utf8)) } catch { #expect(error.reason.contains(named), "\(error.reason)") }
    }
}

@Suite("add: the safetensors header, hostile ones included", .networkGuard)
struct SafetensorsHeaderTests {
    @Test("a valid header: every tensor, its bytes, the metadata; the weights are the data's bytes")
    func valid() throws {
        let json = #"{"__metadata__": {"format": "mlx"}, "w": {"dtype": "U32", "shape": [2, 4], "data_offsets": [0, 32]}, "s": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [32, 40]}, "f4": {"dtype": "F4", "shape": [3], "data_offsets": [40, 42]}, "e": {"dtype": "F16", "shape": [0, 4], "data_offsets": [42, 42]}}   "#
        let (bytes, size) = header(json, data: 42)
        let parsed = try SafetensorsHeader.parse(bytes, fileSize: size)
        #expect(parsed.dataBytes == 42)
        #expect(parsed.tensors.map(\.name) == ["w", "s", "f4", "e"])
        #expect(parsed.metadata == ["format": "mlx"])
    }

    @Test("the 8-byte length: little-endian, at most 100 MB, at least 2, within the file")
    func length() throws {
        #expect(try SafetensorsHeader.headerLength([0x2A, 0x01, 0, 0, 0, 0, 0, 0], fileSize: 1000) == 298)
        let cases: [([UInt8], Int64, String)] = [
            ([0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0], 1 << 40, "100 MB"),              // 100,000,001
            ([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], 1 << 40, "100 MB"),  // 2^64 - 1
            ([0x00, 0x10, 0, 0, 0, 0, 0, 0], 100, "only 100"),
            ([1, 0, 0, 0, 0, 0, 0, 0], 100, "too short"),
            ([1, 2, 3], 100, "shorter than the 8 bytes"),
        ]
        for (prefix, size, says) in cases {
            do {
                _ = try SafetensorsHeader.headerLength(prefix, fileSize: size)
                Issue.record("\(prefix) accepted")
            } catch {
                #expect(error.reason.contains(says), "\(prefix): \(error.reason)")
            }
        }
    }

    @Test("hostile headers are refused with a reason", arguments: [
        (#"not json at all"#, Int64(0), "must start with '{'"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}"#, Int64(2), "not JSON"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}, "a": {"dtype": "F16", "shape": [1], "data_offsets": [2, 4]}}"#, Int64(4), "not JSON"),
        (#"{"a": {"dtype": "F16", "shape": [1]}}"#, Int64(2), "lacks"),
        (#"{"a": [1, 2]}"#, Int64(2), "lacks"),
        (#"{"a": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 2]}}"#, Int64(2), "dimension"),
        (#"{"a": {"dtype": "F16", "shape": [1.5], "data_offsets": [0, 2]}}"#, Int64(2), "dimension"),
        (#"{"a": {"dtype": "F16", "shape": [4611686018427387904, 4611686018427387904], "data_offsets": [0, 2]}}"#, Int64(2), "multiplies"),
        (#"{"a": {"dtype": "U8", "shape": [9223372036854775807], "data_offsets": [0, 9223372036854775807]}}"#, Int64(2), "data_offsets"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 99999999999999999999]}}"#, Int64(2), "data_offsets"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [2, 0]}}"#, Int64(2), "data_offsets"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 4]}}"#, Int64(2), "data_offsets"),
        (#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 2]}}"#, Int64(2), "needs other than"),
        (#"{"a": {"dtype": "Q4_K", "shape": [1], "data_offsets": [0, 2]}}"#, Int64(2), "does not define"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}, "b": {"dtype": "F16", "shape": [1], "data_offsets": [4, 6]}}"#, Int64(6), "gap"),
        (#"{"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}, "b": {"dtype": "F16", "shape": [1], "data_offsets": [2, 4]}}"#, Int64(4), "overlaps"),
        (#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}"#, Int64(10), "cover 2 of"),
        (#"{"__metadata__": {"n": 1}, "a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}"#, Int64(2), "__metadata__"),
        (#"{"__metadata__": [], "a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}"#, Int64(2), "__metadata__"),
    ])
    func hostile(json: String, data: Int64, says: String) {
        let problem = headerProblem(json, data: data)
        #expect(problem?.contains(says) == true, "\(problem ?? "accepted")")
    }

    @Test("a header longer than the file can hold is refused")
    func longerThanFile() {
        let bytes = Array(#"{"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}"#.utf8)
        #expect(throws: ReadProblem.self) { try SafetensorsHeader.parse(bytes, fileSize: 10) }
    }
}

@Suite("add: which files are taken", .networkGuard)
struct HubFileSelectionTests {
    @Test("fnmatch, as the Hub client matches: * crosses '/', ?, sets, negated sets, an unclosed '[' as itself, a trailing '/' for a folder", arguments: [
        ("*.json", "config.json", true),
        ("*.json", "sub/dir/config.json", true),
        ("*.json", "config.jsonl", false),
        ("config.???n", "config.json", true),
        ("model-0000[0-9]-of-*.safetensors", "model-00002-of-00003.safetensors", true),
        ("model-0000[!2]-of-*.safetensors", "model-00002-of-00003.safetensors", false),
        ("[]]x", "]x", true),
        ("a[b", "a[b", true),
        ("onnx/", "onnx/model.onnx", true),
        ("onnx/", "other/onnx/model.onnx", false),
        ("*", "", true),
        ("Config.json", "config.json", false),
        ("*a*a*a*a*a*a*a*a*a*a*b", String(repeating: "a", count: 200), false),
    ])
    func glob(pattern: String, text: String, matches: Bool) {
        #expect(Glob.matches(pattern, text) == matches)
    }

    @Test("the defaults take the weights and what loads them, never a README, .gitattributes, an image, *.bin, *.pt, *.gguf or *.onnx")
    func defaults() {
        let selection = HubFileSelection()
        for taken in ["model.safetensors", "model-00001-of-00002.safetensors", "config.json", "tokenizer.json", "tokenizer.model",
                      "merges.txt", "vocab.txt", "qwen.tiktoken", "chat_template.jinja", "sub/generation_config.json"] {
            #expect(selection.decide(taken).taken, "\(taken)")
        }
        for (path, reason) in [("README.md", "a README"), ("readme.txt", "a README"), (".gitattributes", "Git's own file"),
                               ("figure.png", "an image"), ("pytorch_model.bin", "*.bin"), ("model.pt", "*.pt"),
                               ("model-q4.gguf", "GGUF"), ("onnx/model.onnx", "ONNX"), ("LICENSE", "not a model file by default")] {
            let d = selection.decide(path)
            #expect(!d.taken && d.reason?.contains(reason) == true, "\(path): \(d)")
        }
    }

    @Test("--include takes what the defaults never do; --exclude wins over everything")
    func includeExclude() throws {
        let selection = try HubFileSelection(include: ["*.gguf", "README.md"], exclude: ["*-q8*.gguf", "tokenizer.json"])
        #expect(selection.decide("model-q4.gguf").taken)
        #expect(selection.decide("README.md").taken)
        #expect(selection.decide("model-q8_0.gguf") == (false, "--exclude *-q8*.gguf"))
        #expect(!selection.decide("tokenizer.json").taken)
        #expect(selection.decide("model.safetensors").taken)
        #expect(throws: LocalModelError.self) { try HubFileSelection(include: [""]) }
        #expect(throws: LocalModelError.self) { try HubFileSelection(exclude: ["a\u{1B}[31m"]) }
    }
}

@Suite("add: the id rule, references, and the Hub's model information", .networkGuard)
struct HubReferenceTests {
    @Test("the default id is hf-ORG-REPO, lowercased, anything outside [a-z0-9._-] as '-'", arguments: [
        ("mlx-community", "Qwen3-0.6B-4bit", "hf-mlx-community-qwen3-0.6b-4bit"),
        ("Org_Name", "My.Model_v2", "hf-org_name-my.model_v2"),
        ("org", "Ünïcode", "hf-org--n-code"),
    ])
    func defaultId(org: String, name: String, id: String) {
        #expect(UserCatalog.defaultId(for: HubReference(organization: org, name: name)) == id)
        #expect(CatalogRules.idProblem(id) == nil)
    }

    @Test("REF: ORG/REPO[@REV], hf://ORG/REPO[@REV], https://huggingface.co/ORG/REPO[/tree/REV]; REV defaults to main")
    func parse() throws {
        let cases: [(String, HubReference)] = [
            ("org/repo", HubReference(organization: "org", name: "repo")),
            ("org/repo@v1.0", HubReference(organization: "org", name: "repo", revision: "v1.0")),
            ("hf://mlx-community/Qwen3-4B-4bit@0123456789abcdef0123456789abcdef01234567",
             HubReference(organization: "mlx-community", name: "Qwen3-4B-4bit", revision: "0123456789abcdef0123456789abcdef01234567")),
            ("https://huggingface.co/org/repo", HubReference(organization: "org", name: "repo")),
            ("https://huggingface.co/org/repo/", HubReference(organization: "org", name: "repo")),
            ("https://huggingface.co/org/repo/tree/refs/pr/3", HubReference(organization: "org", name: "repo", revision: "refs/pr/3")),
            ("http://127.0.0.1:9/org/repo/tree/dev", HubReference(organization: "org", name: "repo", revision: "dev")),
        ]
        for (text, expected) in cases {
            #expect(try HubReference.parse(text, endpoint: "http://127.0.0.1:9") == expected, "\(text)")
        }
        for bad in ["repo", "org/repo/x", "org//repo", "-org/repo", "org/re..po", "org/repo@", "org/repo@../x", "org/re po",
                    "ftp://huggingface.co/org/repo", "https://example.com/org/repo", "https://huggingface.co/org/repo/blob/main/x",
                    "org/" + String(repeating: "a", count: 97)] {
            #expect(throws: LocalModelError.self, "\(bad)") { try HubReference.parse(bad) }
        }
        let ref = HubReference(organization: "org", name: "repo", revision: "refs/pr/3")
        #expect(ref.modelInfoURL(endpoint: "https://huggingface.co") == "https://huggingface.co/api/models/org/repo/revision/refs%2Fpr%2F3?blobs=true")
    }

    @Test("the model information: the commit and each file's size and LFS SHA-256")
    func modelInfo() throws {
        let sha = String(repeating: "ab", count: 32)
        let json = #"{"id": "org/repo", "sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "config.json", "blobId": "x", "size": 900}, {"rfilename": "model.safetensors", "size": 5000, "lfs": {"sha256": "\#(sha)", "size": 5000, "pointerSize": 134}}]}"#
        let files = try HubRepositoryFiles.parse(Array(json.utf8))
        #expect(files.commit == "0123456789abcdef0123456789abcdef01234567")
        #expect(files.files == [HubFile(path: "config.json", size: 900, lfsSHA256: nil), HubFile(path: "model.safetensors", size: 5000, lfsSHA256: sha)])
    }

    @Test("a hostile model information is refused, naming what is wrong", arguments: [
        (#"{"siblings": []}"#, "sha"),
        (#"{"sha": "0123456789ABCDEF0123456789abcdef01234567", "siblings": []}"#, "sha"),
        (#"{"sha": "0123", "siblings": []}"#, "sha"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567"}"#, "siblings"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"size": 1}]}"#, "rfilename"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a"}]}"#, "size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": -1}]}"#, "size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 1e3}]}"#, "size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 99999999999999999999999}]}"#, "size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 2199023255553}]}"#, "size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 5, "lfs": {"sha256": "zz"}}]}"#, "lfs.sha256"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 5, "lfs": {"sha256": "\#(String(repeating: "0", count: 64))", "size": 6}}]}"#, "lfs.size"),
        (#"{"sha": "0123456789abcdef0123456789abcdef01234567", "siblings": [{"rfilename": "a", "size": 5}, {"rfilename": "a", "size": 5}]}"#, "twice"),
        (#"[1, 2]"#, "not a JSON object"),
        (#"{"sha": "#, "not JSON"),
    ])
    func hostileModelInfo(json: String, says: String) {
        do {
            _ = try HubRepositoryFiles.parse(Array(json.utf8))
            Issue.record("accepted: \(json)")
        } catch {
            #expect(error.reason.contains(says), "\(error.reason)")
        }
    }
}

@Suite("add: the store's own catalog beside the catalog in use", .networkGuard)
struct UserCatalogTests {
    @Test("an added model joins the catalog after its models; one whose id the catalog in use has is not used (that catalog's is) and a warning says so")
    func joinsWithoutReplacing() throws {
        let root = FileManager.default.temporaryDirectory.path + "/user-catalog-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        func model(_ id: String, _ name: String) -> CatalogModel {
            CatalogModel(id: id, kind: .llm, displayName: name, requiredMb: 100, autoEligible: false, revision: nil,
                         files: [CatalogFile(path: "model.safetensors", size: 10, sha256: nil)],
                         sources: [.files(baseURL: "https://huggingface.co/org/\(id)/resolve/main/")])
        }
        try Data(UserCatalog.document([model("shared", "added twin"), model("mine", "added")], generatedAt: "2026-12-01T00:00:00Z"))
            .write(to: URL(fileURLWithPath: root + "/user-catalog.json"))
        let catalog = Catalog(catalogVersion: 3, generatedAt: "2026-12-01T00:00:00Z", models: [model("shared", "signed")])
        let engine = LocalModelEngine(layout: StoreLayout(root: root), catalog: catalog, probe: FaultTestProbe())
        #expect(engine.catalog.models.map(\.id) == ["shared", "mine"])
        #expect(engine.catalog.model(id: "shared")?.displayName == "signed" && engine.catalog.model(id: "shared")?.origin == .catalog)
        #expect(engine.catalog.model(id: "mine")?.origin == .user)
        #expect(engine.userCatalogWarnings.count == 1 && engine.userCatalogWarnings.first?.contains("shared") == true, "\(engine.userCatalogWarnings)")
        #expect(engine.catalog.catalogVersion == 3, "the version is the catalog's, never the user's")
    }
}
