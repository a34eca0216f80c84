// P10 (transport) as a user meets it: the built `glasses-local` against a real HTTPS server
// on 127.0.0.1 (Tests/Tools/tlsserver.py) with certificates made by the `openssl` command
// line in the test's folder.
//
// Trusting a test certificate. This libcurl (7.88, OpenSSL backend, Debian build) hands
// OpenSSL its built-in CA bundle (`curl-config --ca`: /etc/ssl/certs/ca-certificates.crt)
// explicitly, so the library by itself reads neither `SSL_CERT_FILE` nor `CURL_CA_BUNDLE`.
// glasses-local therefore passes `EXTENTOS_CA_FILE` (else `CURL_CA_BUNDLE`, else
// `SSL_CERT_FILE`) to CURLOPT_CAINFO, and one test checks that path. The tests of the
// default trust (the system bundle, no variable set) run the binary in a private mount
// namespace (`unshare -m`, root) where the test's certificate is bind-mounted over
// libcurl's bundle file: the real system file is never touched and no other process sees
// the change.
import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One running `tlsserver.py`: HTTPS with `cert`/`key`, or plain HTTP without them.
/// Everything it sees goes to a JSON-lines log the tests read (no TLS client needed here).
final class TLSTestServer {
    let logPath: String
    private let server: PortServer
    var port: Int { server.port }

    static let scriptPath: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tools/tlsserver.py").path
    }()

    /// - Parameter redirects: path prefix → target prefix (`{port}` is this server's port).
    init(root: String, logPath: String, cert: String? = nil, key: String? = nil,
         redirects: [(String, String)] = []) throws {
        self.logPath = logPath
        var arguments = ["--root", root, "--log", logPath]
        if let cert, let key { arguments += ["--cert", cert, "--key", key] }
        for (prefix, target) in redirects { arguments += ["--redirect", "\(prefix)=\(target)"] }
        server = try PortServer(python: Self.scriptPath, arguments)
    }

    /// EOF on stdin and SIGTERM; SIGKILL if it is still there after 5 s.
    func stop() { server.stop() }

    // MARK: What the server saw

    struct Request: CustomStringConvertible {
        var method: String
        var path: String
        var status: Int
        var headers: [(String, String)]

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        var description: String { "\(method) \(path) → \(status) \(headers.map { "\($0.0): \($0.1)" })" }
    }

    var events: [[String: Any]] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// TCP connections accepted.
    var connections: Int { events.filter { $0["event"] as? String == "connection" }.count }

    /// TLS handshakes that failed, with the server-side reason.
    var handshakeFailures: [String] {
        events.filter { $0["event"] as? String == "handshake_failed" }.map { $0["error"] as? String ?? "?" }
    }

    /// Waits (at most `timeout`) until every accepted connection has ended (closed, or its
    /// handshake failed): the server learns of a client's rejection or exit a moment after
    /// the client has gone, so the log is complete only then.
    func settle(timeout: TimeInterval = 5) {
        let deadline = Date().addingTimeInterval(timeout)
        func ended() -> Int { events.filter { ["closed", "handshake_failed"].contains($0["event"] as? String ?? "") }.count }
        while Date() < deadline && ended() < connections { usleep(10_000) }
    }

    var requests: [Request] {
        events.filter { $0["event"] as? String == "request" }.map { event in
            let pairs = (event["headers"] as? [[String]] ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
            return Request(method: event["method"] as? String ?? "?", path: event["path"] as? String ?? "?",
                           status: event["status"] as? Int ?? 0, headers: pairs)
        }
    }

    var logText: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "<no log>" }
}

/// One test's world: a sandbox with a model folder (`<root>/www/m/…`), certificates, a
/// store, and the built binary run against an HTTPS server.
final class TLSWorld {
    static let modelId = "p10-model"
    /// Served under `/<prefix>/` from `<root>/www/m/`.
    static let files: [(String, Int)] = [("weights.bin", 300_000), ("config.json", 700)]

    let sandbox: Sandbox
    var root: String { sandbox.root }
    var www: String { root + "/www" }
    var modelFolder: String { www + "/m" }
    var store: String { sandbox.store }
    var installFolder: String { store + "/" + Self.modelId }
    private var servers: [TLSTestServer] = []

    init() throws {
        sandbox = try Sandbox()
        do {
            for dir in ["certs", "catalogs", "cwd"] {
                try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
            }
            for (path, size) in Self.files {
                try sandbox.write("www/m/" + path, try Disk.randomBytes(size))
            }
        } catch {
            sandbox.remove()
            throw error
        }
    }

    /// Stops the servers and removes the folder. Call from `defer`.
    func remove() {
        for server in servers { server.stop() }
        sandbox.remove()
    }

    var binary: String {
        get throws { try #require(CLIBinary.path, "glasses-local binary not found next to the test bundle; set GLASSES_LOCAL_BIN") }
    }

    // MARK: Certificates and servers

    /// A self-signed certificate for `host` (an IP literal or a DNS name) made by `openssl req`.
    /// - Returns: (cert.pem, key.pem) paths.
    func makeCertificate(name: String, host: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (cert: String, key: String) {
        let dir = root + "/certs/" + name
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let san = host.allSatisfy { $0.isNumber || $0 == "." } ? "IP:\(host)" : "DNS:\(host)"
        let r = try World.tool("/usr/bin/env", ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                                "-subj", "/CN=\(host)", "-addext", "subjectAltName=\(san)", "-days", "2",
                                                "-keyout", "key.pem", "-out", "cert.pem"], currentDirectory: dir, timeout: 30)
        try #require(r.status == 0, "openssl req failed\n\(r)", sourceLocation: sourceLocation)
        return (dir + "/cert.pem", dir + "/key.pem")
    }

    /// Starts `tlsserver.py` over `www` (TLS when `certificate` is given).
    func startServer(_ name: String, certificate: (cert: String, key: String)? = nil,
                     redirects: [(String, String)] = []) throws -> TLSTestServer {
        let server = try TLSTestServer(root: www, logPath: root + "/\(name).log.jsonl", cert: certificate?.cert,
                                       key: certificate?.key, redirects: redirects)
        servers.append(server)
        return server
    }

    // MARK: Catalog and runs

    /// `glasses-local catalog hash <www>/m --id p10-model --base-url <baseURL>`, written to a file.
    func catalog(baseURL: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let r = try run(["catalog", "hash", modelFolder, "--id", Self.modelId, "--base-url", baseURL], catalog: nil,
                        sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let path = root + "/catalogs/\(UUID().uuidString.prefix(8)).json"
        try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func globals(_ catalog: String?) -> [String] {
        (catalog.map { ["--catalog", $0] } ?? []) + ["--store", store]
    }

    /// The binary with the sandbox's controlled environment (no SSL_CERT_FILE, no CURL_CA_BUNDLE):
    /// the system trust store only.
    func run(_ arguments: [String], catalog: String?, timeout: TimeInterval = 20,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        try Sandbox.runProcess(try binary, globals(catalog) + arguments, environment: sandbox.environment([:]),
                               ioDirectory: root + "/io", currentDirectory: root + "/cwd", timeout: timeout,
                               sourceLocation: sourceLocation)
    }

    /// The binary with `caFile` as libcurl's only CA bundle: in a private mount namespace the
    /// file is bind-mounted over libcurl's built-in bundle path (see the top of this file for
    /// why no environment variable does it). Exit 97 means the mount itself failed.
    func runTrusting(_ caFile: String, _ arguments: [String], catalog: String?, timeout: TimeInterval = 20,
                     sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        let bundle = try TLSWorld.libcurlCABundle(sourceLocation: sourceLocation)
        let script = "ca=\"$1\"; shift; mount --bind \"$ca\" '\(bundle)' || exit 97; exec \"$0\" \"$@\""
        let r = try Sandbox.runProcess("/usr/bin/unshare", ["--mount", "/bin/sh", "-c", script, try binary, caFile]
                                       + globals(catalog) + arguments,
                                       environment: sandbox.environment([:]), ioDirectory: root + "/io",
                                       currentDirectory: root + "/cwd", timeout: timeout, sourceLocation: sourceLocation)
        try #require(r.status != 97 && !r.stderr.contains("unshare:"),
                     "could not bind-mount the test CA in a private mount namespace (needs root)\n\(r)",
                     sourceLocation: sourceLocation)
        // Drop the wrapper from the arguments shown in messages.
        return CLIResult(arguments: globals(catalog) + arguments, status: r.status, stdout: r.stdout, stderr: r.stderr)
    }

    /// The CA bundle libcurl was built with (`curl-config --ca`), else Debian's.
    static func libcurlCABundle(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        var path = "/etc/ssl/certs/ca-certificates.crt"
        if let r = try? World.tool("/usr/bin/env", ["curl-config", "--ca"], timeout: 10), r.status == 0 {
            let line = r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("/") { path = line }
        }
        try #require(Disk.fileSize(path) != nil, "libcurl's CA bundle \(path) is not a regular file", sourceLocation: sourceLocation)
        return path
    }

    // MARK: Store state

    /// `list --json`'s `isInstalled` for the model.
    func isInstalled(catalog: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let r = try run(["list", "--json"], catalog: catalog, sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let models = try #require(try r.jsonObject(sourceLocation: sourceLocation)["models"] as? [[String: Any]], "\(r)",
                                  sourceLocation: sourceLocation)
        let model = try #require(models.first { $0["id"] as? String == Self.modelId }, "\(r)", sourceLocation: sourceLocation)
        return try #require(model["isInstalled"] as? Bool, "\(r)", sourceLocation: sourceLocation)
    }

    /// Nothing installed: list says so, no final folder, `verify` says not installed, and no
    /// byte of any file reached the disk (the partials are empty or absent).
    func expectNothingInstalled(catalog: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(try !isInstalled(catalog: catalog, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
        #expect(!Disk.exists(installFolder), "the final folder exists: \(Disk.tree(installFolder))", sourceLocation: sourceLocation)
        let v = try run(["verify", Self.modelId], catalog: catalog, sourceLocation: sourceLocation)
        #expect(v.status == 1 && v.stderr.contains("not installed"), "\(v)", sourceLocation: sourceLocation)
        let partialBytes = Disk.regularFiles(under: store + "/.partial")
            .reduce(Int64(0)) { $0 + (Disk.fileSize(store + "/.partial/" + $1) ?? 0) }
        #expect(partialBytes == 0, "bytes were written although the transfer was refused: \(Disk.tree(store + "/.partial"))",
                sourceLocation: sourceLocation)
        #expect(Disk.tree(store + "/.staging").isEmpty, "staging leftovers: \(Disk.tree(store + "/.staging"))",
                sourceLocation: sourceLocation)
    }

    /// The installed folder holds exactly the served files, byte for byte.
    func expectInstalledMatchesSource(sourceLocation: SourceLocation = #_sourceLocation) {
        let expected = Self.files.map(\.0).sorted()
        let installed = Disk.regularFiles(under: installFolder)
        #expect(installed == expected, "installed tree \(Disk.tree(installFolder))", sourceLocation: sourceLocation)
        for (path, _) in Self.files {
            let a = FileManager.default.contents(atPath: modelFolder + "/" + path)
            let b = FileManager.default.contents(atPath: installFolder + "/" + path)
            #expect(a != nil && a == b, "\(path) is not byte-identical to the served file", sourceLocation: sourceLocation)
        }
    }
}

@Suite("P10 transport: glasses-local against a real HTTPS server on 127.0.0.1", .ownThreads, .networkGuard)
struct TLSTests {
    @Test("an untrusted self-signed certificate: exit 1, a TLS/certificate message naming the URL, not retried, nothing installed")
    func untrustedCertificateIsRefused() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let server = try w.startServer("https", certificate: certificate)
        let base = "https://127.0.0.1:\(server.port)/m/"
        let catalog = try w.catalog(baseURL: base)

        let r = try w.run(["download", TLSWorld.modelId], catalog: catalog)
        #expect(r.status == 1, "\(r)")
        let lower = r.stderr.lowercased()
        #expect((lower.contains("tls") || lower.contains("ssl")) && lower.contains("certificate"),
                "the message must say TLS/certificate\n\(r)")
        #expect(TLSWorld.files.contains { r.stderr.contains(base + $0.0) }, "the message must name the URL\n\(r)")
        // Verification failure is final: one handshake per file, no backoff.
        server.settle()
        #expect(server.requests.isEmpty, "no HTTP request may pass an unverified handshake: \(server.requests)")
        #expect(!server.handshakeFailures.isEmpty && server.connections <= TLSWorld.files.count,
                "expected at most one (failed) handshake per file, no retries\n\(server.logText)")
        #expect(!r.stderr.contains("; retry "), "a verification failure is not retried with backoff\n\(r)")
        try w.expectNothingInstalled(catalog: catalog)
    }

    @Test("the certificate trusted as libcurl's CA bundle: download exit 0, files byte-identical, verify exit 0")
    func trustedCertificateDownloads() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let server = try w.startServer("https", certificate: certificate)
        let catalog = try w.catalog(baseURL: "https://127.0.0.1:\(server.port)/m/")

        let r = try w.runTrusting(certificate.cert, ["download", TLSWorld.modelId], catalog: catalog)
        server.settle()
        #expect(r.status == 0, "\(r)\n\(server.logText)")
        #expect(server.handshakeFailures.isEmpty, "\(server.logText)")
        let fetched = Set(server.requests.filter { $0.method == "GET" && $0.status == 200 }.map(\.path))
        #expect(fetched == Set(TLSWorld.files.map { "/m/" + $0.0 }), "every file fetched over TLS: \(server.requests)")
        w.expectInstalledMatchesSource()
        #expect(try w.isInstalled(catalog: catalog))
        let v = try w.run(["verify", TLSWorld.modelId], catalog: catalog)
        #expect(v.status == 0, "\(v)")
    }

    @Test("EXTENTOS_CA_FILE trusts a private mirror's certificate: download exit 0; verification stays on for other names")
    func caFileFromEnvironmentIsTrusted() throws {
        let w = try TLSWorld(); defer { w.remove() }
        // The CA file trusts two self-signed certificates: the mirror's own (127.0.0.1) and
        // one issued for another host name. A third certificate for 127.0.0.1, from a key
        // the file does not hold, stands for a different CA.
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let otherHost = try w.makeCertificate(name: "other", host: "otherhost")
        let stranger = try w.makeCertificate(name: "stranger", host: "127.0.0.1")
        let caFile = w.root + "/certs/trusted-bundle.pem"
        let bundle = try String(contentsOfFile: certificate.cert, encoding: .utf8) + String(contentsOfFile: otherHost.cert, encoding: .utf8)
        try bundle.write(toFile: caFile, atomically: true, encoding: .utf8)
        func download(_ catalog: String) throws -> CLIResult {
            try Sandbox.runProcess(try w.binary, ["--catalog", catalog, "--store", w.store, "download", TLSWorld.modelId],
                                   environment: w.sandbox.environment(["EXTENTOS_CA_FILE": caFile]),
                                   ioDirectory: w.root + "/io", currentDirectory: w.root + "/cwd", timeout: 20)
        }

        // A certificate the file trusts, but for another host name: refused on the name.
        let wrongName = try w.startServer("wrong-name", certificate: otherHost)
        let wrongNameBase = "https://127.0.0.1:\(wrongName.port)/m/"
        let wrongNameCatalog = try w.catalog(baseURL: wrongNameBase)
        let r1 = try download(wrongNameCatalog)
        wrongName.settle()
        #expect(r1.status == 1, "EXTENTOS_CA_FILE must not turn host-name verification off\n\(r1)")
        let lower1 = r1.stderr.lowercased()
        #expect((lower1.contains("tls") || lower1.contains("ssl")) && (lower1.contains("host name") || lower1.contains("subject name")),
                "the message must say the certificate does not match the host\n\(r1)")
        #expect(!lower1.contains("self-signed") && !lower1.contains("issuer"), "the chain was trusted through the file\n\(r1)")
        #expect(TLSWorld.files.contains { r1.stderr.contains(wrongNameBase + $0.0) }, "the message must name the URL\n\(r1)")
        #expect(wrongName.connections >= 1 && wrongName.requests.isEmpty,
                "the server was reached, and no HTTP request passed the wrong-name handshake\n\(wrongName.logText)")
        try w.expectNothingInstalled(catalog: wrongNameCatalog)
        _ = try w.run(["delete", TLSWorld.modelId], catalog: wrongNameCatalog)   // the next check starts empty even if this one failed

        // The right name, but a certificate from a CA the file does not hold: refused on the issuer.
        let untrusted = try w.startServer("other-ca", certificate: stranger)
        let untrustedBase = "https://127.0.0.1:\(untrusted.port)/m/"
        let untrustedCatalog = try w.catalog(baseURL: untrustedBase)
        let r2 = try download(untrustedCatalog)
        untrusted.settle()
        #expect(r2.status == 1, "EXTENTOS_CA_FILE must not turn chain verification off\n\(r2)")
        let lower2 = r2.stderr.lowercased()
        #expect((lower2.contains("tls") || lower2.contains("ssl")) && lower2.contains("certificate")
                && (lower2.contains("self-signed") || lower2.contains("issuer")),
                "the message must say the certificate is not trusted\n\(r2)")
        #expect(TLSWorld.files.contains { r2.stderr.contains(untrustedBase + $0.0) }, "the message must name the URL\n\(r2)")
        #expect(!untrusted.handshakeFailures.isEmpty && untrusted.requests.isEmpty,
                "the handshake failed and no HTTP request was made\n\(untrusted.logText)")
        try w.expectNothingInstalled(catalog: untrustedCatalog)
        _ = try w.run(["delete", TLSWorld.modelId], catalog: untrustedCatalog)   // the next check starts empty even if this one failed

        // The mirror the file is for: trusted.
        let server = try w.startServer("https", certificate: certificate)
        let catalog = try w.catalog(baseURL: "https://127.0.0.1:\(server.port)/m/")
        let r = try download(catalog)
        server.settle()
        #expect(r.status == 0, "\(r)\n\(server.logText)")
        #expect(server.handshakeFailures.isEmpty, "\(server.logText)")
        w.expectInstalledMatchesSource()
        #expect(try w.isInstalled(catalog: catalog))
    }

    @Test("a trusted https origin redirecting to plain http on loopback: refused, and the http server gets no request")
    func httpsToHTTPRedirectIsRefused() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let plain = try w.startServer("plain")
        // /down/<file> → http://127.0.0.1:<plain>/m/<file>: a loopback http URL, which the
        // catalog rules alone would accept; only "never https → http" stops it.
        let server = try w.startServer("https", certificate: certificate,
                                       redirects: [("/down/", "http://127.0.0.1:\(plain.port)/m/")])
        let base = "https://127.0.0.1:\(server.port)/down/"
        let catalog = try w.catalog(baseURL: base)

        let r = try w.runTrusting(certificate.cert, ["download", TLSWorld.modelId], catalog: catalog)
        server.settle()
        plain.settle()
        #expect(r.status == 1, "\(r)")
        // Besides the URLs themselves, the message must speak of the redirect and of http.
        let lower = TLSWorld.files.reduce(r.stderr) { $0.replacingOccurrences(of: base + $1.0, with: "<url>") }.lowercased()
        #expect(lower.contains("redirect") && lower.contains("refused") && lower.contains("http"),
                "the message must say the redirect (https → http) was refused\n\(r)")
        #expect(TLSWorld.files.contains { r.stderr.contains(base + $0.0) }, "the message must name the URL\n\(r)")
        #expect(!server.requests.isEmpty && server.requests.allSatisfy { $0.status == 302 },
                "the https origin answered with the redirect: \(server.requests)")
        #expect(plain.connections == 0 && plain.requests.isEmpty,
                "the plain-http server must not be contacted\n\(plain.logText)")
        #expect(server.requests.count <= TLSWorld.files.count, "a refused redirect is final, not retried: \(server.requests)")
        try w.expectNothingInstalled(catalog: catalog)
    }

    @Test("a redirect loop: fails fast with a too-many-redirects message, each file asked at most a capped number of times")
    func redirectLoopIsCapped() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let server = try w.startServer("https", certificate: certificate,
                                       redirects: [("/loop/", "https://127.0.0.1:{port}/loop/")])
        let base = "https://127.0.0.1:\(server.port)/loop/"
        let catalog = try w.catalog(baseURL: base)

        let r = try w.runTrusting(certificate.cert, ["download", TLSWorld.modelId], catalog: catalog, timeout: 20)
        server.settle()
        #expect(r.status == 1, "\(r)")
        let lower = r.stderr.lowercased()
        #expect(lower.contains("redirects") && (lower.contains("too many") || lower.contains("more than")),
                "the message must be about too many redirects\n\(r)")
        #expect(TLSWorld.files.contains { r.stderr.contains(base + $0.0) }, "the message must name the URL\n\(r)")
        #expect(!r.stderr.contains("; retry "), "a redirect loop ends the file at once, without a retry\n\(r)")
        // Each file: the redirects were followed (more than one request), up to a small cap
        // (≤ 10 redirects), in one attempt (a loop is not retried).
        let byPath = Dictionary(grouping: server.requests, by: \.path)
        #expect(!byPath.isEmpty, "\(server.logText)")
        for (path, requests) in byPath {
            #expect(requests.count > 1 && requests.count <= 11, "\(path) was requested \(requests.count) times")
        }
        try w.expectNothingInstalled(catalog: catalog)
    }

    @Test("a trusted certificate for another host name: refused (host verification on), nothing installed")
    func wrongHostCertificateIsRefused() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "other", host: "otherhost")
        let server = try w.startServer("https", certificate: certificate)
        let base = "https://127.0.0.1:\(server.port)/m/"
        let catalog = try w.catalog(baseURL: base)

        let r = try w.runTrusting(certificate.cert, ["download", TLSWorld.modelId], catalog: catalog)
        #expect(r.status == 1, "\(r)")
        let lower = r.stderr.lowercased()
        #expect((lower.contains("tls") || lower.contains("ssl")) && (lower.contains("host name") || lower.contains("subject name")),
                "the message must say the certificate does not match the host\n\(r)")
        // The chain itself was trusted: the refusal is about the name, not the issuer.
        #expect(!lower.contains("self-signed") && !lower.contains("issuer"), "\(r)")
        #expect(TLSWorld.files.contains { r.stderr.contains(base + $0.0) }, "the message must name the URL\n\(r)")
        server.settle()
        // libcurl checks the name once the handshake is done, then hangs up before sending
        // anything: the server sees connections but never a request.
        #expect(server.requests.isEmpty, "no HTTP request may pass a handshake with the wrong host: \(server.requests)")
        #expect(server.connections >= 1 && server.connections <= TLSWorld.files.count,
                "expected at most one connection per file, no retries\n\(server.logText)")
        try w.expectNothingInstalled(catalog: catalog)
    }

    @Test("no compression negotiated: the file requests carry no Accept-Encoding header")
    func noAcceptEncoding() throws {
        let w = try TLSWorld(); defer { w.remove() }
        let certificate = try w.makeCertificate(name: "local", host: "127.0.0.1")
        let server = try w.startServer("https", certificate: certificate)
        let catalog = try w.catalog(baseURL: "https://127.0.0.1:\(server.port)/m/")

        let r = try w.runTrusting(certificate.cert, ["download", TLSWorld.modelId], catalog: catalog)
        server.settle()
        #expect(r.status == 0, "\(r)\n\(server.logText)")
        let requests = server.requests
        #expect(Set(requests.map(\.path)) == Set(TLSWorld.files.map { "/m/" + $0.0 }), "\(requests)")
        // The log really holds the headers (so an absent header is meaningful).
        #expect(requests.allSatisfy { $0.header("Host") != nil && $0.header("User-Agent") != nil }, "\(requests)")
        for request in requests {
            #expect(request.header("Accept-Encoding") == nil, "compression was negotiated: \(request)")
            #expect(request.header("TE") == nil, "transfer coding was negotiated: \(request)")
        }
    }
}
