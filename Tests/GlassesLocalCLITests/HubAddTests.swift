import Foundation
import GlassesTestSupport
import LocalModelKit
import Testing

/// A repository's files written by Tests/Tools/model-repo.py: real safetensors files (the
/// 8-byte length, the JSON header, the tensors' bytes), config.json, a sharded checkpoint's
/// index, GGUF, README. The script reports each file's size, SHA-256 and, for safetensors,
/// its header's and data's bytes, independently of the code under test.
enum ModelRepo {
    static let script = PackageRoot.path() + "/Tests/Tools/model-repo.py"

    struct Facts {
        var size: Int64
        var sha256: String
        var headerBytes: Int64?
        var dataBytes: Int64?
    }

    @discardableResult
    static func write(_ folder: String, _ spec: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Facts] {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let specPath = folder + ".spec.json"
        try JSONSerialization.data(withJSONObject: spec).write(to: URL(fileURLWithPath: specPath))
        let r = try World.tool("/usr/bin/env", ["python3", script, folder, specPath])
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: [String: Any]],
                               sourceLocation: sourceLocation)
        return doc.mapValues {
            Facts(size: ($0["size"] as? NSNumber)?.int64Value ?? -1, sha256: $0["sha256"] as? String ?? "",
                  headerBytes: ($0["header_bytes"] as? NSNumber)?.int64Value, dataBytes: ($0["data_bytes"] as? NSNumber)?.int64Value)
        }
    }

    /// One safetensors file with three tensors (3.5 MiB of data, an LFS file at a 1 MiB
    /// threshold), a config.json without head_dim (hidden_size / heads = 16), a tokenizer,
    /// and what a Hub repository also holds. Its estimate, by hand:
    /// weights 3,670,016 B (2 MiB U32 + 0.5 MiB BF16 + 1 MiB F16); KV = 2 × 2 layers × 2 KV
    /// heads × 16 × 4,096 × 2 = 1,048,576 B; ceil((3,670,016 × 1.2 + 1,048,576) / 2^20) =
    /// ceil(5.2) = 6; + 100 = 106 MiB. (Without the 1.2, or without the KV cache: 105.)
    static var tiny: [String: Any] { ["files": [
        "model.safetensors": ["metadata": ["format": "mlx"], "tensors": [
            ["name": "model.embed_tokens.weight", "dtype": "U32", "shape": [512, 1024]],
            ["name": "model.embed_tokens.scales", "dtype": "BF16", "shape": [512, 512]],
            ["name": "model.norm.weight", "dtype": "F16", "shape": [524288]],
        ]],
        "config.json": ["json": ["model_type": "qwen3", "num_hidden_layers": 2, "num_attention_heads": 4,
                                 "num_key_value_heads": 2, "hidden_size": 64]],
        "tokenizer.json": ["text": #"{"version": "1.0", "model": {"type": "BPE"}}"#],
        "tokenizer_config.json": ["json": ["chat_template": "{{ messages }}"]],
        "README.md": ["text": "# tiny\n"],
        ".gitattributes": ["text": "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"],
        "assets/logo.png": ["text": "not really a png"],
    ]] }
    static let tinyRequiredMb = 106
    static let tinyWeights: Int64 = 3_670_016
    static let tinyKV: Int64 = 1_048_576

    /// Two shards and their index; config.json with head_dim. By hand: weights 1 MiB + 256 KiB
    /// + 2 MiB + 4 KiB = 3,411,968 B; KV = 2 × 3 × 4 × 32 × 4,096 × 2 = 6,291,456 B;
    /// ceil((3,411,968 × 1.2 + 6,291,456) / 2^20) = ceil(9.9…) = 10; + 100 = 110 MiB.
    static var sharded: [String: Any] { [
        "files": [
            "model-00001-of-00002.safetensors": ["tensors": [
                ["name": "layers.0.weight", "dtype": "U32", "shape": [256, 1024]],
                ["name": "layers.0.scales", "dtype": "BF16", "shape": [256, 512]],
            ]],
            "model-00002-of-00002.safetensors": ["pad": 5, "tensors": [
                ["name": "layers.1.weight", "dtype": "F16", "shape": [1024, 1024]],
                ["name": "norm.weight", "dtype": "F32", "shape": [1024]],
            ]],
            "config.json": ["json": ["num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 4,
                                     "head_dim": 32, "hidden_size": 128]],
            "tokenizer.model": ["text": "sentencepiece"],
        ],
        "index": "model.safetensors.index.json",
    ] }
    static let shardedRequiredMb = 110
    static let shardedWeights: Int64 = 3_411_968

    /// What a llama.cpp repository holds: GGUF and nothing else to load.
    static var ggufOnly: [String: Any] { ["files": [
        "qwen3-0.6b-q4_k_m.gguf": ["gguf": 2 << 20],
        "config.json": ["json": ["num_hidden_layers": 28]],
        "README.md": ["text": "# GGUF\n"],
        ".gitattributes": ["text": "*.gguf filter=lfs\n"],
    ]] }
}

/// A sandbox (store, HOME), a Hub-shaped origin with its CDN (Tests/Tools/hubserver.py, its
/// model-information API included), and `glasses-local` run with `HF_ENDPOINT` at it and the
/// built-in catalog.
final class AddWorld {
    let sandbox: Sandbox
    let hub: HubServer
    var store: String { sandbox.store }
    /// The Hugging Face cache of the sandbox's HOME.
    var hubCache: String { sandbox.root + "/home/.cache/huggingface/hub" }

    init() throws {
        sandbox = try Sandbox()
        do { hub = try HubServer() } catch {
            sandbox.remove()
            throw error
        }
    }

    func remove() {
        hub.stop()
        sandbox.remove()
    }

    /// Serves `spec`'s files as `repo` at `commit` (`main` names it); files of 1 MiB or more
    /// are LFS files, fetched through the CDN.
    @discardableResult
    func serve(_ repo: String, commit: String, _ spec: [String: Any], token: String? = nil) throws -> (folder: String, facts: [String: ModelRepo.Facts]) {
        let folder = sandbox.root + "/repos/" + repo
        let facts = try ModelRepo.write(folder, spec)
        try hub.serve(repo: repo, revision: commit, folder: folder, lfsMin: 1 << 20, token: token)
        return (folder, facts)
    }

    func run(_ arguments: [String], env: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        var extra = ["HF_ENDPOINT": hub.origin]
        for (key, value) in env { extra[key] = value }
        return try sandbox.run(arguments, env: extra, sourceLocation: sourceLocation)
    }

    /// Every entry under the store, with each file's bytes: what "nothing written" compares.
    func storeState() -> [String] {
        Disk.tree(store).map { line in
            guard line.hasPrefix("f ") else { return line }
            let data = FileManager.default.contents(atPath: store + "/" + Disk.path(ofTreeLine: line)) ?? Data()
            return line + " " + data.base64EncodedString()
        }
    }

    /// `list --json`'s entry for `id`, nil when it is not listed.
    func listed(_ id: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any]? {
        let r = try run(["list", "--json"], sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let models = try #require(try r.jsonObject(sourceLocation: sourceLocation)["models"] as? [[String: Any]], sourceLocation: sourceLocation)
        return models.first { $0["id"] as? String == id }
    }

    /// The store's catalog as JSON.
    func userCatalog(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let data = try #require(FileManager.default.contents(atPath: store + "/user-catalog.json"), "no user-catalog.json",
                                sourceLocation: sourceLocation)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any], sourceLocation: sourceLocation)
    }
}

extension CLIResult {
    /// `--json`'s `error.code` of a failed run.
    var errorCode: String? {
        guard let doc = try? JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any],
              let error = doc["error"] as? [String: Any] else { return nil }
        return error["code"] as? String
    }
}

/// `glasses-local add` and `remove` (issue 29): any repository of the Hub, its memory need
/// known from its safetensors headers before a byte of its weights moves, against the
/// project's Hub-shaped origin (the model-information API, LFS files through a redirect to
/// a CDN, tokens, 404s), and offline from the Hugging Face cache.
@Suite("add and remove: a Hub repository in the store's own catalog", .ownThreads, .networkGuard)
struct HubAddTests {
    static let tinyCommit = "a1b2c3d4e5f60718293a4b5c6d7e8f9001122334"
    static let shardedCommit = "b1b2c3d4e5f60718293a4b5c6d7e8f9001122334"
    static let ggufCommit = "c1b2c3d4e5f60718293a4b5c6d7e8f9001122334"
    static let gatedCommit = "d1b2c3d4e5f60718293a4b5c6d7e8f9001122334"
    static let token = "hf_GatedRepoTestToken"

    static func with(_ body: (AddWorld) throws -> Void) throws {
        let w = try AddWorld(); defer { w.remove() }
        try body(w)
    }

    @Test("add → list → fit → download → verify → remove: the estimate's exact value (106 MiB) from two ranged reads of the header, the weights never fetched by add; the entry pinned to the commit with the token rules; installed byte for byte; removed with its files")
    func fullFlow() throws {
        try Self.with { w in
            let (folder, facts) = try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            let weights = try #require(facts["model.safetensors"])
            #expect(weights.dataBytes == ModelRepo.tinyWeights, "the fixture's data bytes, by the generator")

            let add = try w.run(["add", "hf://org/tiny", "--json"])
            #expect(add.status == 0, "\(add)")
            let doc = try add.jsonObject()
            #expect(doc["modelId"] as? String == "hf-org-tiny")
            #expect(doc["requiredMb"] as? Int == ModelRepo.tinyRequiredMb, "\(add.stdout)")
            #expect((doc["weightsBytes"] as? NSNumber)?.int64Value == ModelRepo.tinyWeights)
            #expect((doc["kvCacheBytes"] as? NSNumber)?.int64Value == ModelRepo.tinyKV)
            #expect(doc["revision"] as? String == Self.tinyCommit && doc["requestedRevision"] as? String == "main")
            let files = try #require(doc["files"] as? [[String: Any]])
            #expect(Set(files.compactMap { $0["path"] as? String }) == ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"])
            for file in files {
                let path = try #require(file["path"] as? String)
                #expect(file["sha256"] as? String == facts[path]?.sha256, "\(path): its SHA-256")
                #expect(file["hash"] as? String == (path == "model.safetensors" ? "lfs" : "hashed"), "\(path)")
            }
            let skipped = Set((doc["skipped"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String })
            #expect(skipped == ["README.md", ".gitattributes", "assets/logo.png"], "\(skipped)")

            // add read the header with two ranges, through the redirect, and no weights.
            let log = try w.hub.log()
            let shown = log.map(\.description).joined(separator: "\n")
            let header = try #require(weights.headerBytes)
            #expect(log.contains { !$0.isCDN && $0.path == "/api/models/org/tiny/revision/main" && $0.query == "blobs=true" && $0.status == 200 }, "\(shown)")
            let cdn = log.filter(\.isCDN)
            #expect(cdn.map(\.range) == ["bytes=0-7", "bytes=8-\(header + 7)"] && cdn.allSatisfy { $0.status == 206 }, "two ranged reads at the CDN:\n\(shown)")
            #expect(cdn.reduce(0) { $0 + $1.sent } == 8 + header, "the CDN sent the header's bytes only:\n\(shown)")
            #expect(log.filter { !$0.isCDN && $0.isFor("model.safetensors") }.map(\.range) == ["bytes=0-7", "bytes=8-\(header + 7)"],
                    "the same Range on the origin's hop:\n\(shown)")

            // The entry, as the store's catalog holds it.
            let catalog = try w.userCatalog()
            let model = try #require((catalog["models"] as? [[String: Any]])?.first)
            #expect(model["id"] as? String == "hf-org-tiny" && model["kind"] as? String == "llm" && model["autoEligible"] as? Bool == false)
            #expect(model["revision"] as? String == Self.tinyCommit && model["displayName"] as? String == "org/tiny")
            let source = try #require((model["sources"] as? [[String: Any]])?.first)
            #expect(source["baseURL"] as? String == w.hub.origin + "/org/tiny/resolve/\(Self.tinyCommit)/")
            #expect(source["auth"] as? String == "huggingface")

            let listed = try #require(try w.listed("hf-org-tiny"))
            #expect(listed["origin"] as? String == "user" && listed["state"] as? String == "notInstalled" && listed["requiredMb"] as? Int == 106)
            let text = try w.run(["list"])
            #expect(text.stdout.contains("org/tiny (added)"), "\(text)")

            let fit = try w.run(["fit", "hf-org-tiny"])
            #expect(fit.status == 0 && fit.stdout.contains("fits"), "\(fit)")
            let download = try w.run(["download", "hf-org-tiny", "--no-progress"])
            #expect(download.status == 0, "\(download)")
            for path in ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"] {
                #expect(FileManager.default.contents(atPath: w.store + "/hf-org-tiny/" + path) == FileManager.default.contents(atPath: folder + "/" + path),
                        "\(path) installed byte for byte")
            }
            #expect(!Disk.exists(w.store + "/hf-org-tiny/README.md"))
            let verify = try w.run(["verify", "hf-org-tiny"])
            #expect(verify.status == 0 && verify.stdout.contains("4 files verified"), "\(verify)")
            #expect(try w.listed("hf-org-tiny")?["state"] as? String == "installed")

            let remove = try w.run(["remove", "hf-org-tiny", "--json"])
            #expect(remove.status == 0, "\(remove)")
            let removed = try remove.jsonObject()
            #expect(removed["deleted"] as? Bool == true && (removed["freedBytes"] as? NSNumber)?.int64Value ?? 0 > 3 << 20, "\(remove)")
            #expect(!Disk.exists(w.store + "/hf-org-tiny"), "the installed files went with it")
            #expect(try w.listed("hf-org-tiny") == nil, "no longer listed")
            #expect((try w.userCatalog()["models"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("a sharded repository: both shards' headers read (two ranges each), the weights their sum, the index taken; the estimate's exact value (110 MiB); downloaded and verified")
    func sharded() throws {
        try Self.with { w in
            let (_, facts) = try w.serve("org/sharded", commit: Self.shardedCommit, ModelRepo.sharded)
            let shards = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
            #expect(shards.compactMap { facts[$0]?.dataBytes }.reduce(0, +) == ModelRepo.shardedWeights)
            let add = try w.run(["add", "org/sharded@main", "--id", "sharded", "--name", "Sharded test", "--json"])
            #expect(add.status == 0, "\(add)")
            let doc = try add.jsonObject()
            #expect(doc["requiredMb"] as? Int == ModelRepo.shardedRequiredMb, "\(add.stdout)")
            #expect((doc["weightsBytes"] as? NSNumber)?.int64Value == ModelRepo.shardedWeights)
            #expect((doc["kvCache"] as? [String: Any])?["headDim"] as? Int == 32)
            #expect(Set(doc["safetensors"] as? [String] ?? []) == Set(shards))
            #expect((doc["files"] as? [[String: Any]])?.contains { $0["path"] as? String == "model.safetensors.index.json" } == true)
            let log = try w.hub.log()
            for shard in shards {
                let header = try #require(facts[shard]?.headerBytes)
                #expect(log.filter { $0.isCDN && $0.status == 206 }.contains { $0.range == "bytes=8-\(header + 7)" },
                        "\(shard)'s header range:\n\(log.map(\.description).joined(separator: "\n"))")
            }
            #expect(log.filter(\.isCDN).count == 4, "two ranged reads per shard, nothing else")
            let download = try w.run(["download", "sharded", "--no-progress"])
            #expect(download.status == 0, "\(download)")
            let verify = try w.run(["verify", "sharded"])
            #expect(verify.status == 0, "\(verify)")
            #expect(try w.listed("sharded")?["displayName"] as? String == "Sharded test")
        }
    }

    @Test("a gated repository: without a token exit 77 (authRequired) saying to set HF_TOKEN, with another token 77 again, nothing written; with its token added, and downloaded, the token only ever at the origin")
    func gatedWithToken() throws {
        try Self.with { w in
            try w.serve("org/gated", commit: Self.gatedCommit, ModelRepo.tiny, token: Self.token)
            let before = w.storeState()
            let none = try w.run(["add", "org/gated", "--json"])
            #expect(none.status == 77 && none.errorCode == "authRequired", "\(none)")
            #expect(none.stderr.contains("HF_TOKEN"), "\(none)")
            let wrong = try w.run(["add", "org/gated"], env: ["HF_TOKEN": "hf_SomeoneElse"])
            #expect(wrong.status == 77 && wrong.stderr.contains("403"), "\(wrong)")
            #expect(w.storeState() == before, "nothing written")

            try w.hub.clearLog()
            let add = try w.run(["add", "org/gated", "--id", "gated"], env: ["HF_TOKEN": Self.token])
            #expect(add.status == 0, "\(add)")
            let download = try w.run(["download", "gated", "--no-progress"], env: ["HF_TOKEN": Self.token])
            #expect(download.status == 0, "\(download)")
            let log = try w.hub.log()
            let shown = log.map(\.description).joined(separator: "\n")
            #expect(log.filter { !$0.isCDN }.allSatisfy { $0.authorization == "Bearer \(Self.token)" }, "every origin request carried it:\n\(shown)")
            #expect(log.filter(\.isCDN).allSatisfy { $0.authorization == nil } && log.contains(where: \.isCDN), "never the CDN:\n\(shown)")
        }
    }

    @Test("a GGUF-only repository is refused (exit 1, noSafetensors) naming the GGUF file, even with --include '*.gguf'; nothing written")
    func ggufOnlyRefused() throws {
        try Self.with { w in
            try w.serve("org/gguf-only", commit: Self.ggufCommit, ModelRepo.ggufOnly)
            for extra in [[], ["--include", "*.gguf"]] {
                let r = try w.run(["add", "org/gguf-only", "--json"] + extra)
                #expect(r.status == 1 && r.errorCode == "noSafetensors", "\(r)")
                #expect(r.stderr.contains("qwen3-0.6b-q4_k_m.gguf") && r.stderr.contains("safetensors"), "\(r)")
                #expect(w.storeState().isEmpty, "no store was made: \(w.storeState())")
            }
            #expect(!(try w.hub.log()).contains(where: \.isCDN), "no weights (nor headers) fetched")
        }
    }

    @Test("offline, from a complete snapshot in the Hugging Face cache: the same entry and estimate with no request at all; download then installs from the cache; no snapshot, or an incomplete one: exit 1, code offline, nothing written")
    func offlineFromCache() throws {
        try Self.with { w in
            let (folder, facts) = try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            let cache = HubCacheTests.HubRepo(hub: w.hubCache, repo: "org/tiny")
            let before = w.storeState()
            let missing = try w.run(["add", "org/tiny", "--offline", "--json"])
            #expect(missing.status == 1 && missing.errorCode == "offline", "\(missing)")
            #expect(missing.stderr.contains("Hugging Face cache"), "\(missing)")
            #expect(w.storeState() == before)

            for (path, fact) in facts {
                let data = try #require(FileManager.default.contents(atPath: folder + "/" + path))
                try cache.add(path, data, commit: Self.tinyCommit, lfs: fact.size >= 1 << 20)
            }
            try cache.setRef("main", to: Self.tinyCommit)
            // A blob gone: the snapshot is incomplete.
            let blob = cache.folder + "/blobs/" + (facts["model.safetensors"]?.sha256 ?? "")
            try FileManager.default.moveItem(atPath: blob, toPath: blob + ".aside")
            let incomplete = try w.run(["add", "org/tiny", "--json"], env: ["HF_HUB_OFFLINE": "1"])
            #expect(incomplete.status == 1 && incomplete.errorCode == "offline" && incomplete.stderr.contains("incomplete"), "\(incomplete)")
            #expect(w.storeState() == before)
            try FileManager.default.moveItem(atPath: blob + ".aside", toPath: blob)

            try w.hub.clearLog()
            let add = try w.run(["add", "org/tiny", "--json"], env: ["HF_HUB_OFFLINE": "1"])
            #expect(add.status == 0, "\(add)")
            let doc = try add.jsonObject()
            #expect(doc["fromCache"] as? Bool == true && doc["revision"] as? String == Self.tinyCommit)
            #expect(doc["requiredMb"] as? Int == ModelRepo.tinyRequiredMb && (doc["weightsBytes"] as? NSNumber)?.int64Value == ModelRepo.tinyWeights)
            for file in doc["files"] as? [[String: Any]] ?? [] {
                let path = file["path"] as? String ?? ""
                #expect(file["sha256"] as? String == facts[path]?.sha256, "\(path): its SHA-256, from the blob's name or hashed")
            }
            let source = try #require(((try w.userCatalog()["models"] as? [[String: Any]])?.first?["sources"] as? [[String: Any]])?.first)
            #expect(source["baseURL"] as? String == w.hub.origin + "/org/tiny/resolve/\(Self.tinyCommit)/")
            let download = try w.run(["download", "hf-org-tiny", "--no-progress"], env: ["HF_HUB_OFFLINE": "1"])
            #expect(download.status == 0, "\(download)")
            let requests = try w.hub.log()
            #expect(requests.isEmpty, "not one request: \(requests)")
        }
    }

    @Test("nothing is written on any failure: unknown repository and revision (exit 5), a bad reference (2), a catalog id (1), a hostile header (over 100 MB, not JSON), a range the server ignores, a malformed model information, an entry already added without --force; the store is byte for byte as before")
    func nothingWrittenOnFailure() throws {
        try Self.with { w in
            try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            let first = try w.run(["add", "org/tiny"])
            #expect(first.status == 0, "\(first)")
            try w.serve("org/huge-header", commit: Self.shardedCommit, ["files": [
                "model.safetensors": ["raw_header": String(repeating: " ", count: 16), "size": 64],
                "config.json": ["json": ["num_hidden_layers": 1]],
            ]])
            try w.serve("org/not-json", commit: Self.ggufCommit, ["files": [
                "model.safetensors": ["raw_header": "{\"a\": [1, 2", "size": 4096],
            ]])
            // A header length of 200,000,000: refused from the first 8 bytes.
            let hugeFolder = w.sandbox.root + "/repos/org/claims-huge"
            try FileManager.default.createDirectory(atPath: hugeFolder, withIntermediateDirectories: true)
            var bytes = [UInt8](repeating: 0, count: 4096)
            withUnsafeBytes(of: UInt64(200_000_000).littleEndian) { for (n, b) in $0.enumerated() { bytes[n] = b } }
            try Data(bytes).write(to: URL(fileURLWithPath: hugeFolder + "/model.safetensors"))
            try w.hub.serve(repo: "org/claims-huge", revision: Self.gatedCommit, folder: hugeFolder, lfsMin: 1 << 20)

            let before = w.storeState()
            #expect(before.contains { $0.hasPrefix("f user-catalog.json") })
            let cases: [(arguments: [String], settings: [String: Any], status: Int32, code: String, says: String)] = [
                (["add", "org/nope"], [:], 5, "unknownModel", "org/nope"),
                (["add", "org/tiny@v9", "--id", "tiny-v9"], [:], 5, "unknownModel", "v9"),
                (["add", "org/tiny/extra"], [:], 2, "usage", "ORG/REPO"),
                (["add", "org/tiny", "--id", "local-qwen3-4b"], [:], 1, "idTaken", "local-qwen3-4b"),
                (["add", "org/tiny", "--id", "Bad Id"], [:], 2, "usage", "--id"),
                (["add", "org/tiny"], [:], 1, "idTaken", "--force"),
                (["add", "org/claims-huge"], [:], 1, "invalidModelFile", "100 MB"),
                (["add", "org/not-json"], [:], 1, "invalidModelFile", "not JSON"),
                (["add", "org/huge-header"], [:], 1, "invalidModelFile", "model.safetensors"),
                (["add", "org/tiny", "--id", "ranged"], ["ignore_range": true], 1, "invalidHubAnswer", "Range"),
                (["add", "org/tiny", "--id", "bad-info"], ["api_body": #"{"sha": "ABC", "siblings": []}"#], 1, "invalidHubAnswer", "sha"),
            ]
            for c in cases {
                try w.hub.configure(["ignore_range": false, "api_body": NSNull()].merging(c.settings) { $1 })
                let r = try w.run(c.arguments + ["--json"])
                #expect(r.status == c.status && r.errorCode == c.code, "\(r)")
                #expect(r.stderr.contains(c.says), "the message names \(c.says):\n\(r)")
                #expect(w.storeState() == before, "\(c.arguments): nothing written")
            }
            try w.hub.configure(["ignore_range": false, "api_body": NSNull()])
            let forced = try w.run(["add", "org/tiny", "--force", "--name", "Tiny again", "--json"])
            #expect(forced.status == 0, "\(forced)")
            #expect(try forced.jsonObject()["replaced"] as? Bool == true, "\(forced)")
            #expect((try w.userCatalog()["models"] as? [[String: Any]])?.map { $0["displayName"] as? String } == ["Tiny again"])
        }
    }

    @Test("SIGINT while add reads a header (the CDN holds its answer): exit 130, nothing written")
    func interruptWritesNothing() throws {
        try Self.with { w in
            try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            try w.hub.configure(["hold": 0, "hold_times": 1])
            let before = w.storeState()
            let process = try CLIProcess(binary: try #require(CLIBinary.path), arguments: ["add", "org/tiny"],
                                         environment: w.sandbox.environment(["HF_ENDPOINT": w.hub.origin]),
                                         ioDirectory: w.sandbox.root + "/io", currentDirectory: w.sandbox.root)
            #expect(process.waitUntil { (try? w.hub.log())?.contains(where: \.isCDN) == true }, "add reached the CDN")
            process.send(SIGINT)
            let r = process.wait()
            #expect(r.status == 130 && r.stderr.contains("nothing was written"), "\(r)")
            #expect(w.storeState() == before)
        }
    }

    @Test("a damaged user-catalog.json is named in a warning and the signed catalog keeps working; add refuses to overwrite it (exit 6); remove refuses a catalog model (1) and an unknown id (5)")
    func damagedUserCatalogAndRemoveRules() throws {
        try Self.with { w in
            try FileManager.default.createDirectory(atPath: w.store, withIntermediateDirectories: true)
            let damaged = Data(#"{"schemaVersion": 1, "models": [oops"#.utf8)
            try damaged.write(to: URL(fileURLWithPath: w.store + "/user-catalog.json"))
            let list = try w.run(["list", "--json"])
            #expect(list.status == 0, "\(list)")
            #expect(list.stderr.contains("warning: \(w.store)/user-catalog.json is not a valid catalog"), "\(list)")
            #expect((try list.jsonObject()["models"] as? [Any])?.count == 6, "the built-in catalog's models")
            try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            let add = try w.run(["add", "org/tiny", "--json"])
            #expect(add.status == 6 && add.errorCode == "invalidCatalog", "\(add)")
            #expect(FileManager.default.contents(atPath: w.store + "/user-catalog.json") == damaged, "left as it was")

            let catalogModel = try w.run(["remove", "local-qwen3-4b", "--json"])
            #expect(catalogModel.status == 1 && catalogModel.errorCode == "notUserModel", "\(catalogModel)")
            let unknown = try w.run(["remove", "no-such-model", "--json"])
            #expect(unknown.status == 5 && unknown.errorCode == "unknownModel", "\(unknown)")
        }
    }

    @Test("the library: addHubModel returns the typed result and the model joins the engine's catalog at once (its download by the same engine), removeUserModel drops it; failures are typed with their codes")
    func library() throws {
        try Self.with { w in
            try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            let env = w.sandbox.environment(["HF_ENDPOINT": w.hub.origin])
            let engine = try EngineSetup(environment: env, storeDirectory: w.store).makeEngine()
            let options = DownloadOptions(policy: TransferPolicy(environment: env))
            let request = HubAddRequest(reference: try HubReference.parse("org/tiny@main"), id: "tiny", displayName: "Tiny",
                                        selection: try HubFileSelection(exclude: ["tokenizer_config.json"]), autoEligible: true)
            let result = try engine.addHubModel(request, options: options)
            #expect(result.estimate.requiredMb == ModelRepo.tinyRequiredMb && result.estimate.weightsBytes == ModelRepo.tinyWeights)
            #expect(result.estimate.kvCache == KVCacheShape(layers: 2, kvHeads: 2, headDim: 16))
            #expect(result.commit == Self.tinyCommit && !result.replaced && !result.fromCache)
            #expect(result.skipped.contains(SkippedFile(path: "tokenizer_config.json", reason: "--exclude tokenizer_config.json")))
            let model = try #require(engine.catalog.model(id: "tiny"), "in the engine's catalog at once")
            #expect(model.origin == .user && model.autoEligible && model.files.count == 3)
            #expect(engine.userModels.map(\.id) == ["tiny"])
            let path = try engine.downloadBlocking(modelId: "tiny", options: options, cancellation: CancellationFlag(), onEvent: { _ in })
            #expect(path.hasSuffix("/tiny"))
            #expect(try engine.status(of: "tiny").isInstalled)

            do throws(LocalModelError) {
                _ = try engine.addHubModel(HubAddRequest(reference: HubReference(organization: "org", name: "missing")), options: options)
                Issue.record("a missing repository was added")
            } catch {
                #expect(error.code == .unknownModel && error.exitStatus == 5, "\(error)")
            }
            do throws(LocalModelError) {
                _ = try engine.addHubModel(HubAddRequest(reference: HubReference(organization: "org", name: "tiny"), id: "tiny"), options: options)
                Issue.record("an id added before was replaced without force")
            } catch {
                #expect(error.code == .idTaken, "\(error)")
            }
            let removal = try engine.removeUserModel(id: "tiny")
            #expect(removal.deleted.existed && removal.deleted.freedBytes > 0)
            #expect(engine.catalog.model(id: "tiny") == nil && engine.userModels.isEmpty)
            do throws(LocalModelError) {
                _ = try engine.removeUserModel(id: "local-qwen3-4b")
                Issue.record("a catalog model was removed")
            } catch {
                #expect(error.code == .notUserModel && error.exitStatus == 1, "\(error)")
            }
        }
    }

    @Test("--auto-eligible: auto names the added model as its download target on a device where no shipped rung fits; a 429 with Retry-After is waited out")
    func autoEligibleAndRateLimit() throws {
        try Self.with { w in
            try w.serve("org/tiny", commit: Self.tinyCommit, ModelRepo.tiny)
            try w.hub.configure(["too_many": 2, "retry_after": 1])
            let add = try w.run(["add", "org/tiny", "--auto-eligible"])
            #expect(add.status == 0, "\(add)")
            #expect(try w.hub.log().filter { $0.status == 429 }.count == 2)
            // 300 MiB of memory, half of it the class budget: only the 106 MiB model fits.
            let auto = try w.run(["auto", "--json"], env: ["EXTENTOS_MEMORY_MB": "300", "EXTENTOS_MEMORY_AVAILABLE_MB": "300"])
            #expect(auto.status == 0, "\(auto)")
            #expect(try auto.jsonObject()["downloadTarget"] as? String == "hf-org-tiny", "\(auto)")
        }
    }
}
