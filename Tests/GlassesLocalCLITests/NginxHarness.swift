import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A harness failure (server did not start, a tool failed) with what to look at.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

extension Disk {
    /// `count` bytes from /dev/urandom.
    static func randomBytes(_ count: Int) throws -> Data {
        guard let handle = FileHandle(forReadingAtPath: "/dev/urandom") else { throw HarnessError("cannot open /dev/urandom") }
        defer { try? handle.close() }
        var data = Data()
        while data.count < count {
            guard let chunk = try handle.read(upToCount: count - data.count), !chunk.isEmpty else {
                throw HarnessError("short read from /dev/urandom")
            }
            data.append(chunk)
        }
        return data
    }
}

/// One request as nginx logged it (`$request|$status|$http_range|$http_if_range|$body_bytes_sent`).
struct AccessEntry: CustomStringConvertible {
    var method: String
    var path: String
    var status: Int
    /// The `Range` header, nil when absent.
    var range: String?
    /// The `If-Range` header, nil when absent (nginx logs `"` as `\x22`).
    var ifRange: String?
    var bytesSent: Int64

    /// `N` of a `Range: bytes=N-` header.
    var rangeStart: Int64? {
        guard let range, range.hasPrefix("bytes="), range.hasSuffix("-") else { return nil }
        return Int64(range.dropFirst("bytes=".count).dropLast())
    }

    var description: String {
        "\(method) \(path) \(status) range=\(range ?? "-") if-range=\(ifRange ?? "-") sent=\(bytesSent)"
    }
}

/// A real nginx on 127.0.0.1 serving a mirror folder, with its own config, logs and temp
/// folders inside the test's folder. `/` serves at full speed, `/slow/` the same files
/// at `slowRate` bytes a second per connection (nginx `limit_rate`).
///
/// Runs in the foreground (`daemon off; master_process off;`): one process, so stopping
/// it is one signal and nothing is left listening.
final class NginxServer {
    let root: String
    let mirror: String
    let slowRate: Int
    private(set) var port: UInt16 = 0
    private var process: Subprocess?
    private var accessLogPath: String { root + "/logs/access.log" }
    private var errorLogPath: String { root + "/logs/error.log" }

    /// Starts nginx; the mirror folder is `<root>/mirror`.
    init(root: String, slowRate: Int = 512 * 1024, sourceLocation: SourceLocation = #_sourceLocation) throws {
        self.root = root
        self.mirror = root + "/mirror"
        self.slowRate = slowRate
        let fm = FileManager.default
        for dir in ["mirror", "logs", "tmp", "conf"] {
            try fm.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
        }
        let binary = try #require(Self.binary, "nginx not found (Scripts/bootstrap installs nginx-light)", sourceLocation: sourceLocation)
        // A port freed a moment ago can be taken by someone else: retry with a new one.
        var lastError = ""
        for _ in 0..<5 {
            port = try Self.freePort()
            let conf = root + "/conf/nginx.conf"
            try config().write(toFile: conf, atomically: true, encoding: .utf8)
            let p = Subprocess()
            p.executableURL = URL(fileURLWithPath: binary)
            p.arguments = ["-c", conf, "-p", root + "/", "-e", errorLogPath]
            p.standardInput = FileHandle.nullDevice
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try SpawnGate.spawn { try p.run() }
            let deadline = Date().addingTimeInterval(10)
            while p.isRunning && Date() < deadline && !Self.accepts(port: port) {
                Thread.sleep(forTimeInterval: 0.02)
            }
            if p.isRunning && Self.accepts(port: port) {
                process = p
                return
            }
            if p.isRunning { kill(p.processIdentifier, SIGKILL) }
            p.waitUntilExit()
            lastError = (try? String(contentsOfFile: errorLogPath, encoding: .utf8)) ?? ""
        }
        throw HarnessError("nginx did not start on 127.0.0.1:\(port):\n\(lastError.suffix(2000))")
    }

    deinit { stop() }

    /// Stops nginx. A single-process nginx blocks SIGTERM between events, and has no
    /// workers or buffered logs to lose, so it gets SIGKILL. Safe to call twice.
    func stop() {
        guard let p = process else { return }
        process = nil
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
    }

    /// `http://127.0.0.1:<port>`.
    var origin: String { "http://127.0.0.1:\(port)" }

    /// The files URL of a mirror folder: `http://127.0.0.1:<port>[/slow]/<folder>/`.
    func baseURL(_ folder: String, slow: Bool = false) -> String {
        origin + (slow ? "/slow/" : "/") + folder + "/"
    }

    /// Every request logged so far.
    func accessLog() -> [AccessEntry] {
        let text = (try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let parts = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 5 else { return nil }
            let request = parts[0].split(separator: " ").map(String.init)
            guard request.count >= 2, let status = Int(parts[1]), let sent = Int64(parts[4]) else { return nil }
            return AccessEntry(method: request[0], path: request[1], status: status,
                               range: parts[2] == "-" ? nil : parts[2], ifRange: parts[3] == "-" ? nil : parts[3],
                               bytesSent: sent)
        }
    }

    /// Requests whose path ends with `/<suffix>` (e.g. `m1/a.bin`, matching `/m1/a.bin` and `/slow/m1/a.bin`).
    func requests(for suffix: String) -> [AccessEntry] {
        accessLog().filter { $0.path.hasSuffix("/" + suffix) }
    }

    /// Forgets the log so far (nginx keeps appending to the same open file).
    func clearLog() {
        _ = truncate(accessLogPath, 0)
    }

    /// Writes `size` random bytes to `<mirror>/<path>` and returns them.
    @discardableResult
    func addRandomFile(_ path: String, size: Int) throws -> Data {
        let data = try Disk.randomBytes(size)
        try writeMirrorFile(path, data)
        return data
    }

    func writeMirrorFile(_ path: String, _ data: Data) throws {
        let full = mirror + "/" + path
        try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: full))
    }

    private func config() -> String {
        // `user` is only allowed when started as root; the single process stays who we are.
        """
        daemon off;
        master_process off;
        worker_processes 1;
        pid \(root)/nginx.pid;
        error_log \(errorLogPath) warn;
        events { worker_connections 512; }
        http {
            default_type application/octet-stream;
            sendfile on;
            keepalive_timeout 5;
            client_body_temp_path \(root)/tmp/body;
            proxy_temp_path \(root)/tmp/proxy;
            fastcgi_temp_path \(root)/tmp/fastcgi;
            uwsgi_temp_path \(root)/tmp/uwsgi;
            scgi_temp_path \(root)/tmp/scgi;
            log_format reliability '$request|$status|$http_range|$http_if_range|$body_bytes_sent';
            access_log \(accessLogPath) reliability;
            server {
                listen 127.0.0.1:\(port);
                root \(mirror);
                location /slow/ {
                    alias \(mirror)/;
                    limit_rate \(slowRate);
                }
            }
        }
        """
    }

    static let binary: String? = {
        var candidates = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx", "/usr/local/bin/nginx"]
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append(dir + "/nginx")
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// A port the kernel just handed out for 127.0.0.1 (bound to 0, read back, closed).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, len) == 0 && getsockname(fd, sa, &len) == 0
            }
        }
        guard bound else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return UInt16(bigEndian: addr.sin_port)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                connect(fd, sa, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
