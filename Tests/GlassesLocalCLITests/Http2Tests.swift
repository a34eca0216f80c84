import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Over https, a server that offers HTTP/2 gets it: the files of a model travel as
/// streams multiplexed on one connection (libcurl with nghttp2; CURLMOPT_PIPELINING).
/// nginx on 127.0.0.1 with `listen … ssl http2` and a certificate made by openssl,
/// trusted through EXTENTOS_CA_FILE.
@Suite("HTTP/2 where the server offers it", .ownThreads, .networkGuard)
struct Http2Tests {
    @Test("24 small files over https from nginx with http2: every request HTTP/2.0, all on one connection")
    func multiplexed() throws {
        let w = try World(); defer { w.remove() }
        let dir = w.root + "/h2"
        for sub in ["www/m", "logs", "tmp"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true)
        }
        for i in 0..<24 { try Disk.randomBytes(20_000 + i).write(to: URL(fileURLWithPath: dir + "/www/m/f\(i).bin")) }
        let cert = try World.tool("/usr/bin/env", ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir + "/key.pem",
                                                   "-out", dir + "/cert.pem", "-days", "1", "-subj", "/CN=127.0.0.1",
                                                   "-addext", "subjectAltName=IP:127.0.0.1"])
        try #require(cert.status == 0, "\(cert)")
        let port = try NginxServer.freePort()
        let conf = """
            daemon off; master_process off; pid \(dir)/nginx.pid; error_log \(dir)/logs/error.log warn;
            events { worker_connections 64; }
            http {
              log_format p '$request_uri $status $server_protocol $connection';
              access_log \(dir)/logs/access.log p;
              client_body_temp_path \(dir)/tmp/b; proxy_temp_path \(dir)/tmp/p; fastcgi_temp_path \(dir)/tmp/f;
              uwsgi_temp_path \(dir)/tmp/u; scgi_temp_path \(dir)/tmp/s;
              server { listen 127.0.0.1:\(port) ssl http2; ssl_certificate \(dir)/cert.pem; ssl_certificate_key \(dir)/key.pem;
                       root \(dir)/www; }
            }
            """
        try conf.write(toFile: dir + "/nginx.conf", atomically: true, encoding: .utf8)
        // In the foreground, one process (as NginxServer runs it): stopping it is one signal.
        let nginx = Subprocess()
        nginx.executableURL = URL(fileURLWithPath: try #require(NginxServer.binary, "nginx not found"))
        nginx.arguments = ["-c", dir + "/nginx.conf", "-p", dir + "/", "-e", dir + "/logs/error.log"]
        nginx.standardInput = FileHandle.nullDevice
        nginx.standardOutput = FileHandle.nullDevice
        nginx.standardError = FileHandle.nullDevice
        try SpawnGate.spawn { try nginx.run() }
        defer {
            if nginx.isRunning { kill(nginx.processIdentifier, SIGKILL) }
            nginx.waitUntilExit()
        }
        let deadline = Date().addingTimeInterval(10)
        while nginx.isRunning && Date() < deadline && !NginxServer.accepts(port: port) { Thread.sleep(forTimeInterval: 0.02) }
        try #require(NginxServer.accepts(port: port), "nginx with ssl and http2 did not start: \((try? String(contentsOfFile: dir + "/logs/error.log", encoding: .utf8)) ?? "")")
        let hashed = try w.run(["catalog", "hash", dir + "/www/m", "--id", "h2", "--base-url", "https://127.0.0.1:\(port)/m/"], catalog: nil)
        try #require(hashed.status == 0, "\(hashed)")
        let catalog = w.root + "/catalogs/h2.json"
        try hashed.stdout.write(toFile: catalog, atomically: true, encoding: .utf8)

        let r = try w.run(["download", "h2"], catalog: catalog, env: ["EXTENTOS_CA_FILE": dir + "/cert.pem"])
        #expect(r.status == 0, "\(r)")
        w.expectInstalledMatches("h2", source: dir + "/www/m")
        let log = ((try? String(contentsOfFile: dir + "/logs/access.log", encoding: .utf8)) ?? "").split(separator: "\n")
        let fields = log.map { $0.split(separator: " ").map(String.init) }
        #expect(fields.count == 24 && fields.allSatisfy { $0.count == 4 && $0[1] == "200" && $0[2] == "HTTP/2.0" }, "\(log)")
        #expect(Set(fields.compactMap { $0.last }).count == 1, "multiplexed on one connection: \(log)")
    }
}
