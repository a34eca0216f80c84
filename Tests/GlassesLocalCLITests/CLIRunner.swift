import Foundation
import GlassesTestSupport
import Testing

/// Where the built `glasses-local` lives: `$GLASSES_LOCAL_BIN`, else next to the test
/// bundle (SwiftPM puts executables and the test runner in the same products folder).
enum CLIBinary {
    static let path: String? = locate()

    private static func locate() -> String? {
        if let override = ProcessInfo.processInfo.environment["GLASSES_LOCAL_BIN"], !override.isEmpty {
            return override
        }
        return BuiltProduct.path("glasses-local")
    }
}

/// The package checkout, found from this file's location.
enum PackageRoot {
    static func path(file: String = #filePath) -> String {
        URL(fileURLWithPath: file)
            .deletingLastPathComponent()   // GlassesLocalCLITests
            .deletingLastPathComponent()   // Tests
            .deletingLastPathComponent()   // package root
            .path
    }

    static var bundledCatalog: String { path() + "/Catalog/catalog.json" }
}

/// What one run of the binary produced.
struct CLIResult: CustomStringConvertible {
    var arguments: [String]
    var status: Int32
    var stdout: String
    var stderr: String

    var stdoutLines: [String] { lines(stdout) }
    var stderrLines: [String] { lines(stderr) }

    private func lines(_ text: String) -> [String] {
        var result = text.components(separatedBy: "\n")
        if result.last == "" { result.removeLast() }
        return result
    }

    /// The whole of stdout parsed as exactly one JSON document (fails on mixed text).
    func json() throws -> Any {
        let data = Data(stdout.utf8)
        do {
            return try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            Issue.record("stdout of `glasses-local \(arguments.joined(separator: " "))` is not one JSON document: \(error)\n---\n\(stdout.prefix(2000))")
            throw error
        }
    }

    /// The whole of stdout as one JSON object.
    func jsonObject(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let value = try json()
        return try #require(value as? [String: Any], "stdout is JSON but not an object: \(stdout.prefix(500))",
                            sourceLocation: sourceLocation)
    }

    var description: String {
        "glasses-local \(arguments.joined(separator: " ")) → exit \(status)\n--- stdout\n\(stdout.prefix(3000))\n--- stderr\n\(stderr.prefix(3000))"
    }
}

/// A per-test temporary folder holding the store, HOME and any fixtures; removed by `remove()`.
struct Sandbox {
    let root: String
    var store: String { root + "/store" }

    init() throws {
        let base = FileManager.default.temporaryDirectory.path
        root = (base.hasSuffix("/") ? base : base + "/") + "glasses-local-cli-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root + "/home", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/io", withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: root)
    }

    /// A controlled environment: nothing inherited but PATH; the store is this sandbox's.
    func environment(_ extra: [String: String]) -> [String: String] {
        var env: [String: String] = [
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin",
            "HOME": root + "/home",
            "XDG_DATA_HOME": root + "/home/.local/share",
            "LANG": "C.UTF-8",
            "EXTENTOS_MODELS_DIR": store,
        ]
        for (key, value) in extra { env[key] = value }
        return env
    }

    /// Runs `glasses-local` with `arguments` and waits (at most `timeout` seconds).
    func run(_ arguments: [String], env extra: [String: String] = [:], timeout: TimeInterval = 120,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        let binary = try #require(CLIBinary.path, "glasses-local binary not found next to the test bundle; set GLASSES_LOCAL_BIN",
                                  sourceLocation: sourceLocation)
        return try Self.runProcess(binary, arguments, environment: environment(extra), ioDirectory: root + "/io",
                                   timeout: timeout, sourceLocation: sourceLocation)
    }

    /// Runs any program, capturing stdout and stderr through files (no pipe-buffer deadlocks).
    static func runProcess(_ executable: String, _ arguments: [String], environment: [String: String],
                           ioDirectory: String, currentDirectory: String? = nil, timeout: TimeInterval = 120,
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        let r = try ChildProcess.run(executable, arguments, environment: environment, currentDirectory: currentDirectory,
                                     ioDirectory: ioDirectory, timeout: timeout)
        if r.timedOut {
            Issue.record("`\(executable) \(arguments.joined(separator: " "))` did not finish in \(Int(timeout)) s",
                         sourceLocation: sourceLocation)
        }
        return CLIResult(arguments: arguments, status: r.status, stdout: r.stdout, stderr: r.stderr)
    }

    /// Writes `text` to `name` inside the sandbox and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        try write(name, Data(text.utf8))
    }

    @discardableResult
    func write(_ name: String, _ data: Data) throws -> String {
        let path = root + "/" + name
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent,
                                                withIntermediateDirectories: true)
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }
}

/// Small catalogs written by tests.
enum Fixtures {
    /// A one-model catalog; `files` are JSON fragments.
    static func catalog(version: Int = 1, id: String = "huge-model",
                        files: String = #"{"path": "weights.bin", "size": 1099511627776, "sha256": null}"#,
                        baseURL: String = "https://models.example.com/huge/") -> String {
        """
        {
          "schemaVersion": 1,
          "catalogVersion": \(version),
          "generatedAt": "2026-01-01T00:00:00Z",
          "models": [
            {
              "id": "\(id)",
              "kind": "llm",
              "displayName": "Huge test model",
              "requiredMb": 100,
              "autoEligible": false,
              "files": [\(files)],
              "sources": [{"type": "files", "baseURL": "\(baseURL)"}]
            }
          ]
        }
        """
    }

    static let ladderIds = ["local-qwen3-0.6b", "local-qwen25-1.5b", "local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b"]
    static let allIds = ladderIds + ["kokoro-en-v0_19"]
}

extension Dictionary where Key == String, Value == Any {
    /// The sorted key set, for shape checks.
    var keySet: Set<String> { Set(keys) }
}

/// JSON re-serialised with sorted keys, after dropping keys whose values drift between runs.
func canonicalJSON(_ value: Any, dropping volatile: Set<String>) throws -> Data {
    func strip(_ value: Any) -> Any {
        if let object = value as? [String: Any] {
            var out: [String: Any] = [:]
            for (key, item) in object where !volatile.contains(key) { out[key] = strip(item) }
            return out
        }
        if let array = value as? [Any] { return array.map(strip) }
        return value
    }
    return try JSONSerialization.data(withJSONObject: strip(value), options: [.sortedKeys])
}
