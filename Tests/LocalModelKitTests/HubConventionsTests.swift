// The Hub client's conventions that glasses-local honours (docs/models.md, "Where models come
// from"): HF_ENDPOINT, TRANSFORMERS_OFFLINE, its path expansion, its stored logins, and a
// token file or token that cannot be used. The rules are checked against Python itself
// (os.path, configparser: what huggingface_hub calls), the transfers against
// Tests/Tools/faultserver.py on 127.0.0.1, whose log shows each request's Authorization.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// A one-model engine whose only source is `base` (+ the file names), asking for the
/// Hugging Face token.
private func hubEngine(_ world: TransferWorld, _ id: String, _ files: [ServedFile], base: String) -> LocalModelEngine {
    let source = ModelSource.files(baseURL: base)
    let model = CatalogModel(
        id: id, kind: .llm, displayName: "Hub convention test \(id)", requiredMb: 100, autoEligible: true, revision: nil,
        files: files.map { CatalogFile(path: $0.path, size: Int64($0.size), sha256: $0.sha256) },
        sources: [source], sourceAuth: [source: .huggingface])
    let catalog = Catalog(catalogVersion: 1, generatedAt: "2026-11-30T00:00:00Z", models: [model])
    return LocalModelEngine(layout: world.layout, catalog: catalog, probe: FaultTestProbe())
}

/// The test policy with everything the environment decides read from `environment` only.
private func hubPolicy(_ environment: [String: String], home: String) -> TransferPolicy {
    var env = environment
    env["HOME"] = env["HOME"] ?? home
    var policy = transferTestPolicy()
    let read = TransferPolicy(environment: env)
    policy.credentials = read.credentials
    policy.offlineBy = read.offlineBy
    policy.hubEndpoint = read.hubEndpoint
    return policy
}

private func hubDownload(_ engine: LocalModelEngine, _ id: String, _ policy: TransferPolicy,
                         mirror: String? = nil) async -> Result<String, LocalModelError> {
    // A deadline: a token file that made the download wait would end as `.cancelled`.
    let task = Task { () -> Result<String, LocalModelError> in
        do throws(LocalModelError) {
            return .success(try await engine.download(modelId: id, options: DownloadOptions(policy: policy, mirror: mirror, progressInterval: 0.05)))
        } catch {
            return .failure(error)
        }
    }
    let watchdog = Task {
        try await Task.sleep(for: .seconds(60))
        task.cancel()
    }
    defer { watchdog.cancel() }
    return await task.value
}

/// A one-file model on the world's server, asking for the token.
private func servedHubModel(_ world: TransferWorld, _ id: String, seed: Int) throws -> (LocalModelEngine, ServedFile) {
    let file = try ServedFile("model.bin", size: 10_000, seed: seed)
    try world.serve(id, file)
    return (hubEngine(world, id, [file], base: world.server.origin + world.serverPath(id, "")), file)
}

/// The download of `id` with `env`, which must fail before any request: the error, after
/// checking that nothing but the test's own questions reached the server.
private func failsBeforeAnyRequest(_ world: TransferWorld, _ engine: LocalModelEngine, _ id: String, _ env: [String: String],
                                   sourceLocation: SourceLocation = #_sourceLocation) async throws -> LocalModelError {
    let before = try world.server.connections()
    let result = await hubDownload(engine, id, hubPolicy(env, home: world.root))
    let error = try #require(transferFailure(result, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
    #expect(try world.server.connections() == before + 1, "a request reached the server: \(error)", sourceLocation: sourceLocation)
    return error
}

/// Runs `script` with python3 (argument: `input` as JSON) and decodes its JSON answer.
private func python<T: Decodable>(_ script: String, _ input: Any, as type: T.Type) throws -> T {
    let argument = String(decoding: try JSONSerialization.data(withJSONObject: input), as: UTF8.self)
    let r = try ChildProcess.run("/usr/bin/python3", ["-c", script, argument], environment: ["PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"])
    try #require(r.status == 0, "python3: \(r)")
    return try JSONDecoder().decode(T.self, from: Data(r.stdout.utf8))
}

/// A FIFO at `path` (nothing ever writes to it: an open that waits would wait forever).
private func makeFIFO(_ path: String) throws {
    try #require(mkfifo(path, 0o600) == 0, "mkfifo \(path): errno \(errno)")
}

/// A Unix socket bound at `path` (the file stays after the descriptor is closed; opening it
/// fails, which is what a token file that is a socket does).
private func makeSocketFile(_ path: String) throws {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0, "socket: errno \(errno)")
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    try #require(rc == 0, "bind \(path): errno \(errno)")
}

@Suite("Hub client conventions: rules, checked against Python", .ownThreads, .networkGuard)
struct HubConventionRuleTests {
    static let env = ["HOME": "/h/user", "A": "/a", "B": "bee", "C": "$A", "E": ""]

    @Test("paths expand as os.path.expanduser then os.path.expandvars: ~, ~/…, ~user, an unknown user, $VAR, ${VAR}, unset and empty variables, values not expanded again")
    func expansionMatchesPython() throws {
        let paths = ["~", "~/", "~/x/y", "~//x", "x/~/y", "~root", "~root/x", "~no-such-user-gl/x", "~/$A", "~$A", "$A", "${A}", "$A/x",
                     "${A}x", "$Ax", "$NOPE/x", "${NOPE}/x", "${}", "$", "a$", "$/", "${A", "$A$B", "pre${A}post$B", "$C", "$E/x",
                     "$HOME/x", "é/$A/ü", "$$A", "${A}}"]
        var cases: [[String: Any]] = paths.map { ["path": $0, "env": Self.env] }
        // A home with trailing slashes, the root as home, and no HOME at all (the password database).
        for home in ["/h/user//", "/"] {
            cases += ["~", "~/x"].map { ["path": $0, "env": ["HOME": home]] }
        }
        cases += ["~", "~/x"].map { ["path": $0, "env": ["A": "/a"]] }
        let expected = try python("""
            import json, os, sys
            out = []
            for c in json.loads(sys.argv[1]):
                os.environ.clear(); os.environ.update(c["env"])
                out.append(os.path.expandvars(os.path.expanduser(c["path"])))
            print(json.dumps(out))
            """, cases, as: [String].self)
        try #require(expected.count == cases.count)
        for (c, want) in zip(cases, expected) {
            let path = c["path"] as? String ?? ""
            let env = c["env"] as? [String: String] ?? [:]
            #expect(EnvironmentFlag.expandPath(path, environment: env) == want, "\(path) with \(env)")
        }
        // The point of the table: these are not left as written.
        #expect(EnvironmentFlag.expandPath("~root/x", environment: Self.env) != "~root/x")
        #expect(EnvironmentFlag.expandPath("${A}x", environment: Self.env) == "/ax")
        // HOME set but empty: the password database, like HOME unset (the tool's reading
        // everywhere; Python would take the empty value).
        #expect(EnvironmentFlag.expandUser("~/x", environment: ["HOME": ""]) == EnvironmentFlag.expandUser("~/x", environment: [:]))
    }

    @Test("HF_HOME, XDG_CACHE_HOME, HF_TOKEN_PATH, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE give the files constants.py gives (token, stored_tokens, hub cache); the token and the cache lookups use them")
    func hubPathsMatchPython() throws {
        let base = ["HOME": "/h/u", "BASE": "/base", "HFH": "$BASE/double"]
        let settings: [[String: String]] = [
            [:], ["XDG_CACHE_HOME": "~/xdg"], ["XDG_CACHE_HOME": "$BASE/xdg"], ["HF_HOME": "~root/hf"],
            ["HF_HOME": "${BASE}/hf", "HF_TOKEN_PATH": "~/tok/token"], ["HF_TOKEN_PATH": "$BASE//tok//"],
            ["HF_HUB_CACHE": "~/hub", "HUGGINGFACE_HUB_CACHE": "/ignored"], ["HUGGINGFACE_HUB_CACHE": "$BASE/legacy"],
            ["HF_HOME": "$HFH"], ["HF_TOKEN_PATH": "token"], ["HF_HOME": "~no-such-user-gl/hf"],
        ]
        var cases = settings.map { base.merging($0) { $1 } }
        cases.append(["XDG_CACHE_HOME": "$BASE/xdg", "BASE": "/base"])   // no HOME: the password database
        struct Paths: Decodable, Equatable { var home: String; var token: String; var stored: String; var hub: String }
        // constants.py's own lines (HF_HOME, HUGGINGFACE_HUB_CACHE, HF_HUB_CACHE, HF_TOKEN_PATH,
        // HF_STORED_TOKENS_PATH), evaluated in each environment.
        let expected = try python("""
            import json, os, sys
            out = []
            for env in json.loads(sys.argv[1]):
                os.environ.clear(); os.environ.update(env)
                default_home = os.path.join(os.path.expanduser("~"), ".cache")
                HF_HOME = os.path.expandvars(os.path.expanduser(os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", default_home), "huggingface"))))
                HUGGINGFACE_HUB_CACHE = os.getenv("HUGGINGFACE_HUB_CACHE", os.path.join(HF_HOME, "hub"))
                HF_HUB_CACHE = os.path.expandvars(os.path.expanduser(os.getenv("HF_HUB_CACHE", HUGGINGFACE_HUB_CACHE)))
                HF_TOKEN_PATH = os.path.expandvars(os.path.expanduser(os.getenv("HF_TOKEN_PATH", os.path.join(HF_HOME, "token"))))
                HF_STORED_TOKENS_PATH = os.path.join(os.path.dirname(HF_TOKEN_PATH), "stored_tokens")
                out.append({"home": HF_HOME, "token": HF_TOKEN_PATH, "stored": HF_STORED_TOKENS_PATH, "hub": HF_HUB_CACHE})
            print(json.dumps(out))
            """, cases, as: [Paths].self)
        try #require(expected.count == cases.count)
        for (env, want) in zip(cases, expected) {
            let paths = HubClientPaths(environment: env)
            let got = Paths(home: paths.home ?? "nil", token: paths.tokenFile ?? "nil", stored: paths.storedTokensFile ?? "nil", hub: paths.hubCache ?? "nil")
            #expect(got == want, "\(env)")
            // The one expansion serves both readers.
            #expect(HuggingFaceCache.hubFolder(environment: env) == want.hub, "hub cache lookup, \(env)")
            let token = HuggingFaceToken(environment: env)
            #expect(token.file == want.token && token.storedTokensFile == want.stored, "token file, \(env)")
        }
    }

    @Test("a token is cleaned as _clean_token cleans it (CR/LF anywhere, str.strip() around); a control character left inside, from $HF_TOKEN or the file, is refused naming where it came from, never shown")
    func tokenText() throws {
        let raw = [" a ", "\ta\t", "\u{0B}a\u{0C}", "a\r\nb", "\u{A0}a\u{3000}", "\u{1C}a\u{1F}", "\r\n", " \t "]
        let expected = try python("""
            import json, sys
            print(json.dumps([t.replace("\\r", "").replace("\\n", "").strip() or None for t in json.loads(sys.argv[1])]))
            """, raw, as: [String?].self)
        for (text, want) in zip(raw, expected) {
            #expect(HuggingFaceToken.clean(text) == want, "\(text.debugDescription)")
        }

        let dir = NSTemporaryDirectory() + "hf-text-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for inside in ["\t", "\u{0}", "\u{1B}", "\u{7F}", "\u{0B}"] {
            let secret = "hf_left\(inside)right"
            let fromVariable = HuggingFaceToken(environment: ["HF_TOKEN": " \(secret)\n", "HOME": dir])
            #expect(throws: TransferFault.tokenText(from: "$HF_TOKEN", problem: HuggingFaceToken.characterProblem(secret) ?? "")) {
                _ = try fromVariable.resolve()
            }
            let file = dir + "/token"
            try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let fromFile = HuggingFaceToken(environment: ["HF_TOKEN_PATH": file])
            do {
                _ = try fromFile.resolve()
                Issue.record("a token with \(inside.debugDescription) inside was accepted")
            } catch {
                guard case let .tokenText(from, problem) = error else { Issue.record("\(error)"); continue }
                #expect(from == file && problem.contains("control character"), "\(error)")
                #expect(!error.description.contains("hf_left") && !error.description.contains("right"), "the token shows: \(error)")
                #expect(LocalModelError.transfer(error, modelId: "m").code == .tokenUnusable)
            }
        }
        // Not UTF-8: refused, not sent as replacement characters.
        try Data([0x68, 0x66, 0xFF, 0x0A]).write(to: URL(fileURLWithPath: dir + "/latin"))
        #expect(throws: TransferFault.tokenText(from: dir + "/latin", problem: "it is not UTF-8 text")) {
            _ = try HuggingFaceToken(environment: ["HF_TOKEN_PATH": dir + "/latin"]).resolve()
        }
    }

    @Test("a token file that is a FIFO, a folder or a socket is an error naming it (never waited on); a missing one is no token; the advice never says to write into it")
    func tokenFileKinds() throws {
        let dir = NSTemporaryDirectory() + "hf-kinds-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/home/.cache/huggingface/token", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try makeFIFO(dir + "/fifo")
        let socketPath = dir + "/sock"
        try makeSocketFile(socketPath)

        let cases: [(env: [String: String], path: String, says: String)] = [
            (["HF_TOKEN_PATH": dir + "/fifo"], dir + "/fifo", "FIFO"),
            (["HOME": dir + "/home"], dir + "/home/.cache/huggingface/token", "folder"),
            (["HF_TOKEN_PATH": socketPath], socketPath, "socket"),
            (["HF_TOKEN_PATH": "/dev/null"], "/dev/null", "device"),
        ]
        for c in cases {
            let token = HuggingFaceToken(environment: c.env)
            do {
                _ = try token.resolve()
                Issue.record("\(c.path): read as a token file")
            } catch {
                guard case let .tokenFile(path, namedBy, _) = error else { Issue.record("\(c.path): \(error)"); continue }
                #expect(path == c.path && namedBy == token.fileNamedBy)
                #expect(error.description.contains(c.path) && error.description.contains(c.says) && error.description.contains("Remove"), "\(error)")
                #expect(LocalModelError.transfer(error, modelId: "m").exitStatus == 77)
            }
            #expect(!token.howToSet.contains("write it to"), "\(c.path): \(token.howToSet)")
            #expect(token.howToSet.contains("not a regular file") && token.howToSet.contains(c.path), "\(token.howToSet)")
        }
        // Missing (or under a file, not a folder): no token, no error.
        #expect(try HuggingFaceToken(environment: ["HF_TOKEN_PATH": dir + "/missing"]).resolve() == nil)
        #expect(try HuggingFaceToken(environment: ["HF_TOKEN_PATH": dir + "/fifo/token"]).resolve() == nil)
        // A token in $HF_TOKEN makes the file irrelevant.
        let variable = try HuggingFaceToken(environment: ["HF_TOKEN_PATH": dir + "/fifo", "HF_TOKEN": "hf_ok"]).resolve()
        #expect(variable?.from == "$HF_TOKEN")
    }

    @Test("stored_tokens is read as configparser reads it (sections, any-case keys, ':' or '=', comments, DEFAULT, continuation lines; a file it refuses gives nothing), expires_at as int() reads it")
    func storedTokensMatchPython() throws {
        let texts = [
            "[work]\nhf_token = hf_work\n\n[oauth]\nhf_token = hf_oauth\nrefresh_token = hf_refresh\nexpires_at = 1800000000\n\n",
            "# saved\n[a]\nHF_TOKEN: hf_a\n; note\nExpires_At =  1_800_000_000 \n[b]\nhf_token=hf_b\nexpires_at = soon\n",
            "[DEFAULT]\nexpires_at = 5\n[a]\nhf_token = hf_a\n[b]\nhf_token = hf_b\nexpires_at = -7\n",
            "[a]\nhf_token = hf_a\n[a]\nhf_token = hf_again\n",
            "[a]\nhf_token = hf_a\nnot a pair\n",
            "hf_token = outside\n[a]\nhf_token = hf_a\n",
            "[a]\nhf_token = hf_a\n  continued\nexpires_at = 12.5\n",
            "[a]\r\nhf_token = hf_crlf\r\nexpires_at = +42\r\n",
            "",
        ]
        struct Login: Decodable, Equatable { var name: String; var token: String; var expiresAt: Int64? }
        let expected = try python("""
            import configparser, json, sys
            def int_or_none(v):
                try: return int(v)
                except (TypeError, ValueError): return None
            out = []
            for text in json.loads(sys.argv[1]):
                config = configparser.ConfigParser(interpolation=None)
                try:
                    config.read_string(text)
                    full = {name: dict(config.items(name)) for name in config.sections()}
                except configparser.Error:
                    full = {}
                out.append([{"name": n, "token": f["hf_token"], "expiresAt": int_or_none(f.get("expires_at"))} for n, f in full.items() if "hf_token" in f])
            print(json.dumps(out))
            """, texts, as: [[Login]].self)
        try #require(expected.count == texts.count)
        for (text, want) in zip(texts, expected) {
            let got = StoredLogin.parse(text).map { Login(name: $0.name, token: $0.token.value, expiresAt: $0.expiresAt) }
            #expect(got == want, "\(text.debugDescription)")
        }
        #expect(expected[0].count == 2 && expected[3].isEmpty, "the table covers both a good file and a refused one")
    }

    @Test("an expired login: the token file's token is a stored login whose expires_at has passed; not when $HF_TOKEN holds the token, sending is off, the token is another, or it has not expired")
    func expiredLogin() throws {
        let dir = NSTemporaryDirectory() + "hf-login-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir + "/hf", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "hf_oauth_access\n".write(toFile: dir + "/hf/token", atomically: true, encoding: .utf8)
        try "[read-only]\nhf_token = hf_other\nexpires_at = 100\n\n[laptop]\nhf_token = hf_oauth_access\nrefresh_token = hf_r\nexpires_at = 1800000000\n"
            .write(toFile: dir + "/hf/stored_tokens", atomically: true, encoding: .utf8)
        let env = ["HF_HOME": dir + "/hf", "HOME": dir]
        let after = 1_800_000_001.0, before = 1_799_999_999.0

        let login = HuggingFaceToken(environment: env).expiredLogin(now: after)
        #expect(login?.name == "laptop" && login?.expiresAt == 1_800_000_000)
        #expect(HuggingFaceToken(environment: env).expiredLogin(now: before) == nil)
        #expect(HuggingFaceToken(environment: env.merging(["HF_TOKEN": "hf_variable"]) { $1 }).expiredLogin(now: after) == nil)
        #expect(HuggingFaceToken(environment: env.merging(["HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"]) { $1 }).expiredLogin(now: after) == nil)
        try "hf_not_stored\n".write(toFile: dir + "/hf/token", atomically: true, encoding: .utf8)
        #expect(HuggingFaceToken(environment: env).expiredLogin(now: after) == nil)

        try "hf_oauth_access\n".write(toFile: dir + "/hf/token", atomically: true, encoding: .utf8)
        let report = CredentialReport(environment: env, now: after)
        #expect(report.warnings == ["the Hugging Face login (laptop) expired at 2027-01-15T08:00:00Z: run 'hf auth login' to renew it (public models still download without it)"],
                "\(report.warnings)")
        #expect(report.problems.isEmpty)
        #expect(CredentialReport(environment: env, now: before).warnings.isEmpty)
    }

    @Test("HF_ENDPOINT: trailing / stripped; https or loopback http only; only URLs on https://huggingface.co move, a path in the endpoint prefixed; the token's origin is the endpoint's, and --mirror wins")
    func endpointRules() throws {
        #expect(HubEndpoint(environment: [:]) == nil && HubEndpoint(environment: ["HF_ENDPOINT": ""]) == nil)
        let mirror = try #require(HubEndpoint(environment: ["HF_ENDPOINT": "https://hf-mirror.com///"]))
        #expect(mirror.url == "https://hf-mirror.com" && mirror.problem == nil)
        #expect(mirror.apply(to: "https://huggingface.co/org/repo/resolve/main/") == "https://hf-mirror.com/org/repo/resolve/main/")
        #expect(mirror.apply(to: "https://HuggingFace.co:443/org/r/resolve/v1/") == "https://hf-mirror.com/org/r/resolve/v1/")
        #expect(mirror.apply(to: "https://huggingface.co:8443/x/") == "https://huggingface.co:8443/x/")
        #expect(mirror.apply(to: "https://github.com/o/r/releases/a.tar.bz2") == "https://github.com/o/r/releases/a.tar.bz2")
        #expect(HubEndpoint("https://m.example/hf/").apply(to: "https://huggingface.co/o/r/resolve/main/") == "https://m.example/hf/o/r/resolve/main/")
        #expect(HubEndpoint("http://127.0.0.1:8080").problem == nil)
        // The cache is found for a source under an endpoint's path as for one on huggingface.co.
        #expect(HuggingFaceCache.repository(ofBaseURL: "https://m.example/hf/o/r/resolve/main/").map { "\($0.repo)@\($0.revision)" } == "o/r@main")
        #expect(HuggingFaceCache.repository(ofBaseURL: "https://huggingface.co/o/r/resolve/refs/pr/1/").map { "\($0.repo)@\($0.revision)" } == "o/r@refs/pr/1")
        #expect(HuggingFaceCache.repository(ofBaseURL: "https://huggingface.co/o/resolve/") == nil)
        #expect(HuggingFaceCache.repository(ofBaseURL: "https://huggingface.co/resolve/main/x/") == nil)
        for bad in ["http://hf-mirror.com", "hf-mirror.com", "https://user:pw@hf-mirror.com", "https://hf-mirror.com/?x=1", "/", "https://"] {
            let endpoint = HubEndpoint(bad)
            #expect(endpoint.problem != nil, "\(bad)")
            #expect(endpoint.apply(to: "https://huggingface.co/o/r/resolve/main/") == "https://huggingface.co/o/r/resolve/main/", "an unusable endpoint moves nothing")
        }

        let source = ModelSource.files(baseURL: "https://huggingface.co/o/r/resolve/main/")
        let model = CatalogModel(id: "m", kind: .llm, displayName: "m", requiredMb: 1, autoEligible: false, revision: nil,
                                 files: [CatalogFile(path: "a.bin", size: 1, sha256: nil)], sources: [source], sourceAuth: [source: .huggingface])
        var policy = TransferPolicy(environment: ["HF_ENDPOINT": "http://127.0.0.1:8080/"])
        let through = try DownloadOptions(policy: policy).authorizing(model)
        #expect(through.policy.credentials.bearerOrigins == ["http://127.0.0.1:8080"], "the token goes to the endpoint, never to huggingface.co")
        #expect(through.fetchURL("https://huggingface.co/o/r/resolve/main/a.bin") == "http://127.0.0.1:8080/o/r/resolve/main/a.bin")
        let mirrored = try DownloadOptions(policy: policy, mirror: "http://127.0.0.1:9090").authorizing(model)
        #expect(mirrored.fetchURL("https://huggingface.co/o/r/resolve/main/a.bin") == "http://127.0.0.1:9090/o/r/resolve/main/a.bin", "--mirror wins")
        #expect(!mirrored.policy.credentials.bearerOrigins.contains("http://127.0.0.1:9090"), "a --mirror never gets the token")
        policy = TransferPolicy(environment: ["HF_ENDPOINT": "http://hf-mirror.com"])
        #expect(throws: LocalModelError.transfer(.hubEndpoint(value: "http://hf-mirror.com", problem: HubEndpoint("http://hf-mirror.com").problem ?? ""), modelId: "m")) {
            _ = try DownloadOptions(policy: policy).authorizing(model)
        }
        #expect(throws: Never.self) { _ = try DownloadOptions(policy: policy, mirror: "http://127.0.0.1:9090").authorizing(model) }
    }

    @Test("TRANSFORMERS_OFFLINE switches the network off too, read as the Hub client reads it: only when HF_HUB_OFFLINE is unset or empty")
    func transformersOffline() {
        #expect(TransferPolicy.offlineSwitch(["TRANSFORMERS_OFFLINE": "1"]) == "TRANSFORMERS_OFFLINE=1")
        #expect(TransferPolicy.offlineSwitch(["TRANSFORMERS_OFFLINE": "yes", "HF_HUB_OFFLINE": ""]) == "TRANSFORMERS_OFFLINE=yes")
        #expect(TransferPolicy.offlineSwitch(["TRANSFORMERS_OFFLINE": "1", "HF_HUB_OFFLINE": "0"]) == nil, "HF_HUB_OFFLINE=0 decides, as `HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE` does")
        #expect(TransferPolicy.offlineSwitch(["TRANSFORMERS_OFFLINE": "0"]) == nil)
        #expect(TransferPolicy.offlineSwitch(["HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"]) == "HF_HUB_OFFLINE=1")
        #expect(TransferPolicy.offlineSwitch(["EXTENTOS_OFFLINE": "true", "TRANSFORMERS_OFFLINE": "1"]) == "EXTENTOS_OFFLINE=true")
    }
}

@Suite("Hub client conventions: transfers (fault-injecting HTTP server)", .ownThreads, .networkGuard)
struct HubConventionTransferTests {
    static let token = "hf_endpoint_Secret7"

    @Test("HF_ENDPOINT: a source on https://huggingface.co is fetched from the endpoint, which gets the token; the CDN it redirects to gets none")
    func endpointGetsTheToken() async throws {
        try await withTransferWorld { world in
            let cdn = try await FaultServer.start()
            defer { cdn.stop() }
            let big = try ServedFile("model.bin", size: 200_000, seed: 81)
            let small = try ServedFile("config.json", size: 1_500, seed: 82)
            try cdn.configure("/cdn/model.bin", size: big.size, seed: big.seed)
            try world.server.configure("/o/ep/resolve/main/model.bin", size: big.size, seed: big.seed,
                                       ["redirect": cdn.origin + "/cdn/model.bin", "auth": "Bearer \(Self.token)"])
            try world.server.configure("/o/ep/resolve/main/config.json", size: small.size, seed: small.seed, ["auth": "Bearer \(Self.token)"])
            let engine = hubEngine(world, "ep", [big, small], base: "https://huggingface.co/o/ep/resolve/main/")

            let env = ["HF_ENDPOINT": world.server.origin + "/", "HF_TOKEN": Self.token]
            let result = await hubDownload(engine, "ep", hubPolicy(env, home: world.root))
            try expectTransferInstalled(world, engine, "ep", result, [big, small])
            let log = ["/o/ep/resolve/main/model.bin", "/o/ep/resolve/main/config.json"].flatMap { (try? world.server.stats($0).log) ?? [] }
            #expect(log.count == 2 && log.allSatisfy { $0.authorization == "Bearer \(Self.token)" }, "\(log.map(\.authorization))")
            let cdnLog = try cdn.stats("/cdn/model.bin").log
            #expect(!cdnLog.isEmpty && cdnLog.allSatisfy { $0.authorization == nil }, "\(cdnLog.map(\.authorization))")
        }
    }

    @Test("--mirror wins over HF_ENDPOINT: the mirror serves, without the token, and the endpoint sees no connection")
    func mirrorWins() async throws {
        try await withTransferWorld { world in
            let mirror = try await FaultServer.start()
            defer { mirror.stop() }
            let file = try ServedFile("model.bin", size: 30_000, seed: 83)
            try mirror.configure("/o/mw/resolve/main/model.bin", size: file.size, seed: file.seed)
            let engine = hubEngine(world, "mw", [file], base: "https://huggingface.co/o/mw/resolve/main/")
            let before = try world.server.connections()
            let result = await hubDownload(engine, "mw", hubPolicy(["HF_ENDPOINT": world.server.origin, "HF_TOKEN": Self.token], home: world.root),
                                           mirror: mirror.origin)
            try expectTransferInstalled(world, engine, "mw", result, [file])
            #expect(try world.server.connections() == before + 1, "the endpoint saw a connection besides the test's own question")
            let log = try mirror.stats("/o/mw/resolve/main/model.bin").log
            #expect(!log.isEmpty && log.allSatisfy { $0.authorization == nil })
        }
    }

    @Test("an HF_ENDPOINT that cannot be used stops a Hub download before any connection, naming HF_ENDPOINT; a source elsewhere does not need it")
    func invalidEndpoint() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("model.bin", size: 10_000, seed: 84)
            try world.serve("elsewhere", file)
            let hub = hubEngine(world, "hub", [file], base: "https://huggingface.co/o/hub/resolve/main/")
            for bad in ["http://hf-mirror.com", "hf-mirror.com"] {
                let error = try await failsBeforeAnyRequest(world, hub, "hub", ["HF_ENDPOINT": bad])
                #expect(error.code == .invalidSetting && error.exitStatus == 1, "\(error)")
                #expect(error.description.contains("HF_ENDPOINT=\(bad)") && error.description.contains("unset it"), "\(error)")
            }
            let elsewhere = hubEngine(world, "elsewhere", [file], base: world.server.origin + "/m/elsewhere/")
            let result = await hubDownload(elsewhere, "elsewhere", hubPolicy(["HF_ENDPOINT": "http://hf-mirror.com"], home: world.root))
            try expectTransferInstalled(world, elsewhere, "elsewhere", result, [file])
        }
    }

    @Test("a token file that is a FIFO or a folder fails the download at once with code tokenUnusable (exit 77) naming it, and nothing is requested; with $HF_TOKEN set the file does not matter")
    func unusableTokenFile() async throws {
        try await withTransferWorld { world in
            let (engine, file) = try servedHubModel(world, "tf", seed: 85)
            try makeFIFO(world.root + "/token-fifo")
            try FileManager.default.createDirectory(atPath: world.root + "/home/.cache/huggingface/token", withIntermediateDirectories: true)
            let cases: [(env: [String: String], path: String)] = [
                (["HF_TOKEN_PATH": world.root + "/token-fifo"], world.root + "/token-fifo"),
                (["HOME": world.root + "/home"], world.root + "/home/.cache/huggingface/token"),
            ]
            for c in cases {
                let error = try await failsBeforeAnyRequest(world, engine, "tf", c.env)
                #expect(error.code == .tokenUnusable && error.exitStatus == 77, "\(error)")
                #expect(error.description.contains(c.path) && error.description.contains("HF_TOKEN_PATH"), "\(error)")
                try expectTransferAbsent(world, engine, "tf")
            }
            let result = await hubDownload(engine, "tf", hubPolicy(["HF_TOKEN_PATH": world.root + "/token-fifo", "HF_TOKEN": "hf_x"], home: world.root))
            try expectTransferInstalled(world, engine, "tf", result, [file])
        }
    }

    @Test("a token with a control character inside is never sent: code tokenUnusable naming $HF_TOKEN, no request made, the token in no message")
    func controlCharacterToken() async throws {
        try await withTransferWorld { world in
            let (engine, _) = try servedHubModel(world, "cc", seed: 86)
            let error = try await failsBeforeAnyRequest(world, engine, "cc", ["HF_TOKEN": "hf_tab\tinside"])
            #expect(error.code == .tokenUnusable && error.description.contains("$HF_TOKEN") && error.description.contains("0x09"), "\(error)")
            #expect(!error.description.contains("hf_tab"))
        }
    }

    @Test("TRANSFORMERS_OFFLINE=1: a download fails with code offline naming it, and the server sees no connection")
    func transformersOfflineDownload() async throws {
        try await withTransferWorld { world in
            let (engine, _) = try servedHubModel(world, "to", seed: 87)
            let error = try await failsBeforeAnyRequest(world, engine, "to", ["TRANSFORMERS_OFFLINE": "1"])
            #expect(error.code == .offline && error.description.contains("TRANSFORMERS_OFFLINE"), "\(error)")
        }
    }
}
