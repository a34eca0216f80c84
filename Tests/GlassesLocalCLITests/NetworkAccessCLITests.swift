import Foundation
import GlassesTestSupport
import Testing

/// Tests/Tools/faultserver.py for the command-line tests: configured over its control
/// endpoints with a small Python client (the same way HostileServerNumberTests does).
struct FaultControl {
    static let script = PackageRoot.path() + "/Tests/Tools/faultserver.py"
    let server: PortServer
    var origin: String { "http://127.0.0.1:\(server.port)" }

    init() throws { server = try PortServer(python: Self.script) }
    func stop() { server.stop() }

    /// POSTs `spec` to /_fault (keys of faultserver.py).
    func configure(_ spec: [String: Any]) throws {
        let body = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        let r = try World.tool("/usr/bin/env", ["python3", "-c", """
            import sys, urllib.request
            r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"))
            sys.exit(0 if r.status == 200 else 1)
            """, origin + "/_fault", body])
        try #require(r.status == 0, "configuring the fault server: \(r)")
    }

    /// GET of a control endpoint, as JSON.
    func get(_ path: String) throws -> [String: Any] {
        let r = try World.tool("/usr/bin/env", ["python3", "-c", """
            import sys, urllib.request
            sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())
            """, origin + path])
        try #require(r.status == 0, "\(r)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    /// TCP connections accepted so far, this question's included.
    func connections() throws -> Int { try #require(try get("/_connections")["connections"] as? Int) }

    /// The `Authorization` headers `path` received, in order (nil: none).
    func authorizations(_ path: String) throws -> [String?] {
        let stats = try get("/_stats")
        let log = ((stats[path] as? [String: Any])?["log"] as? [[String: Any]]) ?? []
        return log.map { $0["authorization"] as? String }
    }
}

/// A copy of `catalog` whose sources carry `"auth": "huggingface"`.
func withHuggingFaceAuth(_ catalog: String) throws -> String {
    var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: catalog))) as? [String: Any])
    var models = try #require(doc["models"] as? [[String: Any]])
    for m in models.indices {
        models[m]["sources"] = (models[m]["sources"] as? [[String: Any]] ?? []).map { $0.merging(["auth": "huggingface"]) { $1 } }
    }
    doc["models"] = models
    let path = catalog + ".auth.json"
    try JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
    return path
}

/// Every file under `folder`, as one string (looking for a secret in the store's bytes).
func allBytes(under folder: String) -> String {
    var out = Data()
    for case let name as String in FileManager.default.enumerator(atPath: folder) ?? NSEnumerator() {
        if let data = FileManager.default.contents(atPath: folder + "/" + name) { out += data }
    }
    return String(decoding: out, as: UTF8.self)
}

@Suite("Where models come from: credentials, offline, metered (the command)", .ownThreads, .networkGuard)
struct NetworkAccessCLITests {
    @Test("401 from a Hugging Face source: exit 77, code authRequired naming HF_TOKEN; a refused token never shows in output, JSON, history or records; the right one installs")
    func authRequired() throws {
        let w = try World(); defer { w.remove() }
        let server = try FaultControl(); defer { server.stop() }
        try w.addModel("gated", files: [("model.bin", 5000)])
        try server.configure(["path": "/m/model.bin", "file": w.nginx.mirror + "/gated/model.bin", "auth": "Bearer hf_right"])
        let catalog = try withHuggingFaceAuth(try w.filesCatalog("gated", id: "gated", baseURL: server.origin + "/m/"))

        let none = try w.run(["download", "gated", "--json"], catalog: catalog)
        #expect(none.status == 77, "\(none)")
        let event = try #require(none.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "error" }, "\(none)")
        #expect(event["code"] as? String == "authRequired" && event["exitCode"] as? Int == 77, "\(event)")
        #expect(((event["message"] as? String) ?? "").contains("HF_TOKEN"), "\(event)")

        let secret = "hf_WrongButSecret42"
        let wrong = try w.run(["download", "gated", "--json"], catalog: catalog, env: ["HF_TOKEN": secret])
        #expect(wrong.status == 77 && wrong.stderr.contains("$HF_TOKEN") && wrong.stderr.contains("refused"), "\(wrong)")
        let history = try w.run(["history", "--json"], catalog: catalog, env: ["HF_TOKEN": secret])
        let doctor = try w.run(["doctor", "--json"], catalog: catalog, env: ["HF_TOKEN": secret])
        for r in [wrong, history, doctor] {
            #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret), "the token shows in `\(r.arguments.joined(separator: " "))`")
        }
        #expect(!allBytes(under: w.store).contains(secret), "the token is in the store's files (records, history)")
        // The refused token is tried once; the file is then asked for once without it (an
        // expired login must not break a public model), and the second 401 is final.
        #expect(try server.authorizations("/m/model.bin") == [nil, "Bearer \(secret)", nil], "what reached the server")

        let right = try w.run(["download", "gated"], catalog: catalog, env: ["HF_TOKEN": "hf_right"])
        #expect(right.status == 0, "\(right)")
    }

    @Test("netrc works for a --mirror ($NETRC, else ~/.netrc); without it the mirror's 401 is authRequired naming netrc")
    func netrcForMirror() throws {
        let w = try World(); defer { w.remove() }
        let mirror = try FaultControl(); defer { mirror.stop() }
        try w.addModel("mir", files: [("weights.bin", 7000), ("config.json", 300)])
        let basic = "Basic " + Data("alice:s3cret-pw".utf8).base64EncodedString()
        for name in ["weights.bin", "config.json"] {
            try mirror.configure(["path": "/mir/\(name)", "file": w.nginx.mirror + "/mir/\(name)", "auth": basic])
        }
        // The catalog's origin is never contacted: the mirror replaces it.
        let catalog = try w.filesCatalog("mir", id: "mir", baseURL: "https://models.example.invalid/mir/")

        let without = try w.run(["--mirror", mirror.origin, "download", "mir"], catalog: catalog)
        #expect(without.status == 77 && without.stderr.contains("netrc") && without.stderr.contains("machine 127.0.0.1"), "\(without)")

        let netrc = try w.sandbox.write("netrc", "machine 127.0.0.1\n  login alice\n  password s3cret-pw\n")
        chmod(netrc, 0o600)
        let named = try w.run(["--mirror", mirror.origin, "download", "mir"], catalog: catalog, env: ["NETRC": netrc])
        #expect(named.status == 0, "\(named)")
        #expect(try mirror.authorizations("/mir/weights.bin").last == basic)
        #expect(!named.stdout.contains("s3cret") && !named.stderr.contains("s3cret"))

        #expect(try w.run(["delete", "mir"], catalog: catalog).status == 0)
        try FileManager.default.copyItem(atPath: netrc, toPath: w.root + "/home/.netrc")
        let home = try w.run(["--mirror", mirror.origin, "download", "mir"], catalog: catalog)
        #expect(home.status == 0, "~/.netrc: \(home)")
        #expect(!allBytes(under: w.store).contains("s3cret-pw"))
    }

    @Test("offline (--offline, EXTENTOS_OFFLINE=1, HF_HUB_OFFLINE=1): download and catalog update fail with code offline, prefetch exits 0, the server sees no connection; list, info, doctor work")
    func offline() throws {
        let w = try World(); defer { w.remove() }
        let server = try FaultControl(); defer { server.stop() }
        try w.addModel("off", files: [("model.bin", 5000)])
        try server.configure(["path": "/m/model.bin", "file": w.nginx.mirror + "/off/model.bin"])
        let catalog = try w.filesCatalog("off", id: "off", baseURL: server.origin + "/m/")
        let ways: [(flags: [String], env: [String: String])] = [(["--offline"], [:]), ([], ["EXTENTOS_OFFLINE": "1"]), ([], ["HF_HUB_OFFLINE": "1"])]
        for way in ways {
            let before = try server.connections()
            let download = try w.run(way.flags + ["download", "off", "--json"], catalog: catalog, env: way.env)
            #expect(download.status == 1 && download.stdout.contains(#""code":"offline""#), "\(download)")
            let update = try w.run(way.flags + ["catalog", "update", "--from", server.origin + "/catalog.json", "--json"], catalog: catalog, env: way.env)
            #expect(update.status == 1 && update.stdout.contains(#""code":"offline""#), "\(update)")
            let prefetch = try w.run(way.flags + ["prefetch"], catalog: catalog,
                                     env: way.env.merging(["EXTENTOS_CATALOG_URL": server.origin + "/catalog.json"]) { $1 })
            #expect(prefetch.status == 0 && prefetch.stdout.contains("offline ("), "\(prefetch)")
            for query in [["list"], ["info", "off"], ["fit", "off"]] {
                let r = try w.run(way.flags + query, catalog: catalog, env: way.env)
                #expect(r.status == 0, "\(r)")
            }
            let doctor = try w.run(way.flags + ["doctor"], catalog: catalog, env: way.env)
            #expect(doctor.stdout.contains("network: offline"), "\(doctor)")
            #expect(try server.connections() == before + 1, "\(way): the server saw a connection besides the test's own question")
        }
        // Online again, the same download works: the switch was all that stopped it.
        #expect(try w.run(["download", "off"], catalog: catalog).status == 0)
        #expect(try w.run(["--offline", "verify", "off"], catalog: catalog).status == 0)
    }

    @Test("prefetch --require-unmetered: EXTENTOS_METERED=yes stops before any network use, =no goes on; without NetworkManager (no system bus) the state is unknown, said, and treated as unmetered")
    func metered() throws {
        let w = try World(); defer { w.remove() }
        let server = try FaultControl(); defer { server.stop() }
        try w.addModel("m", files: [("a.bin", 100)])
        let catalog = try w.filesCatalog("m", id: "m", baseURL: server.origin + "/m/")
        let env = ["EXTENTOS_CATALOG_URL": server.origin + "/catalog.json", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(w.root)/no-bus"]

        var before = try server.connections()
        let metered = try w.run(["prefetch", "--require-unmetered"], catalog: catalog, env: env.merging(["EXTENTOS_METERED": "yes"]) { $1 })
        #expect(metered.status == 0 && metered.stdout.contains("metered (EXTENTOS_METERED=yes)"), "\(metered)")
        #expect(try server.connections() == before + 1, "a metered connection is not used at all")

        before = try server.connections()
        let free = try w.run(["prefetch", "--require-unmetered"], catalog: catalog, env: env.merging(["EXTENTOS_METERED": "no"]) { $1 })
        #expect(free.status == 0 && !free.stdout.contains("metered"), "\(free)")
        #expect(try server.connections() > before + 1, "unmetered: the run went on to the network (the catalog update)")

        before = try server.connections()
        let unknown = try w.run(["prefetch", "--require-unmetered", "--json"], catalog: catalog, env: env)
        #expect(unknown.status == 0, "\(unknown)")
        let event = unknown.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "metered-unknown" }
        let reason: String = (event?["reason"] as? String) ?? ""
        #expect(reason.contains("no system bus at unix:path=\(w.root)/no-bus"), "\(unknown)")
        #expect(try server.connections() > before + 1, "unknown counts as unmetered: the run went on")

        let odd = try w.run(["prefetch", "--require-unmetered", "--dry-run"], catalog: catalog, env: env.merging(["EXTENTOS_METERED": "maybe"]) { $1 })
        #expect(odd.status == 0 && odd.stderr.contains("EXTENTOS_METERED='maybe' is neither yes nor no"), "\(odd)")
    }

    @Test("prefetch --require-unmetered asks NetworkManager on the system bus (Tests/Tools/fakebus.py): yes and guess-yes stop, no and guess-no go on, unknown and a NetworkManager that is not running (never started by the question) go on, saying so")
    func meteredFromNetworkManager() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("m", files: [("a.bin", 100)])
        let catalog = try w.filesCatalog("m", id: "m", baseURL: "http://127.0.0.1:9/m/")
        let cases: [(value: String, stops: Bool, text: String)] = [
            ("1", true, "metered (NetworkManager: yes)"), ("3", true, "metered (NetworkManager: guess-yes)"),
            ("2", false, "nothing to fetch"), ("4", false, "nothing to fetch"),
            ("0", false, "unknown (NetworkManager: unknown)"),
            ("absent", false, "unknown (NetworkManager is not running on the system bus"),
        ]
        for c in cases {
            let socket = w.root + "/bus-\(c.value)"
            let bus = try PortServer(python: PackageRoot.path() + "/Tests/Tools/fakebus.py", [socket, c.value])
            defer { bus.stop() }
            let r = try w.run(["prefetch", "--require-unmetered", "--dry-run"], catalog: catalog,
                              env: ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(socket)"])
            #expect(r.status == 0, "\(c.value): \(r)")
            #expect(r.stdout.contains("not now:") == c.stops, "\(c.value): \(r)")
            #expect(r.stdout.contains(c.text), "\(c.value): \(r)")
            if c.value == "2" || c.value == "4" { #expect(!r.stdout.contains("metered"), "\(c.value): \(r)") }
        }
    }

    @Test("doctor names the credential sources it finds, never their values, and fails on a netrc or token file others can read")
    func doctorCredentials() throws {
        let w = try World(); defer { w.remove() }
        let secret = "hf_DoctorNeverShows"
        let r = try w.run(["doctor", "--json"], catalog: nil, env: ["HF_TOKEN": secret])
        let doc = try r.jsonObject()
        let credentials = try #require(doc["credentials"] as? [String: Any], "\(r)")
        #expect(credentials["huggingFaceToken"] as? String == "$HF_TOKEN")
        #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret))

        let tokenFile = try w.sandbox.write("home/.cache/huggingface/token", "hf_FileToken\n")
        let netrc = try w.sandbox.write("home/.netrc", "machine example.com login a password b\n")
        chmod(tokenFile, 0o644)
        chmod(netrc, 0o640)
        let exposed = try w.run(["doctor"], catalog: nil)
        #expect(exposed.status == 1, "\(exposed)")
        #expect(exposed.stdout.contains("FAIL credentials") && exposed.stdout.contains("chmod 600 \(netrc)")
                && exposed.stdout.contains("chmod 600 \(tokenFile)"), "\(exposed)")
        #expect(exposed.stdout.contains("Hugging Face token: \(tokenFile)") && exposed.stdout.contains("netrc: \(netrc)"), "\(exposed)")
        #expect(!exposed.stdout.contains("hf_FileToken"))
        chmod(tokenFile, 0o600)
        chmod(netrc, 0o600)
        let safe = try w.run(["doctor"], catalog: nil)
        #expect(safe.status == 0 && safe.stdout.contains("ok   credentials"), "\(safe)")
    }
}
