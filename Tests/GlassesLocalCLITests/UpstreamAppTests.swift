import Foundation
import GlassesTestSupport
import Testing

/// Source and behaviour compatibility with the upstream SDK: Tests/Fixtures/upstream-app is
/// an app written against swift-glasses 2.5's public API the way apps are written
/// (exhaustive switches over CloudFallbackReason, AutoResolution, LocalTierError and
/// KokoroVoiceModel.DownloadError without a default, every call kept as an unannotated
/// value, upstream's seam `LocalTierRegistry.autoResolver`, DeviceFit.fits only read, a
/// cancelled task caught as CancellationError). The build compiling it is half the test;
/// here it runs, and every value it printed is checked against what upstream documents.
@Suite("An app written against the upstream SDK", .ownThreads, .networkGuard)
struct UpstreamAppTests {
    static func binary() throws -> String {
        try #require(BuiltProduct.path("upstream-app"), "upstream-app was not built")
    }

    /// The app's `key=value` lines, every value of a key in order.
    struct Seen {
        var values: [String: [String]] = [:]
        init(_ r: CLIResult) {
            for line in r.stdoutLines {
                guard let eq = line.firstIndex(of: "=") else { continue }
                values[String(line[..<eq]), default: []].append(String(line[line.index(after: eq)...]))
            }
        }
        subscript(_ key: String) -> String? { values[key]?.last }
    }

    static let voiceId = "kokoro-en-v0_19"

    @Test("the shipped catalog as upstream documents it: the five ladder ids in order with their sizes, the voice's 369,304,124 bytes and its folder before any install, delete of an unknown id false, the resolver through LocalTierRegistry.autoResolver; no call creates the store")
    func shippedValues() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        // A 8 GB device: class budget 4096 MB, so the 4B rung is the one to download.
        let env = sb.environment(["EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"])
        let r = try Sandbox.runProcess(try Self.binary(), ["shipped"], environment: env, ioDirectory: sb.root + "/io", timeout: 60)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "registered before create, nothing to report\n\(r.stderr)")
        let seen = Seen(r)
        let ladder = ["local-qwen3-0.6b", "local-qwen25-1.5b", "local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b"]
        #expect(seen["ladder"] == ladder.joined(separator: ","), "models() is upstream's ladder, in order, never the voice: \(r.stdout)")
        let rows = (seen.values["model"] ?? []).map { $0.split(separator: " ").map(String.init) }
        #expect(rows.map { $0.first ?? "" } == ladder, "\(r.stdout)")
        #expect(rows.map { $0.dropFirst().first ?? "" } == ["500", "1000", "1200", "2900", "5800"], "requiredMb: \(r.stdout)")
        #expect(rows.allSatisfy { $0.count == 5 && $0[2] == "false" && (Int64($0[4]) ?? 0) > 0 },
                "nothing installed, and every totalBytes > 0: \(r.stdout)")
        #expect(rows.map { $0.count == 5 ? $0[3] : "" } == ["false", "false", "true", "true", "true"], "autoEligible: \(r.stdout)")
        #expect(seen["choice.isLocal"] == "false" && seen["choice.reason"] == "weightsNotPresent"
                && seen["choice.downloadTarget"] == "local-qwen3-4b", "\(r.stdout)")
        #expect(seen["fit"]?.hasPrefix("local-qwen3-1.7b ") == true, "\(r.stdout)")
        #expect(seen["voice.totalBytes"] == "369304124", "\(r.stdout)")
        #expect(seen["voice.directory"] == sb.store + "/voices/\(Self.voiceId)", "the voice folder, before any install: \(r.stdout)")
        #expect(seen["voice.installed"] == "false", "\(r.stdout)")
        #expect(seen["delete.unknown"] == "false", "upstream answers false for an unknown id: \(r.stdout)")
        #expect(seen["fit.writable"] == "false", "DeviceFit.fits is get-only, as upstream's: \(r.stdout)")
        // Upstream's seam: unset until register(), then the engine's autoChoice; served
        // remotely, every rung's weights count as present.
        #expect(seen["resolver.beforeRegister"] == "nil", "\(r.stdout)")
        #expect(seen["resolver.onDevice"] == "cloud weightsNotPresent local-qwen3-4b", "\(r.stdout)")
        #expect(seen["resolver.servedRemotely"] == "local local-qwen3-4b", "\(r.stdout)")
        #expect(seen["instances.localTier"] == "available available", "Extentos.create and Extentos.default as values: \(r.stdout)")
        // A device with no store yet: nothing to delete, no error, and nothing created.
        #expect(seen["delete.notInstalled"] == "false", "\(r.stdout)")
        #expect(seen["voice.delete"] == "ok" && seen["voice.installedAfterDelete"] == "false", "\(r.stdout)")
        #expect(!FileManager.default.fileExists(atPath: sb.store), "no call of the app created the store: \(sb.store)")
    }

    @Test("compiles unchanged and runs: the ladder without the voice, autoChoice before and after a download, unknownModel, the voice's download, folder and delete")
    func upstreamApp() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("fx", files: [("weights.bin", 200 * 1024), ("config.json", 512)])
        try w.addModel("voice", files: [("model.onnx", 120 * 1024), ("voices/af.bin", 4096)])
        let llm = try w.run(["catalog", "hash", w.nginx.mirror + "/fx", "--id", "fx-llm", "--base-url", w.nginx.baseURL("fx"),
                             "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(llm.status == 0, "\(llm)")
        let llmPath = w.root + "/catalogs/llm.json"
        try llm.stdout.write(toFile: llmPath, atomically: true, encoding: .utf8)
        let catalog = try w.mergedCatalog([llmPath, try Self.voiceCatalog(w, baseURL: w.nginx.baseURL("voice"))])

        let env = w.environment(["EXTENTOS_CATALOG": catalog, "EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"])
        let r = try Sandbox.runProcess(try Self.binary(), ["app", "fx-llm"], environment: env, ioDirectory: w.root + "/io",
                                       currentDirectory: w.cwd, timeout: 120)
        #expect(r.status == 0, "\(r)")
        let seen = Seen(r)
        let folder = w.store + "/voices/\(Self.voiceId)"

        #expect(seen.values["model"] == ["fx-llm 1000 false true \(200 * 1024 + 512)"], "models() is the ladder, never the voice: \(r.stdout)")
        #expect(seen["before.isLocal"] == "false" && seen["before.reason"] == "weightsNotPresent"
                && seen["before.downloadTarget"] == "fx-llm", "\(r.stdout)")
        #expect(seen["fit"]?.hasPrefix("fx-llm ") == true && seen["fit"]?.hasSuffix(" true true true") == true, "\(r.stdout)")
        #expect(seen["download.lastFraction"] == "1.0" && seen["download.again"] == "ok", "\(r.stdout)")
        #expect(seen["after.modelId"] == "fx-llm" && seen["after.reason"] == "local" && seen["after.installed"] == "true", "\(r.stdout)")
        #expect(seen["resolver.after.onDevice"] == "local fx-llm" && seen["resolver.after.servedRemotely"] == "local fx-llm", "\(r.stdout)")
        #expect(seen["unknown"] == "unknownModel no-such-model", "LocalTierError.unknownModel carries the id: \(r.stdout)")
        #expect(seen["voice.totalBytes"] == "\(120 * 1024 + 4096)", "\(r.stdout)")
        #expect(seen["voice.before.directory"] == folder && seen["voice.before.installed"] == "false",
                "the folder is known before the voice is installed: \(r.stdout)")
        #expect(seen["voice.download"] == "ok" && seen["voice.lastFraction"] == "1.0", "\(r.stdout)")
        #expect(seen["voice.after.directory"] == folder && seen["voice.after.installed"] == "true", "\(r.stdout)")
        #expect(seen["voice.deleted.directory"] == folder && seen["voice.deleted.installed"] == "false",
                "after delete the folder's address stays, the voice is gone: \(r.stdout)")
        #expect(!FileManager.default.fileExists(atPath: folder), "delete removed the files")
        #expect(seen["deleted.installed"] == "false" && seen["deleted.again"] == "false" && seen["deleted.unknown"] == "false", "\(r.stdout)")
        #expect(!r.stderr.contains("register"), "registered before create (three times, as values): no diagnostic\n\(r.stderr)")
    }

    @Test("KokoroVoiceModel.download throws upstream's DownloadError cases: httpStatus for a missing file, integrityMismatch for a wrong hash",
          arguments: ["httpStatus", "integrityMismatch"])
    func voiceDownloadErrors(_ expected: String) throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("voice", files: [("model.onnx", 120 * 1024), ("voices/af.bin", 4096)])
        var catalog: String
        if expected == "httpStatus" {
            catalog = try Self.voiceCatalog(w, baseURL: w.nginx.baseURL("no-such-folder"))
        } else {
            catalog = try Self.voiceCatalog(w, baseURL: w.nginx.baseURL("voice"))
            catalog = try Self.withWrongHash(catalog, file: "voices/af.bin", in: w)
        }
        let r = try Sandbox.runProcess(try Self.binary(), ["voice"], environment: w.environment(["EXTENTOS_CATALOG": catalog]),
                                       ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 120)
        #expect(r.status == 0, "\(r)")
        let seen = Seen(r)
        if expected == "httpStatus" {
            #expect(["httpStatus 404 model.onnx", "httpStatus 404 voices/af.bin"].contains(seen["voice.download"] ?? ""), "\(r.stdout)")
        } else {
            #expect(seen["voice.download"] == "integrityMismatch voices/af.bin", "\(r.stdout)")
        }
        #expect(seen["voice.after.installed"] == "false", "\(r.stdout)")
    }

    @Test("a bundle the app copies into modelDirectory is installed once its hashes check: isInstalled true, download fetches nothing, recorded and verifiable")
    func seededVoice() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, r) = try Self.runSeeding("voice", in: w)
        #expect(r.status == 0, "\(r)")
        let seen = Seen(r)
        let folder = w.store + "/voices/\(Self.voiceId)"
        #expect(seen["voice.before.directory"] == folder && seen["voice.before.installed"] == "false", "\(r.stdout)")
        #expect(seen["voice.seeded.installed"] == "true", "a seeded bundle counts, as upstream: \(r.stdout)")
        #expect(seen["voice.download"] == "ok" && seen["voice.lastFraction"] == "1.0", "\(r.stdout)")
        #expect(seen["voice.after.installed"] == "true", "\(r.stdout)")
        #expect(w.nginx.accessLog().isEmpty, "nothing was fetched: \(w.nginx.accessLog())")

        // Recorded as an install, where the app put it, and verifiable like any other.
        let status = try w.run(["voice", "status", "--json"], catalog: catalog)
        let doc = try status.jsonObject()
        #expect(doc["state"] as? String == "installed", "\(status)")
        #expect(doc["source"] as? String == "placed in \(folder)", "\(status)")
        #expect(doc["path"] as? String == folder, "\(status)")
        let verify = try w.run(["verify", Self.voiceId], catalog: catalog)
        #expect(verify.status == 0, "\(verify)")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
    }

    @Test("a download whose task is cancelled throws CancellationError and keeps its bytes; the next download goes on from them; the voice's too")
    func cancelledTask() throws {
        let w = try World(slowRate: 1024 * 1024); defer { w.remove() }
        let size = 2 * 1024 * 1024
        try w.addModel("big", files: [("weights.bin", size)])
        try w.addModel("voice", files: [("model.onnx", size), ("voices/af.bin", 4096)])
        let made = try w.run(["catalog", "hash", w.nginx.mirror + "/big", "--id", "big-llm", "--base-url", w.nginx.baseURL("big", slow: true),
                              "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(made.status == 0, "\(made)")
        let llm = w.root + "/catalogs/big.json"
        try made.stdout.write(toFile: llm, atomically: true, encoding: .utf8)
        let catalog = try w.mergedCatalog([llm, try Self.voiceCatalog(w, baseURL: w.nginx.baseURL("voice", slow: true))])

        let r = try Sandbox.runProcess(try Self.binary(), ["cancel", "big-llm"], environment: w.environment(["EXTENTOS_CATALOG": catalog]),
                                       ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 120)
        #expect(r.status == 0, "\(r)")
        let seen = Seen(r)
        #expect(seen["cancel"] == "CancellationError", "Swift's cancellation convention: \(r.stdout)")
        #expect(seen["cancel.installed"] == "false", "\(r.stdout)")
        #expect(seen["resume"] == "ok" && seen["resume.lastFraction"] == "1.0", "\(r.stdout)")
        let first = try #require(seen["resume.firstFraction"].flatMap(Double.init), "\(r.stdout)")
        #expect(first > 0 && first < 1, "the second download starts at what the cancelled one kept: \(r.stdout)")
        let requests = w.nginx.requests(for: "big/weights.bin")
        #expect(requests.count == 2 && (requests.last?.rangeStart ?? 0) > 0, "resumed with a Range, never from zero: \(requests)")
        // KokoroVoiceModel.download keeps the same convention.
        #expect(seen["voice.cancel"] == "CancellationError" && seen["voice.cancel.installed"] == "false", "\(r.stdout)")
        let kept = (try? FileManager.default.attributesOfItem(atPath: w.store + "/.partial/\(Self.voiceId)/model.onnx")[.size] as? NSNumber)?.intValue ?? 0
        #expect(kept > 0 && kept < size, "the cancelled voice download kept its bytes: \(kept)")
    }

    @Test("the start-up questions about a seeded voice read and stat only: isInstalled true as upstream (every file there, right sizes), nothing hashed, recorded or created until verify adopts it")
    func seededVoiceQueriesWriteNothing() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, r) = try Self.runSeeding("seed", in: w)
        #expect(r.status == 0, "\(r)")
        let seen = Seen(r)
        let folder = w.store + "/voices/\(Self.voiceId)"
        #expect(seen["voice.seeded.directory"] == folder && seen["voice.seeded.installed"] == "true",
                "as upstream documents it: every bundle file present with its size: \(r.stdout)")
        #expect(seen["fit"] == "\(Self.voiceId) 0 true true true", "nothing left to fetch: \(r.stdout)")
        // Only what the app itself copied is in the store: no records, locks or history.
        let entries = try FileManager.default.contentsOfDirectory(atPath: w.store)
        #expect(entries == ["voices"], "the queries wrote nothing: \(entries)")

        // The command's queries neither: the voice is placed, not installed, until verify.
        let status = try w.run(["voice", "status", "--json"], catalog: catalog)
        let doc = try status.jsonObject()
        #expect(doc["state"] as? String == "notInstalled" && doc["placedBundle"] as? Bool == true, "\(status)")
        let list = try w.run(["list", "--json"], catalog: catalog)
        let listed = try #require((try list.jsonObject()["models"] as? [[String: Any]])?.first, "\(list)")
        #expect(listed["isInstalled"] as? Bool == false && listed["placedBundle"] as? Bool == true, "\(list)")
        let info = try w.run(["info", Self.voiceId, "--json"], catalog: catalog)
        #expect(try info.jsonObject()["placedBundle"] as? Bool == true, "\(info)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: w.store) == ["voices"], "voice status, list and info wrote nothing")

        // verify (every installed model, and bundles placed) checks the hashes and installs it.
        let verify = try w.run(["verify"], catalog: catalog)
        #expect(verify.status == 0 && verify.stdout.contains(Self.voiceId), "\(verify)")
        let after = try w.run(["voice", "status", "--json"], catalog: catalog).jsonObject()
        #expect(after["state"] as? String == "installed" && after["source"] as? String == "placed in \(folder)", "\(after)")
        #expect(w.nginx.accessLog().isEmpty, "nothing was fetched: \(w.nginx.accessLog())")
    }

    /// Runs the app in `mode` (`voice` or `seed`), seeding modelDirectory from the mirror's
    /// copy of a small voice, with a catalog whose source has none of its files: any fetch
    /// would fail. Returns the catalog and what the app did.
    static func runSeeding(_ mode: String, in w: World) throws -> (catalog: String, result: CLIResult) {
        try w.addModel("voice", files: [("model.onnx", 120 * 1024), ("voices/af.bin", 4096)])
        let catalog = try voiceCatalog(w, baseURL: w.nginx.baseURL("no-such-folder"), hashedFrom: "voice")
        let r = try Sandbox.runProcess(try binary(), [mode, w.nginx.mirror + "/voice"],
                                       environment: w.environment(["EXTENTOS_CATALOG": catalog]),
                                       ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 120)
        return (catalog, r)
    }

    /// A catalog of the voice over `<mirror>/<hashedFrom>`, fetched from `baseURL`.
    static func voiceCatalog(_ w: World, baseURL: String, hashedFrom folder: String = "voice") throws -> String {
        let r = try w.run(["catalog", "hash", w.nginx.mirror + "/" + folder, "--id", voiceId, "--kind", "voice",
                           "--base-url", baseURL, "--required-mb", "600"], catalog: nil)
        try #require(r.status == 0, "\(r)")
        let path = w.root + "/catalogs/voice-\(UUID().uuidString.prefix(8)).json"
        try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The catalog with `file`'s SHA-256 replaced by one its bytes do not have.
    static func withWrongHash(_ catalog: String, file: String, in w: World) throws -> String {
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalog))) as? [String: Any])
        var models = try #require(doc["models"] as? [[String: Any]])
        var files = try #require(models.first?["files"] as? [[String: Any]])
        let index = try #require(files.firstIndex { $0["path"] as? String == file })
        files[index]["sha256"] = String(repeating: "0", count: 64)
        models[0]["files"] = files
        doc["models"] = models
        let path = w.root + "/catalogs/wrong-hash-\(UUID().uuidString.prefix(8)).json"
        try JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }
}
