import Foundation
import GlassesTestSupport
import Testing

/// A proxy that refuses the tunnel (403) answers the same every time: the download fails at
/// once, naming the proxy's refusal, instead of retrying it as a network fault (a prefetch
/// from cron would otherwise ask it thousands of times).
@Suite("A proxy that refuses the tunnel", .ownThreads, .networkGuard)
struct ProxyRefusalTests {
    @Test("CONNECT answered 403: exit 1, code refused, one attempt per file, the message names the proxy's refusal")
    func refusedTunnelIsFinal() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("px", files: [("weights.bin", 4096)])
        let catalog = try w.filesCatalog("px", id: "px", baseURL: "https://models.example.invalid/px/")
        // A proxy of this test's own that refuses every tunnel and logs each attempt.
        let logDir = w.root + "/proxy-log"
        try FileManager.default.createDirectory(atPath: logDir, withIntermediateDirectories: true)
        let proxy = try PortServer(python: PackageRoot.path() + "/Tests/Tools/netguard.py", [logDir])
        defer { proxy.stop() }
        let r = try w.run(["download", "px", "--json", "--retries", "3", "--retry-delay", "0"], catalog: catalog,
                          env: ["https_proxy": "http://127.0.0.1:\(proxy.port)"], timeout: 60)
        #expect(r.status == 1 && r.stdout.contains("\"code\":\"refused\""), "\(r)")
        #expect(r.stderr.contains("the proxy refused to connect to https://models.example.invalid:443 (HTTP 403)"), "\(r)")
        let attempts = ((try? String(contentsOfFile: logDir + "/attempts.jsonl", encoding: .utf8)) ?? "")
            .split(separator: "\n").filter { $0.contains("models.example.invalid") }
        #expect(attempts.count == 1, "asked once, not retried: \(attempts.count) attempts")
    }
}
