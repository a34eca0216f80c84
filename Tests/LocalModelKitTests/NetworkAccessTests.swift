// Credentials and offline mode at the transfer level (docs/models.md):
// real downloads through libcurl against Tests/Tools/faultserver.py on 127.0.0.1, whose
// request log shows each request's Authorization header and whose connection count shows
// whether anything connected at all.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// A one-model engine whose source is `base` (+ the file names), with `auth` on it.
private func engine(_ world: TransferWorld, _ id: String, _ files: [ServedFile], base: String,
                    auth: SourceAuth? = .huggingface) -> LocalModelEngine {
    let source = ModelSource.files(baseURL: base)
    let model = CatalogModel(
        id: id, kind: .llm, displayName: "Credential test \(id)", requiredMb: 100, autoEligible: true, revision: nil,
        files: files.map { CatalogFile(path: $0.path, size: Int64($0.size), sha256: $0.sha256) },
        sources: [source], sourceAuth: auth.map { [source: $0] } ?? [:])
    let catalog = Catalog(catalogVersion: 1, generatedAt: "2026-11-30T00:00:00Z", models: [model])
    return LocalModelEngine(layout: world.layout, catalog: catalog, probe: FaultTestProbe())
}

/// The test policy, its credentials and offline switch read from `environment` only (never
/// from the environment the tests run in).
private func policy(_ environment: [String: String], home: String) -> TransferPolicy {
    var env = environment
    env["HOME"] = env["HOME"] ?? home
    var policy = transferTestPolicy()
    policy.credentials = TransferCredentials(environment: env)
    policy.offlineBy = TransferPolicy.offlineSwitch(env)
    return policy
}

private func download(_ engine: LocalModelEngine, _ id: String, _ policy: TransferPolicy, mirror: String? = nil) async -> Result<String, LocalModelError> {
    do throws(LocalModelError) {
        return .success(try await engine.download(modelId: id, options: DownloadOptions(policy: policy, mirror: mirror, progressInterval: 0.05)))
    } catch {
        return .failure(error)
    }
}

@Suite("Credentials and offline mode (fault-injecting HTTP server)", .ownThreads, .networkGuard)
struct NetworkAccessTests {
    static let token = "hf_test_Secret123"

    @Test("the Hugging Face token reaches the source's own origin only: a redirect to another port gets none; a redirect on the same origin keeps it")
    func tokenStaysOnItsOrigin() async throws {
        try await withTransferWorld { world in
            let cdn = try await FaultServer.start()
            defer { cdn.stop() }
            let big = try ServedFile("model.bin", size: 300_000, seed: 71)
            let small = try ServedFile("config.json", size: 2_000, seed: 72)
            // The origin redirects the big file to the "CDN" (another port), the small one to
            // another path of its own origin; each target serves the bytes.
            try cdn.configure("/cdn/model.bin", size: big.size, seed: big.seed)
            try world.server.configure("/m/tok/model.bin", size: big.size, seed: big.seed, ["redirect": cdn.origin + "/cdn/model.bin"])
            try world.server.configure("/m/tok/config.json", size: small.size, seed: small.seed, ["redirect": "/same/config.json"])
            try world.server.configure("/same/config.json", size: small.size, seed: small.seed)
            let engine = engine(world, "tok", [big, small], base: world.server.origin + "/m/tok/")

            let result = await download(engine, "tok", policy(["HF_TOKEN": Self.token], home: world.root))
            try expectTransferInstalled(world, engine, "tok", result, [big, small])

            let origin = try world.server.stats()
            let originRequests = ["/m/tok/model.bin", "/m/tok/config.json", "/same/config.json"].flatMap { origin[$0]?.log ?? [] }
            #expect(originRequests.count == 3, "\(origin)")
            #expect(originRequests.allSatisfy { $0.authorization == "Bearer \(Self.token)" },
                    "every request to the origin carries the token: \(originRequests.map(\.authorization))")
            let cdnRequests = try cdn.stats("/cdn/model.bin").log
            #expect(!cdnRequests.isEmpty)
            #expect(cdnRequests.allSatisfy { $0.authorization == nil },
                    "the host a redirect leads to (another port) never sees the token: \(cdnRequests.map(\.authorization))")
        }
    }

    @Test("no token for a source without \"auth\", nor for a --mirror of a source with it, even with HF_TOKEN set")
    func tokenOnlyWhereAsked() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.bin", size: 40_000, seed: 73)
            try world.serve("plain", file)
            let plain = engine(world, "plain", [file], base: world.server.origin + "/m/plain/", auth: nil)
            let r1 = await download(plain, "plain", policy(["HF_TOKEN": Self.token], home: world.root))
            try expectTransferInstalled(world, plain, "plain", r1, [file])
            #expect(try world.server.stats("/m/plain/model.bin").log.allSatisfy { $0.authorization == nil })

            // The catalog names an origin that asks for the token; the mirror is another origin.
            // (Other bytes than the first model's: those would be linked from its install.)
            let other = try ServedFile("model.bin", size: 40_000, seed: 76)
            let mirror = try await FaultServer.start()
            defer { mirror.stop() }
            try mirror.configure("/m/mirrored/model.bin", size: other.size, seed: other.seed)
            let mirrored = engine(world, "mirrored", [other], base: "https://huggingface.co/m/mirrored/")
            let r2 = await download(mirrored, "mirrored", policy(["HF_TOKEN": Self.token], home: world.root), mirror: mirror.origin)
            try expectTransferInstalled(world, mirrored, "mirrored", r2, [other])
            let log = try mirror.stats("/m/mirrored/model.bin").log
            #expect(!log.isEmpty && log.allSatisfy { $0.authorization == nil }, "\(log.map(\.authorization))")
        }
    }

    @Test("401 without a token: authRequired (exit 77), once, naming HF_TOKEN; a refused token: authRequired naming where it came from, never its value")
    func unauthorizedIsAuthRequired() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.bin", size: 40_000, seed: 74)
            try world.serve("gated", file, ["auth": "Bearer right-token"])
            let engine = engine(world, "gated", [file], base: world.server.origin + "/m/gated/")

            let none = await download(engine, "gated", policy(["HF_HOME": world.root + "/hf"], home: world.root))
            let error = try #require(transferFailure(none))
            guard case let .authRequired(id, _, _, status, sent) = error else {
                Issue.record("expected authRequired, got \(error)"); return
            }
            #expect(id == "gated" && status == 401)
            #expect(sent == .noHuggingFaceToken(howToSet: HuggingFaceToken(environment: ["HF_HOME": world.root + "/hf"]).howToSet))
            #expect(error.code == .authRequired && error.exitStatus == 77)
            #expect(error.description.contains("HF_TOKEN") && error.description.contains(world.root + "/hf/token"), "\(error)")
            #expect(try world.server.stats(world.serverPath("gated", "model.bin")).requests == 1, "a 401 is final, never retried")

            let wrong = await download(engine, "gated", policy(["HF_TOKEN": Self.token], home: world.root))
            let refused = try #require(transferFailure(wrong))
            #expect(refused.code == .authRequired)
            if case let .authRequired(_, _, _, _, sent) = refused { #expect(sent == .huggingFaceToken(from: "$HF_TOKEN")) }
            #expect(refused.description.contains("$HF_TOKEN") && refused.description.contains("refused"), "\(refused)")
            #expect(!refused.description.contains(Self.token), "the token never appears in a message")
            try expectTransferAbsent(world, engine, "gated")

            let right = await download(engine, "gated", policy(["HF_TOKEN": "right-token"], home: world.root))
            try expectTransferInstalled(world, engine, "gated", right, [file])
        }
    }

    @Test("offline: a download fails with code offline and the server sees no connection at all; bytes already on disk install without one")
    func offlineOpensNoConnection() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.bin", size: 40_000, seed: 75)
            try world.serve("off", file)
            let engine = engine(world, "off", [file], base: world.server.origin + "/m/off/", auth: nil)
            for switchName in ["EXTENTOS_OFFLINE", "HF_HUB_OFFLINE"] {
                let before = try world.server.connections()
                let result = await download(engine, "off", policy([switchName: "1"], home: world.root))
                let after = try world.server.connections()
                #expect(after == before + 1, "\(switchName): no connection but the test's own question (\(before) → \(after))")
                let error = try #require(transferFailure(result))
                #expect(error.code == .offline && error.exitStatus == 1, "\(error)")
                #expect(error.description.contains(switchName), "\(error)")
                // What an app reads from the cause: the switch, by name.
                if case .transfer(let failure, let id) = error {
                    #expect(failure.offlineSwitch?.hasPrefix(switchName) == true && id == "off", "\(failure)")
                } else {
                    Issue.record("expected .transfer with the offline switch, got \(error)")
                }
                try expectTransferAbsent(world, engine, "off")
            }
            // Every byte already in the partial folder: verified from disk, installed offline.
            try world.writePartial("off", "model.bin", file.bytes)
            let before = try world.server.connections()
            let result = await download(engine, "off", policy(["EXTENTOS_OFFLINE": "yes"], home: world.root))
            #expect(try world.server.connections() == before + 1)
            try expectTransferInstalled(world, engine, "off", result, [file])
        }
    }
}

@Suite("Credential rules", .networkGuard)
struct CredentialRuleTests {
    @Test("the Hugging Face token's places, in the Hub client's order, cleaned as it cleans them")
    func tokenLookup() throws {
        let dir = NSTemporaryDirectory() + "hf-token-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir + "/home/.cache/huggingface", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/hfhome", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: dir + "/xdg/huggingface", withIntermediateDirectories: true)
        try "\r\n  from-default \n".write(toFile: dir + "/home/.cache/huggingface/token", atomically: true, encoding: .utf8)
        try "from-hf-home".write(toFile: dir + "/hfhome/token", atomically: true, encoding: .utf8)
        try "from-xdg".write(toFile: dir + "/xdg/huggingface/token", atomically: true, encoding: .utf8)
        try "from-path\n".write(toFile: dir + "/path-token", atomically: true, encoding: .utf8)
        func token(_ env: [String: String]) -> (String, String)? {
            (try? HuggingFaceToken(environment: ["HOME": dir + "/home"].merging(env) { $1 }).resolve()).map { ($0.token.value, $0.from) }
        }
        #expect(token([:])! == ("from-default", dir + "/home/.cache/huggingface/token"))
        #expect(token(["XDG_CACHE_HOME": dir + "/xdg"])! == ("from-xdg", dir + "/xdg/huggingface/token"))
        #expect(token(["XDG_CACHE_HOME": dir + "/xdg", "HF_HOME": dir + "/hfhome"])! == ("from-hf-home", dir + "/hfhome/token"))
        #expect(token(["HF_HOME": dir + "/hfhome", "HF_TOKEN_PATH": dir + "/path-token"])! == ("from-path", dir + "/path-token"))
        #expect(token(["HF_TOKEN_PATH": dir + "/path-token", "HUGGING_FACE_HUB_TOKEN": "legacy"])! == ("legacy", "$HUGGING_FACE_HUB_TOKEN"))
        #expect(token(["HUGGING_FACE_HUB_TOKEN": "legacy", "HF_TOKEN": " from-variable\r\n"])! == ("from-variable", "$HF_TOKEN"))
        // An empty variable is no variable; a token file that is missing is no token.
        #expect(token(["HF_TOKEN": "", "HF_TOKEN_PATH": dir + "/path-token"])! == ("from-path", dir + "/path-token"))
        #expect(token(["HF_TOKEN_PATH": dir + "/missing"]) == nil)
        // A variable of whitespace only gives no token: the file is read (the older variable is not).
        #expect(token(["HF_TOKEN": "\n \n", "HUGGING_FACE_HUB_TOKEN": "legacy"])! == ("from-default", dir + "/home/.cache/huggingface/token"))
        #expect(token(["HF_TOKEN_PATH": "~/.cache/huggingface/token"])! == ("from-default", dir + "/home/.cache/huggingface/token"))
        // Sending one can be switched off, as in the Hub client.
        #expect(token(["HF_TOKEN": "t", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "true"]) == nil)
    }

    @Test("origins: scheme, host and port with default ports written; userinfo dropped and redacted")
    func origins() {
        #expect(URLOrigin.of("https://HuggingFace.co/a/b") == "https://huggingface.co:443")
        #expect(URLOrigin.of("https://huggingface.co:443/x") == URLOrigin.of("https://huggingface.co/y"))
        #expect(URLOrigin.of("https://huggingface.co:8443/x") == "https://huggingface.co:8443")
        #expect(URLOrigin.of("http://127.0.0.1:8080/m/") == "http://127.0.0.1:8080")
        #expect(URLOrigin.of("http://127.0.0.1/") == "http://127.0.0.1:80")
        #expect(URLOrigin.of("https://[::1]:9/x") == "https://[::1]:9")
        #expect(URLOrigin.of("https://user:pw@cdn.example/x") == "https://cdn.example:443")
        #expect(URLOrigin.of("https://h:99999/") == nil)
        #expect(URLOrigin.of("ftp://h/") == nil)
        #expect(URLOrigin.redacted("https://user:secret@mirror.example:8080/a@b") == "https://***@mirror.example:8080/a@b")
        #expect(URLOrigin.redacted("https://mirror.example/a@b") == "https://mirror.example/a@b")
    }

    @Test("a policy holding a token never shows it: not in its description, not in its reflection")
    func tokenNeverPrinted() {
        var policy = TransferPolicy(environment: ["HF_TOKEN": "hf_NeverShown"])
        policy.credentials.bearerOrigins = ["https://huggingface.co:443"]
        #expect(!String(describing: policy).contains("hf_NeverShown"))
        #expect(!String(reflecting: policy).contains("hf_NeverShown"))
        var dumped = ""
        dump(policy, to: &dumped)
        #expect(!dumped.contains("hf_NeverShown"))
    }

    @Test("the built-in Hub sources ask for the Hugging Face token; others do not")
    func bundledAuth() {
        for model in BundledCatalog.catalog.models {
            for source in model.sources {
                let onHub = source.primaryURL.hasPrefix("https://huggingface.co/")
                #expect((model.sourceAuth[source] == .huggingface) == onHub, "\(model.id): \(source.primaryURL)")
            }
        }
    }
}
