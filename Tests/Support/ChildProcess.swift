// Test-only support shared by the test targets: finding the programs SwiftPM built next to
// the test bundle, and running a program to completion with its output captured.
import Foundation

/// A program SwiftPM built into the same products folder as the test runner.
public enum BuiltProduct {
    /// The path of the built executable `name`, or nil when it is not there.
    public static func path(_ name: String) -> String? {
        var starts = [Bundle.main.bundleURL, Bundle.main.executableURL?.deletingLastPathComponent()]
        if let argv0 = CommandLine.arguments.first {
            starts.append(URL(fileURLWithPath: argv0).resolvingSymlinksInPath().deletingLastPathComponent())
        }
        starts += Bundle.allBundles.map(\.bundleURL)
        for case let start? in starts {
            var dir = start.standardizedFileURL
            for _ in 0..<6 {
                let candidate = dir.appendingPathComponent(name).path
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate) {
                    return candidate
                }
                let parent = dir.deletingLastPathComponent()
                if parent.path == dir.path { break }
                dir = parent
            }
        }
        return nil
    }
}

/// How a program ended and what it printed.
public struct ChildResult: CustomStringConvertible, Sendable {
    public var status: Int32
    /// Killed by a signal (`status` is then the signal number).
    public var signaled: Bool
    /// Stopped by us after the timeout.
    public var timedOut: Bool
    public var stdout: String
    public var stderr: String

    public var description: String {
        "exit \(status)\(signaled ? " (signal)" : "")\(timedOut ? " (timed out)" : "")\nstdout: \(stdout)\nstderr: \(stderr)"
    }
}

public enum ChildProcess {
    /// Runs `executable` to completion (at most `timeout` seconds, then SIGTERM). Output goes
    /// through files in `ioDirectory` (default: the temporary folder), so a chatty child
    /// never blocks on a full pipe.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                           currentDirectory: String? = nil, ioDirectory: String? = nil,
                           timeout: TimeInterval = 120) throws -> ChildResult {
        let io = ioDirectory ?? NSTemporaryDirectory()
        try FileManager.default.createDirectory(atPath: io, withIntermediateDirectories: true)
        let id = UUID().uuidString
        let outPath = io + "/\(id).out"
        let errPath = io + "/\(id).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        guard let outHandle = FileHandle(forWritingAtPath: outPath), let errHandle = FileHandle(forWritingAtPath: errPath) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: io])
        }
        let process = Subprocess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = outHandle
        process.standardError = errHandle
        try SpawnGate.spawn { try process.run() }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        let timedOut = process.isRunning
        if timedOut {
            // SIGTERM, then SIGKILL for a child that ignores it (one stuck in flock, say).
            process.terminate()
            let grace = Date().addingTimeInterval(5)
            while process.isRunning && Date() < grace { Thread.sleep(forTimeInterval: 0.01) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        try outHandle.close()
        try errHandle.close()
        return ChildResult(status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal,
                           timedOut: timedOut,
                           stdout: String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self),
                           stderr: String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self))
    }
}
