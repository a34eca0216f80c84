// Starts Tests/Tools/faultserver.py (a fault-injecting HTTP server on 127.0.0.1) for the
// transfer tests, configures its paths, and reads its per-path request statistics.
// Also computes the server's deterministic file contents on the Swift side, so the
// expected bytes and SHA-256 never come from the server under test.
import Foundation
import GlassesTestSupport
import Synchronization
import Testing
@testable import LocalModelKit

#if canImport(Glibc)
import Glibc
#endif

/// One running fault server; `stop()` (or deinit) ends it. Closing its stdin also ends it,
/// so a crashed test run leaves no server behind.
final class FaultServer: Sendable {
    private let server: PortServer
    var port: Int { server.port }

    var origin: String { "http://127.0.0.1:\(port)" }

    /// Tests/Tools/faultserver.py, found from this file's path.
    static let scriptPath: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tools/faultserver.py").path
    }()

    /// Starts a server. Python's start-up is waited for on a thread of its own, so tests
    /// running in parallel do not hold the few threads of Swift's cooperative pool.
    static func start() async throws -> FaultServer {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try FaultServer() }) }.start()
        }
    }

    private init() throws {
        server = try PortServer(python: Self.scriptPath)
    }

    /// Ends the server: EOF on its stdin and SIGTERM, SIGKILL if it is still there after 5 s.
    func stop() { server.stop() }

    // MARK: Control

    /// Configures `path` (replacing its previous configuration and fault counters).
    /// `faults` uses the keys documented in faultserver.py.
    func configure(_ path: String, size: Int, seed: Int, _ faults: [String: any Sendable] = [:]) throws {
        var spec: [String: Any] = ["path": path, "size": size, "seed": seed]
        for (key, value) in faults { spec[key] = value }
        let body = try JSONSerialization.data(withJSONObject: spec)
        let (status, _) = try request("POST", "/_fault", body: [UInt8](body))
        guard status == 200 else { throw SystemError(message: "POST /_fault answered \(status)") }
    }

    /// Every path's statistics.
    func stats() throws -> [String: PathStats] {
        let (status, body) = try request("GET", "/_stats")
        guard status == 200 else { throw SystemError(message: "GET /_stats answered \(status)") }
        return try JSONDecoder().decode([String: PathStats].self, from: Data(body))
    }

    /// One path's statistics (empty when it was never requested).
    func stats(_ path: String) throws -> PathStats {
        try stats()[path] ?? PathStats(requests: 0, sent: 0, log: [])
    }

    struct PathStats: Decodable, Sendable {
        var requests: Int
        /// Body bytes sent, all requests together.
        var sent: Int64
        var log: [ServedRequest]
    }

    /// TCP connections the server accepted so far, this question's own included.
    func connections() throws -> Int {
        let (status, body) = try request("GET", "/_connections")
        guard status == 200 else { throw SystemError(message: "GET /_connections answered \(status)") }
        struct Count: Decodable { var connections: Int }
        return try JSONDecoder().decode(Count.self, from: Data(body)).connections
    }

    /// A control request (PortServer's loopback exchange).
    private func request(_ method: String, _ path: String, body: [UInt8] = []) throws -> (Int, [UInt8]) {
        try server.request(method, path, body: body)
    }
}

/// The server's file contents (faultserver.py, "Content"): with T = "<seed>:<version>:" and
/// P = SHA-256(T + "p:<i>") for i in 0..<128 (4096 bytes), chunk j is SHA-256(T + "c:<j>")
/// followed by bytes 32..<4096 of P rotated left by (j * 257) % 4096.
enum FaultContent {
    static func bytes(seed: Int, version: Int = 1, size: Int) throws -> [UInt8] {
        let tag = "\(seed):\(version):"
        var pattern: [UInt8] = []
        for i in 0..<128 { pattern += try digest(tag + "p:\(i)") }
        var out: [UInt8] = []
        out.reserveCapacity(size + 4096)
        var chunk = 0
        while out.count < size {
            let r = (chunk * 257) % 4096
            let rotated = Array(pattern[r...]) + Array(pattern[..<r])
            out += try digest(tag + "c:\(chunk)")
            out += rotated[32...]
            chunk += 1
        }
        return Array(out.prefix(size))
    }

    /// SHA-256 of `text`, as 32 bytes.
    private static func digest(_ text: String) throws -> [UInt8] {
        let hasher = try SHA256Hasher()
        hasher.update(Array(text.utf8))
        let hex = Array(try hasher.finalize().utf8)
        func value(_ c: UInt8) -> UInt8 { c <= UInt8(ascii: "9") ? c - UInt8(ascii: "0") : c - UInt8(ascii: "a") + 10 }
        return stride(from: 0, to: hex.count, by: 2).map { value(hex[$0]) << 4 | value(hex[$0 + 1]) }
    }

    static func sha256(_ bytes: [UInt8]) throws -> String {
        let hasher = try SHA256Hasher()
        hasher.update(bytes)
        return try hasher.finalize()
    }

    /// The strong ETag the server gives a version of a file.
    static func etag(seed: Int, size: Int, version: Int = 1) -> String { "\"s\(seed)-n\(size)-v\(version)\"" }

}

/// Collects a download's events from any thread.
final class TransferEventLog: Sendable {
    private let events = Mutex<[DownloadEvent]>([])

    func append(_ event: DownloadEvent) { events.withLock { $0.append(event) } }
    var all: [DownloadEvent] { events.withLock { $0 } }

    var stalls: Int { all.filter { if case .stall = $0 { true } else { false } }.count }
    var retries: [(cause: String, delay: Double)] {
        all.compactMap { if case let .retry(_, _, cause, delay) = $0 { (cause, delay) } else { nil } }
    }
    var restarts: [String] { all.compactMap { if case let .restarted(_, reason) = $0 { reason } else { nil } } }
    var fractions: [Double] { all.compactMap { if case let .progress(_, _, fraction, _) = $0 { fraction } else { nil } } }
}
