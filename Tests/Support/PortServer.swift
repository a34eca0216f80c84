// Test-only: a helper server process (the Python fault and TLS servers in Tests/Tools)
// that prints "PORT <n>" as its first line and ends when its stdin closes.
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One running helper server; `stop()` (or deinit) ends it. Closing its stdin also ends
/// it, so a crashed test run leaves no server behind.
public final class PortServer: Sendable {
    public let port: Int
    private let process: Subprocess
    private let stdinPipe: Pipe
    private let stopped = Mutex(false)

    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs `python3 script arguments…` and waits for its "PORT <n>" line.
    public init(python script: String, _ arguments: [String] = []) throws {
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
        var line: [UInt8] = []
        let fd = out.fileHandleForReading.fileDescriptor
        var byte: UInt8 = 0
        while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            process.waitUntilExit()
            let name = URL(fileURLWithPath: script).lastPathComponent
            throw StartFailure(description: "\(name) did not print its port (got '\(text)'), arguments \(arguments)")
        }
        self.port = port
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
}
