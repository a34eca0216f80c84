// Resume through redirects (docs/models.md): the Hugging Face
// Hub answers every large file with a 302 (a short body, an ETag of its own) to a signed
// URL on its CDN. Real downloads through libcurl against Tests/Tools/faultserver.py on
// 127.0.0.1; the server's request log shows each hop's Range, If-Range, Authorization and
// the body bytes sent, so "only the missing bytes" is checked at byte level.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

@Suite("Resume through redirects (fault-injecting HTTP server)", .ownThreads, .networkGuard)
struct RedirectResumeTests {
    static let size = 600_000

    @Test("a resume through a 302 with a body keeps Range and If-Range on both hops and fetches only the missing bytes")
    func resumeThroughRedirectFetchesOnlyWhatIsMissing() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: Self.size, seed: 91)
            let present = 250_000
            try world.server.configure("/cdn/model.safetensors", size: file.size, seed: file.seed)
            try world.serve("hub", file, ["redirect": world.server.origin + "/cdn/model.safetensors"])
            let engine = world.engine("hub", [file])
            try world.writePartial("hub", file.path, Array(file.bytes[0..<present]))
            try world.saveValidators(engine, "hub", file, etag: file.etag)
            let log = TransferEventLog()
            let (result, _) = await transferDownload(engine, "hub", log: log)
            try expectTransferInstalled(world, engine, "hub", result, [file])

            let origin = try world.server.stats(world.serverPath("hub", file.path)).log
            let cdn = try world.server.stats("/cdn/model.safetensors").log
            #expect(origin.count == 1 && origin.first?.status == 302, "one question to the origin: \(origin)")
            #expect(origin.first?.range == "bytes=\(present)-" && origin.first?.ifRange == file.etag)
            #expect(cdn.count == 1, "one request to the CDN: \(cdn)")
            #expect(cdn.first?.status == 206 && cdn.first?.range == "bytes=\(present)-", "the CDN continues the partial: \(cdn)")
            #expect(cdn.first?.ifRange == file.etag, "If-Range is the saved strong ETag of the bytes, never the 302's: \(String(describing: cdn.first?.ifRange))")
            #expect(cdn.first?.sent == Int64(file.size - present), "only the missing bytes moved")
            #expect(log.restarts.isEmpty, "nothing restarted: \(log.restarts)")
        }
    }

    @Test("the validator kept for If-Range is the final answer's ETag, not the redirect's: a drop after the redirect resumes with the CDN's")
    func validatorIsTheFinalAnswers() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: Self.size, seed: 92)
            let dropAt = 200_000
            try world.server.configure("/cdn/model.safetensors", size: file.size, seed: file.seed, ["drop": dropAt, "drop_times": 1])
            try world.serve("val", file, ["redirect": world.server.origin + "/cdn/model.safetensors"])
            let engine = world.engine("val", [file])
            let (result, _) = await transferDownload(engine, "val")
            try expectTransferInstalled(world, engine, "val", result, [file])
            let cdn = try world.server.stats("/cdn/model.safetensors").log
            #expect(cdn.count == 2, "the dropped answer and the resume: \(cdn)")
            #expect(cdn.last?.status == 206 && cdn.last?.range == "bytes=\(dropAt)-")
            #expect(cdn.last?.ifRange == file.etag, "the CDN's ETag, not \"pointer-1\": \(String(describing: cdn.last?.ifRange))")
            #expect(try world.server.stats("/cdn/model.safetensors").sent == Int64(file.size), "no byte fetched twice")
        }
    }

    @Test("a drop, then the signed URL expires: the retry meets 403 at the CDN, asks the origin for a fresh redirect at no cost to the retry budget, and resumes")
    func expiredSignedURLGoesBackToTheOrigin() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: Self.size, seed: 93)
            let dropAt = 300_000
            // Each answer of the origin names a URL of its own (/cdn/1, /cdn/2, …); the first
            // one drops the connection mid-file and is refused from then on (expired).
            try world.server.configure("/cdn/1", size: file.size, seed: file.seed, ["drop": dropAt, "drop_times": 1, "expire_after": 1])
            try world.server.configure("/cdn/2", size: file.size, seed: file.seed, ["expire_after": 1])
            try world.serve("exp", file, ["redirect": world.server.origin + "/cdn/{n}"])
            let engine = world.engine("exp", [file])
            let log = TransferEventLog()
            // A budget of no attempt without progress: a refusal that cost budget would fail it.
            let (result, _) = await transferDownload(engine, "exp", policy: transferTestPolicy(retryBudget: 0), log: log)
            try expectTransferInstalled(world, engine, "exp", result, [file])

            let first = try world.server.stats("/cdn/1").log
            let second = try world.server.stats("/cdn/2").log
            #expect(first.map(\.status) == [200, 403], "the retry went straight to the signed URL it had, and met its expiry: \(first)")
            #expect(try world.server.stats(world.serverPath("exp", file.path)).requests == 2, "then a fresh redirect from the origin")
            #expect(second.count == 1 && second.first?.status == 206 && second.first?.range == "bytes=\(dropAt)-",
                    "the fresh URL continues the partial: \(second)")
            #expect(second.first?.ifRange == file.etag)
            #expect(second.first?.sent == Int64(file.size - dropAt), "missing bytes only")
            #expect(log.retries.contains { $0.cause.contains("expired") && $0.delay == 0 }, "the expiry is said, and waits for nothing: \(log.retries)")
        }
    }

    @Test("a freshly redirected URL that is refused (403 at the CDN) fails the file as an HTTP error, asked once")
    func freshRedirectRefusedIsFinal() async throws {
        try await withTransferWorld { world in
            // The CDN on another port: a refusal from the source's own origin would be authRequired.
            let cdn = try await FaultServer.start()
            defer { cdn.stop() }
            let file = try ServedFile("model.safetensors", size: 40_000, seed: 94)
            try cdn.configure("/cdn/refused", size: file.size, seed: file.seed, ["status": 403])
            try world.serve("ref", file, ["redirect": cdn.origin + "/cdn/refused"])
            let engine = world.engine("ref", [file])
            let (result, _) = await transferDownload(engine, "ref")
            let error = transferFailure(result)
            #expect(error?.code == .httpStatus, "\(String(describing: error))")
            #expect(try cdn.stats("/cdn/refused").requests == 1 && world.server.stats(world.serverPath("ref", file.path)).requests == 1)
            try expectTransferAbsent(world, engine, "ref")
        }
    }

    @Test("a partial whose server gives only a weak ETag and no Last-Modified is fetched again from zero, never resumed without If-Range (P5)")
    func weakValidatorRestarts() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: Self.size, seed: 95)
            let dropAt = 200_000
            try world.serve("weak", file, ["validators": "weak", "drop": dropAt, "drop_times": 1])
            let engine = world.engine("weak", [file])
            let log = TransferEventLog()
            let (result, _) = await transferDownload(engine, "weak", log: log)
            try expectTransferInstalled(world, engine, "weak", result, [file])
            let requests = try world.server.stats(world.serverPath("weak", file.path)).log
            #expect(requests.count == 2 && requests.allSatisfy { $0.range == nil && $0.ifRange == nil },
                    "no Range without a validator to ask with: \(requests)")
            #expect(log.restarts.contains { $0.contains("validator") }, "the restart is said: \(log.restarts)")
        }
    }

    @Test("a partial an earlier run left without any validator is fetched from zero")
    func partialWithoutValidatorRestarts() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: Self.size, seed: 96)
            try world.serve("none", file)
            let engine = world.engine("none", [file])
            try world.writePartial("none", file.path, Array(file.bytes[0..<300_000]))
            let (result, _) = await transferDownload(engine, "none")
            try expectTransferInstalled(world, engine, "none", result, [file])
            let requests = try world.server.stats(world.serverPath("none", file.path)).log
            #expect(requests.count == 1 && requests.first?.range == nil && requests.first?.status == 200, "\(requests)")
        }
    }
}

@Suite("An expired or revoked Hugging Face login (fault-injecting HTTP server)", .ownThreads, .networkGuard)
struct RefusedTokenTests {
    static let token = "hf_expired_Token42"

    private func engine(_ world: TransferWorld, _ id: String, _ files: [ServedFile]) -> LocalModelEngine {
        let source = ModelSource.files(baseURL: world.server.origin + "/m/\(id)/")
        let model = CatalogModel(
            id: id, kind: .llm, displayName: "Token test \(id)", requiredMb: 100, autoEligible: true, revision: nil,
            files: files.map { CatalogFile(path: $0.path, size: Int64($0.size), sha256: $0.sha256) },
            sources: [source], sourceAuth: [source: .huggingface])
        let catalog = Catalog(catalogVersion: 1, generatedAt: "2026-11-30T00:00:00Z", models: [model])
        return LocalModelEngine(layout: world.layout, catalog: catalog, probe: FaultTestProbe())
    }

    private func policy(_ world: TransferWorld) -> TransferPolicy {
        var policy = transferTestPolicy(retryBudget: 0)
        policy.credentials = TransferCredentials(environment: ["HF_TOKEN": Self.token, "HOME": world.root])
        return policy
    }

    @Test("a public model: every file whose request carried the refused token (401) is asked again without it, once, and installs")
    func publicModelInstallsWithoutTheRefusedToken() async throws {
        try await withTransferWorld { world in
            let files = try (1...3).map { try ServedFile("part-\($0).safetensors", size: 100_000, seed: 100 + $0) }
            // Each file's first request is refused, as the Hub refuses an expired token even
            // for a public repository; without the token it answers.
            for file in files { try world.serve("pub", file, ["statuses": [401]]) }
            let engine = engine(world, "pub", files)
            let log = TransferEventLog()
            let (result, _) = await transferDownload(engine, "pub", policy: policy(world), log: log)
            try expectTransferInstalled(world, engine, "pub", result, files)
            for file in files {
                let requests = try world.server.stats(world.serverPath("pub", file.path)).log
                #expect(requests.last?.authorization == nil && requests.last?.status == 200, "\(file.path): \(requests)")
                #expect(requests.filter { $0.authorization != nil }.count <= 1, "the token is sent at most once per file")
            }
            #expect(log.retries.contains { $0.cause.contains("refused") && $0.cause.contains("$HF_TOKEN") }, "said once: \(log.retries)")
        }
    }

    @Test("a model that needs a valid token: the second 401 (without it) is authRequired, naming the refused token")
    func gatedModelStillNeedsAValidToken() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.safetensors", size: 50_000, seed: 104)
            try world.serve("gated", file, ["auth": "Bearer hf_valid"])
            let engine = engine(world, "gated", [file])
            let (result, _) = await transferDownload(engine, "gated", policy: policy(world))
            guard let error = transferFailure(result) else { return }
            #expect(error.code == .authRequired, "\(error)")
            #expect(error.description.contains("$HF_TOKEN") && error.description.contains("refused"), "\(error)")
            let requests = try world.server.stats(world.serverPath("gated", file.path)).log
            #expect(requests.map(\.authorization) == ["Bearer \(Self.token)", nil], "once with, once without: \(requests)")
            try expectTransferAbsent(world, engine, "gated")
        }
    }
}
