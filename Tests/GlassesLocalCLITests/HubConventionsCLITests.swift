import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The Hub client's conventions through the command (docs/models.md):
/// HF_ENDPOINT against the fault server on 127.0.0.1 standing in for a Hub mirror (its log
/// shows each request's Authorization), with a second one as the https proxy, so any request
/// meant for huggingface.co itself would be counted there; an expired login, an unusable
/// token file, TRANSFORMERS_OFFLINE and the client's path expansion.
@Suite("Where models come from: the Hub client's conventions (the command)", .ownThreads, .networkGuard)
struct HubConventionsCLITests {
    static let token = "hf_EndpointCLI_secret"

    /// A model whose source is on https://huggingface.co, served by `endpoint` under the same
    /// path (answering 401 without `Bearer <token>`), and its catalog asking for the token.
    static func hubModel(_ w: World, _ endpoint: FaultControl, id: String, files: [(String, Int)]) throws -> String {
        let folder = "o/\(id)/resolve/main"
        try w.addModel(folder, files: files)
        for (name, _) in files {
            try endpoint.configure(["path": "/\(folder)/\(name)", "file": w.nginx.mirror + "/\(folder)/\(name)", "auth": "Bearer \(token)"])
        }
        return try withHuggingFaceAuth(try w.filesCatalog(folder, id: id, baseURL: "https://huggingface.co/\(folder)/"))
    }

    @Test("HF_ENDPOINT: download and verify --repair fetch from the endpoint, which alone gets the token; nothing goes toward huggingface.co (the proxy sees no connection, unlike without HF_ENDPOINT); doctor shows it; --mirror wins")
    func endpoint() throws {
        let w = try World(); defer { w.remove() }
        let endpoint = try FaultControl(); defer { endpoint.stop() }
        let internet = try FaultControl(); defer { internet.stop() }
        let catalog = try Self.hubModel(w, endpoint, id: "ep", files: [("model.bin", 6000), ("config.json", 300)])
        let env = ["HF_ENDPOINT": endpoint.origin + "/", "HF_TOKEN": Self.token, "https_proxy": internet.origin, "EXTENTOS_NO_HF_CACHE": "1"]
        let paths = ["/o/ep/resolve/main/model.bin", "/o/ep/resolve/main/config.json"]
        let internetBefore = try internet.connections()

        let download = try w.run(["download", "ep"], catalog: catalog, env: env)
        #expect(download.status == 0, "\(download)")
        for path in paths {
            #expect(try endpoint.authorizations(path) == ["Bearer \(Self.token)"], "\(path): the endpoint got the token, once")
        }
        // A damaged file is fetched again from the endpoint, with the token.
        try Data(repeating: 0x41, count: 6000).write(to: URL(fileURLWithPath: w.installFolder("ep") + "/model.bin"))
        let repair = try w.run(["verify", "ep", "--repair"], catalog: catalog, env: env)
        #expect(repair.status == 0 && repair.stdout.contains("re-fetched"), "\(repair)")
        #expect(try endpoint.authorizations(paths[0]) == ["Bearer \(Self.token)", "Bearer \(Self.token)"])
        #expect(try internet.connections() == internetBefore + 1, "a request went toward huggingface.co")

        let doctor = try w.run(["doctor", "--json"], catalog: catalog, env: env)
        let hub = try #require(try doctor.jsonObject()["hubEndpoint"] as? [String: Any], "\(doctor)")
        #expect(hub["url"] as? String == endpoint.origin && hub["from"] as? String == "HF_ENDPOINT", "\(hub)")
        let text = try w.run(["doctor"], catalog: catalog, env: env)
        #expect(text.stdout.contains("ok   hub endpoint: \(endpoint.origin) (HF_ENDPOINT)"), "\(text)")
        let mirrored = try w.run(["--mirror", "http://127.0.0.1:9", "doctor"], catalog: catalog, env: env)
        #expect(mirrored.stdout.contains("hub endpoint: http://127.0.0.1:9 (--mirror replaces every source's origin; HF_ENDPOINT is not used)"), "\(mirrored)")

        // --mirror wins: the mirror (nginx, plain files) serves; the endpoint sees nothing new.
        #expect(try w.run(["delete", "ep"], catalog: catalog).status == 0)
        let endpointBefore = try endpoint.connections()
        let viaMirror = try w.run(["--mirror", w.nginx.origin, "download", "ep"], catalog: catalog, env: env)
        #expect(viaMirror.status == 0, "\(viaMirror)")
        #expect(try endpoint.connections() == endpointBefore + 1, "the endpoint was used despite --mirror")

        // The sentinel works: without HF_ENDPOINT the same download heads for huggingface.co
        // through the proxy, which refuses it.
        #expect(try w.run(["delete", "ep"], catalog: catalog).status == 0)
        let before = try internet.connections()
        var direct = env
        direct["HF_ENDPOINT"] = nil
        let toHub = try w.run(["download", "ep", "--retries", "0"], catalog: catalog, env: direct)
        #expect(toHub.status != 0, "\(toHub)")
        #expect(try internet.connections() > before + 1, "without HF_ENDPOINT the request goes toward huggingface.co")
    }

    @Test("prefetch fetches its target through HF_ENDPOINT too, the token going to the endpoint")
    func prefetchThroughEndpoint() throws {
        let w = try World(); defer { w.remove() }
        let endpoint = try FaultControl(); defer { endpoint.stop() }
        let folder = "o/pf/resolve/main"
        try w.addModel(folder, files: [("weights.bin", 20_000)])
        try endpoint.configure(["path": "/\(folder)/weights.bin", "file": w.nginx.mirror + "/\(folder)/weights.bin", "auth": "Bearer \(Self.token)"])
        let hashed = try w.run(["catalog", "hash", w.nginx.mirror + "/" + folder, "--id", "pf", "--base-url", "https://huggingface.co/\(folder)/",
                                "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(hashed.status == 0, "\(hashed)")
        let plain = w.root + "/catalogs/pf.json"
        try hashed.stdout.write(toFile: plain, atomically: true, encoding: .utf8)
        let catalog = try withHuggingFaceAuth(plain)
        let r = try w.run(["prefetch"], catalog: catalog, env: PrefetchTests.device.merging(
            ["HF_ENDPOINT": endpoint.origin, "HF_TOKEN": Self.token, "EXTENTOS_NO_HF_CACHE": "1",
             "https_proxy": endpoint.origin]) { $1 })   // anything meant for huggingface.co goes nowhere
        #expect(r.status == 0, "\(r)")
        #expect(try w.isInstalled("pf", catalog: catalog), "\(r)")
        #expect(try endpoint.authorizations("/\(folder)/weights.bin") == ["Bearer \(Self.token)"])
    }

    @Test("an HF_ENDPOINT that cannot be used (plain http off loopback, not a URL): download fails with code invalidSetting naming it, before any connection; doctor fails its check; list still works")
    func invalidEndpoint() throws {
        let w = try World(); defer { w.remove() }
        let endpoint = try FaultControl(); defer { endpoint.stop() }
        let catalog = try Self.hubModel(w, endpoint, id: "bad", files: [("model.bin", 1000)])
        for value in ["http://hf-mirror.example", "hf-mirror.com"] {
            let env = ["HF_ENDPOINT": value, "https_proxy": endpoint.origin]
            let before = try endpoint.connections()
            let r = try w.run(["download", "bad", "--json"], catalog: catalog, env: env)
            #expect(r.status == 1 && r.stdout.contains(#""code":"invalidSetting""#), "\(r)")
            #expect(r.stderr.contains("HF_ENDPOINT=\(value) cannot be used") && r.stderr.contains("unset it"), "\(r)")
            #expect(try endpoint.connections() == before + 1, "a connection was made")
            let doctor = try w.run(["doctor"], catalog: catalog, env: env)
            #expect(doctor.status == 1 && doctor.stdout.contains("FAIL hub endpoint: HF_ENDPOINT=\(value) cannot be used"), "\(doctor)")
            #expect(try w.run(["list"], catalog: catalog, env: env).status == 0)
        }
    }

    @Test("doctor warns of an expired Hugging Face login (stored_tokens beside the token file, expires_at passed; the clock set with faketime), in text and JSON, without failing; not before, not with HF_TOKEN set")
    func expiredLogin() throws {
        let w = try World(); defer { w.remove() }
        let secret = "hf_oauth_cli_access"
        let tokenFile = try w.sandbox.write("home/.cache/huggingface/token", secret + "\n")
        let stored = try w.sandbox.write("home/.cache/huggingface/stored_tokens",
                                         "[work]\nhf_token = hf_other\n\n[laptop]\nhf_token = \(secret)\nrefresh_token = hf_refresh\nexpires_at = 1800000000\n\n")
        chmod(tokenFile, 0o600)
        chmod(stored, 0o600)
        let warning = "warning: the Hugging Face login (laptop) expired at 2027-01-15T08:00:00Z: run 'hf auth login' to renew it (public models still download without it)"

        let after = try w.run(["doctor"], catalog: nil, clockAhead: "@2027-01-16 00:00:00")
        #expect(after.status == 0 && after.stdout.contains(warning), "\(after)")
        let json = try w.run(["doctor", "--json"], catalog: nil, clockAhead: "@2027-01-16 00:00:00")
        let credentials = try #require(try json.jsonObject()["credentials"] as? [String: Any], "\(json)")
        let login = try #require(credentials["expiredLogin"] as? [String: Any], "\(credentials)")
        #expect(login["name"] as? String == "laptop" && login["expiresAt"] as? Int == 1_800_000_000
                && login["expiredAt"] as? String == "2027-01-15T08:00:00Z", "\(login)")
        #expect((credentials["warnings"] as? [String])?.count == 1)
        for r in [after, json] { #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret)) }

        let before = try w.run(["doctor"], catalog: nil, clockAhead: "@2027-01-14 00:00:00")
        #expect(before.status == 0 && !before.stdout.contains("expired at"), "\(before)")
        let variable = try w.run(["doctor"], catalog: nil, env: ["HF_TOKEN": "hf_from_variable"], clockAhead: "@2027-01-16 00:00:00")
        #expect(variable.status == 0 && !variable.stdout.contains("expired at"), "$HF_TOKEN makes the stored logins irrelevant: \(variable)")
    }

    @Test("a token file that is a FIFO: download fails at once (exit 77, code tokenUnusable) naming it, and requests nothing; doctor fails its credentials check naming it; a token with a control character is refused the same way")
    func unusableToken() throws {
        let w = try World(); defer { w.remove() }
        let server = try FaultControl(); defer { server.stop() }
        try w.addModel("tf", files: [("model.bin", 2000)])
        try server.configure(["path": "/m/model.bin", "file": w.nginx.mirror + "/tf/model.bin", "auth": "Bearer hf_right"])
        let catalog = try withHuggingFaceAuth(try w.filesCatalog("tf", id: "tf", baseURL: server.origin + "/m/"))
        let fifo = w.root + "/token-fifo"
        try #require(mkfifo(fifo, 0o600) == 0)

        var before = try server.connections()
        let r = try w.run(["download", "tf", "--json"], catalog: catalog, env: ["HF_TOKEN_PATH": fifo])
        #expect(r.status == 77 && r.stdout.contains(#""code":"tokenUnusable""#), "\(r)")
        #expect(r.stderr.contains("HF_TOKEN_PATH names \(fifo)") && r.stderr.contains("FIFO") && r.stderr.contains("Remove \(fifo)"), "\(r)")
        #expect(try server.connections() == before + 1, "a request was made")
        let doctor = try w.run(["doctor"], catalog: catalog, env: ["HF_TOKEN_PATH": fifo])
        #expect(doctor.status == 1 && doctor.stdout.contains("FAIL credentials") && doctor.stdout.contains(fifo) && doctor.stdout.contains("FIFO"), "\(doctor)")

        before = try server.connections()
        let escape = try w.run(["download", "tf"], catalog: catalog, env: ["HF_TOKEN": "hf_right\u{1B}[2J"])
        #expect(escape.status == 77 && escape.stderr.contains("$HF_TOKEN") && escape.stderr.contains("0x1B"), "\(escape)")
        #expect(!escape.stderr.contains("hf_right"), "the token shows: \(escape)")
        #expect(try server.connections() == before + 1)

        // The FIFO does not matter once $HF_TOKEN holds the token.
        let fine = try w.run(["download", "tf"], catalog: catalog, env: ["HF_TOKEN_PATH": fifo, "HF_TOKEN": "hf_right"])
        #expect(fine.status == 0, "\(fine)")
    }

    @Test("TRANSFORMERS_OFFLINE=1 is offline (code offline naming it, no connection; doctor says so); with HF_HUB_OFFLINE=0 beside it the Hub client is online, and so is this")
    func transformersOffline() throws {
        let w = try World(); defer { w.remove() }
        let server = try FaultControl(); defer { server.stop() }
        try w.addModel("to", files: [("model.bin", 2000)])
        try server.configure(["path": "/m/model.bin", "file": w.nginx.mirror + "/to/model.bin"])
        let catalog = try w.filesCatalog("to", id: "to", baseURL: server.origin + "/m/")
        let before = try server.connections()
        let off = try w.run(["download", "to", "--json"], catalog: catalog, env: ["TRANSFORMERS_OFFLINE": "1"])
        #expect(off.status == 1 && off.stdout.contains(#""code":"offline""#) && off.stderr.contains("TRANSFORMERS_OFFLINE"), "\(off)")
        let doctor = try w.run(["doctor"], catalog: catalog, env: ["TRANSFORMERS_OFFLINE": "1"])
        #expect(doctor.stdout.contains("network: offline (TRANSFORMERS_OFFLINE=1)"), "\(doctor)")
        #expect(try server.connections() == before + 1)
        let on = try w.run(["download", "to"], catalog: catalog, env: ["TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "0"])
        #expect(on.status == 0, "\(on)")
    }

    @Test("paths expand as the Hub client expands them: HF_TOKEN_PATH=~/…, HF_HOME=$VAR/…, HF_HUB_CACHE=${HOME}/… (import finds the cache there)")
    func expansion() throws {
        let w = try World(); defer { w.remove() }
        let tokenFile = try w.sandbox.write("home/tokens/hf", "hf_tilde\n")
        chmod(tokenFile, 0o600)
        let tilde = try w.run(["doctor"], catalog: nil, env: ["HF_TOKEN_PATH": "~/tokens/hf"])
        #expect(tilde.stdout.contains("Hugging Face token: \(tokenFile) (named by HF_TOKEN_PATH)"), "\(tilde)")
        let homeFile = try w.sandbox.write("elsewhere/hf/token", "hf_var\n")
        chmod(homeFile, 0o600)
        let variable = try w.run(["doctor"], catalog: nil, env: ["HF_HOME": "${SANDBOX_BASE}/hf", "SANDBOX_BASE": w.root + "/elsewhere"])
        #expect(variable.stdout.contains("Hugging Face token: \(homeFile) (named by HF_HOME)"), "\(variable)")

        let (catalog, hub, _) = try ImportTests.hubWorld(w)
        try FileManager.default.moveItem(atPath: hub, toPath: w.root + "/home/moved-hub")
        // A store of its own: the one above has used the built-in catalog, newer than this test catalog.
        w.store = w.root + "/import-store"
        let imported = try w.run(["import", "hubm"], catalog: catalog, env: ["HF_HUB_CACHE": "${HOME}/moved-hub"])
        #expect(imported.status == 0, "\(imported)")
    }
}
