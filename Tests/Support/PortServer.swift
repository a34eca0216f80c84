// Test-only: a helper server process (the Python fault, Hub and TLS servers in Tests/Tools)
// that prints "PORT <n>" as its first line (and "<NAME> <n>" for any further port) and ends
// when its stdin closes; `request` asks its control endpoints.
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One running helper server; `stop()` (or deinit) ends it. Closing its stdin also ends
/// it, so a crashed test run leaves no server behind.
public final class PortServer: Sendable {
    public let port: Int
    /// The further ports it named on the lines after the first ("CDN 41234" → ["CDN": 41234]).
    public let ports: [String: Int]
    private let process: Subprocess
    private let stdinPipe: Pipe
    private let stopped = Mutex(false)

    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A control request that did not get an answer.
    public struct RequestFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `python3 script arguments…` and waits for its "PORT <n>" line, then for one
    /// "<name> <n>" line for each of `names`.
    public init(python script: String, _ arguments: [String] = [], alsoPorts names: [String] = []) throws {
        let process = Subprocess()
        self.process = process
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script] + arguments
        stdinPipe = Pipe()
        let out = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try SpawnGate.spawn { try process.run() }
        // The first stdout line is "PORT <n>" (EOF first: the script failed to start).
        let fd = out.fileHandleForReading.fileDescriptor
        func portLine(_ name: String) throws -> Int {
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
            let text = String(decoding: line, as: UTF8.self)
            guard text.hasPrefix(name + " "), let port = Int(text.dropFirst(name.count + 1)) else {
                process.terminate()
                process.waitUntilExit()
                let scriptName = URL(fileURLWithPath: script).lastPathComponent
                throw StartFailure(description: "\(scriptName) did not print its \(name) port (got '\(text)'), arguments \(arguments)")
            }
            return port
        }
        port = try portLine("PORT")
        var ports: [String: Int] = [:]
        for name in names { ports[name] = try portLine(name) }
        self.ports = ports
    }

    deinit { stop() }

    /// EOF on its stdin and SIGTERM; SIGKILL if it is still there after 5 s.
    public func stop() {
        guard stopped.withLock({ was in defer { was = true }; return !was }) else { return }
        try? stdinPipe.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// A minimal blocking HTTP/1.1 exchange with the server over loopback (Connection:
    /// close), for its control endpoints: the status and the body.
    public func request(_ method: String, _ path: String, body: [UInt8] = []) throws -> (status: Int, body: [UInt8]) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RequestFailure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw RequestFailure(description: "connect 127.0.0.1:\(port): errno \(errno)") }
        let head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.count)\r\n\r\n"
        let message = Array(head.utf8) + body
        var offset = 0
        while offset < message.count {
            let n = message[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw RequestFailure(description: "send to 127.0.0.1:\(port): errno \(errno)") }
            offset += n
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            response += buffer[0..<n]
        }
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let split = (0...max(0, response.count - 4)).first(where: { Array(response[$0..<min($0 + 4, response.count)]) == separator })
        else { throw RequestFailure(description: "malformed answer to \(method) \(path)") }
        let statusLine = String(decoding: response[0..<split], as: UTF8.self).split(separator: " ")
        let status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
        return (status, Array(response[(split + 4)...]))
    }
}

/// One request as a helper server logged it (faultserver.py's `/_stats`, hubserver.py's
/// `/_log`): what it asked for and what it was answered. The fields a server does not log
/// are nil.
public struct ServedRequest: Decodable, Sendable {
    /// hubserver.py: which of its servers answered, "origin" or "cdn".
    public var server: String?
    public var method: String?
    /// The path, without the query.
    public var path: String?
    public var query: String?
    public var status: Int?
    public var range: String?
    public var ifRange: String?
    /// The `Authorization` header as the server received it (nil: none).
    public var authorization: String?
    /// A redirect's `Location`.
    public var location: String?
    /// Body bytes sent.
    public var sent: Int64
    /// Monotonic seconds on the server's clock.
    public var start: Double
    public var end: Double?

    enum CodingKeys: String, CodingKey {
        case server, method, path, query, status, range, authorization, location, sent, start, end
        case ifRange = "if_range"
    }
}
