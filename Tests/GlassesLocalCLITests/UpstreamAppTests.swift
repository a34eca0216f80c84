import Foundation
import GlassesTestSupport
import Testing

/// Source compatibility with the upstream SDK: Tests/Fixtures/upstream-app is an app
/// written against swift-glasses 2.5's public API (every ExtentosLocalTier,
/// KokoroVoiceModel and ExtentosLocalVoice member the reference documents, and a switch
/// over CloudFallbackReason's four upstream cases with a default). The build compiling it
/// is half the test; here it runs against a temporary store and a real nginx.
@Suite("An app written against the upstream SDK", .ownThreads)
struct UpstreamAppTests {
    @Test("compiles unchanged and runs: the ladder without the voice, autoChoice before and after a download, unknownModel, the voice's download, folder and delete")
    func upstreamApp() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("fx", files: [("weights.bin", 200 * 1024), ("config.json", 512)])
        try w.addModel("voice", files: [("model.onnx", 120 * 1024), ("voices/af.bin", 4096)])
        let llm = try w.run(["catalog", "hash", w.nginx.mirror + "/fx", "--id", "fx-llm", "--base-url", w.nginx.baseURL("fx"),
                             "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(llm.status == 0, "\(llm)")
        let voice = try w.run(["catalog", "hash", w.nginx.mirror + "/voice", "--id", "kokoro-en-v0_19", "--kind", "voice",
                               "--base-url", w.nginx.baseURL("voice"), "--required-mb", "600"], catalog: nil)
        try #require(voice.status == 0, "\(voice)")
        let llmPath = w.root + "/catalogs/llm.json"
        let voicePath = w.root + "/catalogs/voice.json"
        try llm.stdout.write(toFile: llmPath, atomically: true, encoding: .utf8)
        try voice.stdout.write(toFile: voicePath, atomically: true, encoding: .utf8)
        let catalog = try w.mergedCatalog([llmPath, voicePath])

        let binary = try #require(BuiltProduct.path("upstream-app"), "upstream-app was not built")
        let env = w.environment(["EXTENTOS_CATALOG": catalog, "EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"])
        let r = try Sandbox.runProcess(binary, ["fx-llm"], environment: env, ioDirectory: w.root + "/io", currentDirectory: w.cwd,
                                       timeout: 120)
        #expect(r.status == 0, "\(r)")
        var seen: [String: [String]] = [:]
        for line in r.stdoutLines {
            guard let eq = line.firstIndex(of: "=") else { continue }
            seen[String(line[..<eq]), default: []].append(String(line[line.index(after: eq)...]))
        }
        func value(_ key: String) -> String? { seen[key]?.last }

        #expect(seen["model"] == ["fx-llm 1000 false true \(200 * 1024 + 512)"], "models() is the ladder, never the voice: \(r.stdout)")
        #expect(value("before.isLocal") == "false" && value("before.reason") == "weightsNotPresent"
                && value("before.downloadTarget") == "fx-llm", "\(r.stdout)")
        #expect(value("fit")?.hasPrefix("fx-llm ") == true && value("fit")?.hasSuffix(" true true") == true, "\(r.stdout)")
        #expect(value("download.lastFraction") == "1.0" && value("download.again") == "ok", "\(r.stdout)")
        #expect(value("after.modelId") == "fx-llm" && value("after.reason") == "local" && value("after.installed") == "true", "\(r.stdout)")
        #expect(value("unknown") == "no-such-model", "LocalTierError.unknownModel carries the id: \(r.stdout)")
        #expect(value("voice.totalBytes") == "\(120 * 1024 + 4096)", "\(r.stdout)")
        #expect(value("voice.installedBefore") == "false" && value("voice.installedAfter") == "true", "\(r.stdout)")
        #expect(value("voice.directory") == w.store + "/voices/kokoro-en-v0_19", "\(r.stdout)")
        #expect(value("voice.installedAfterDelete") == "false" && value("voice.directoryAfterDelete") == "nil", "\(r.stdout)")
        #expect(value("deleted.installed") == "false" && value("deleted.again") == "false", "\(r.stdout)")
        #expect(!r.stderr.contains("registered after"), "registered before create: no ordering diagnostic\n\(r.stderr)")
    }
}
