import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `glasses-local` process left running: its output goes to files, so a test can wait
/// for a line on stderr (`HOLD <point>`), send it a signal, or `kill -9` it.
final class CLIProcess {
    let arguments: [String]
    private let process: Subprocess
    private let outPath: String
    private let errPath: String
    private let outHandle: FileHandle
    private let errHandle: FileHandle
    private var result: CLIResult?

    init(binary: String, arguments: [String], environment: [String: String], ioDirectory: String,
         currentDirectory: String) throws {
        self.arguments = arguments
        let id = UUID().uuidString
        outPath = ioDirectory + "/\(id).out"
        errPath = ioDirectory + "/\(id).err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        guard let out = FileHandle(forWritingAtPath: outPath), let err = FileHandle(forWritingAtPath: errPath) else {
            throw HarnessError("cannot open \(outPath)")
        }
        outHandle = out
        errHandle = err
        process = Subprocess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        try SpawnGate.spawn { try process.run() }
    }

    /// A process still running when its test ends (a failed test) is killed.
    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? outHandle.close()
        try? errHandle.close()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var stderrSoFar: String { String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self) }
    var stdoutSoFar: String { String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self) }

    /// Waits until stderr contains `text`; false when the process ended or time ran out first.
    func waitForStderr(_ text: String, timeout: TimeInterval = 60) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if stderrSoFar.contains(text) { return true }
            if !process.isRunning { return stderrSoFar.contains(text) }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return false
    }

    /// Waits until `condition` holds; false when the process ended or time ran out first.
    func waitUntil(timeout: TimeInterval = 60, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            if !process.isRunning { return condition() }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return false
    }

    func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Waits for the exit (killing it with SIGKILL after `timeout`, which is recorded as an issue).
    @discardableResult
    func wait(timeout: TimeInterval = 120, sourceLocation: SourceLocation = #_sourceLocation) -> CLIResult {
        if let result { return result }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("`glasses-local \(arguments.joined(separator: " "))` did not finish in \(Int(timeout)) s\n\(stderrSoFar.suffix(2000))",
                         sourceLocation: sourceLocation)
        }
        process.waitUntilExit()
        let r = CLIResult(arguments: arguments, status: process.terminationStatus, stdout: stdoutSoFar, stderr: stderrSoFar)
        result = r
        return r
    }

    /// `kill -9`, then wait for it; true when the kernel reports death by SIGKILL.
    @discardableResult
    func killNine() -> Bool {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        _ = wait()
        return process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }
}

/// One test's world: a sandbox folder, a real nginx serving `<root>/nginx/mirror`, a
/// store, catalogs, and the built `glasses-local` run against them.
///
/// Layout: `<root>/outer/store` is the store (so `<root>/outer` is its parent, watched by
/// the archive tests), `<root>/cwd` the commands' working folder, `<root>/catalogs`.
final class World {
    let sandbox: Sandbox
    let nginx: NginxServer
    var store: String
    var root: String { sandbox.root }
    var outer: String { root + "/outer" }
    var cwd: String { root + "/cwd" }

    init(slowRate: Int = 512 * 1024) throws {
        sandbox = try Sandbox()
        for dir in ["outer", "cwd", "catalogs"] {
            try FileManager.default.createDirectory(atPath: sandbox.root + "/" + dir, withIntermediateDirectories: true)
        }
        store = sandbox.root + "/outer/store"
        do {
            nginx = try NginxServer(root: sandbox.root + "/nginx", slowRate: slowRate)
        } catch {
            sandbox.remove()
            throw error
        }
    }

    /// Stops nginx and removes the folder. Call from `defer`.
    func remove() {
        nginx.stop()
        sandbox.remove()
    }

    var binary: String {
        get throws { try #require(CLIBinary.path, "glasses-local binary not found next to the test bundle; set GLASSES_LOCAL_BIN") }
    }

    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var env = sandbox.environment(extra)
        env["EXTENTOS_MODELS_DIR"] = store
        return env
    }

    /// `glasses-local --catalog <catalog> --store <store> <arguments>`, waited for.
    func run(_ arguments: [String], catalog: String?, env: [String: String] = [:], timeout: TimeInterval = 120,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        try Sandbox.runProcess(try binary, globals(catalog) + arguments, environment: environment(env), ioDirectory: root + "/io",
                               currentDirectory: cwd, timeout: timeout, sourceLocation: sourceLocation)
    }

    /// `run`, with the process's clock `offset` ahead (libfaketime, e.g. "+2h"): what happens
    /// later, without waiting for it.
    func run(_ arguments: [String], catalog: String?, env: [String: String] = [:], clockAhead offset: String,
             sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        try Sandbox.runProcess("/usr/bin/faketime", ["-f", offset, try binary] + globals(catalog) + arguments,
                               environment: environment(env), ioDirectory: root + "/io", currentDirectory: cwd,
                               sourceLocation: sourceLocation)
    }

    /// The same, left running.
    func start(_ arguments: [String], catalog: String?, env: [String: String] = [:]) throws -> CLIProcess {
        try CLIProcess(binary: try binary, arguments: globals(catalog) + arguments, environment: environment(env),
                       ioDirectory: root + "/io", currentDirectory: cwd)
    }

    /// The same, stopped before the command runs: a shell stops itself (`SIGSTOP`), and on
    /// `SIGCONT` `exec`s the command, which keeps its pid. So the test knows the pid the
    /// command will have and can prepare the world for it before sending `SIGCONT`.
    func startStopped(_ arguments: [String], catalog: String?, env: [String: String] = [:],
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIProcess {
        let p = try CLIProcess(binary: "/bin/sh", arguments: ["-c", "kill -STOP $$ && exec \"$0\" \"$@\"", try binary] + globals(catalog) + arguments,
                               environment: environment(env), ioDirectory: root + "/io", currentDirectory: cwd)
        try #require(p.waitUntil(timeout: 60) { DiskFullTests.processState(p.pid) == "T" }, "the shell stopped itself: \(p.wait())",
                     sourceLocation: sourceLocation)
        return p
    }

    private func globals(_ catalog: String?) -> [String] {
        (catalog.map { ["--catalog", $0] } ?? []) + ["--store", store]
    }

    // MARK: Mirror and catalogs

    /// Fills `<mirror>/<folder>/` with random files; returns their contents by path.
    @discardableResult
    func addModel(_ folder: String, files: [(String, Int)]) throws -> [String: Data] {
        var out: [String: Data] = [:]
        for (path, size) in files { out[path] = try nginx.addRandomFile(folder + "/" + path, size: size) }
        return out
    }

    /// A catalog made by `glasses-local catalog hash <mirror>/<folder> --id <id> --base-url <baseURL>`.
    func filesCatalog(_ folder: String, id: String, baseURL: String? = nil, slow: Bool = false,
                      sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let base = baseURL ?? nginx.baseURL(folder, slow: slow)
        let r = try run(["catalog", "hash", nginx.mirror + "/" + folder, "--id", id, "--base-url", base], catalog: nil,
                        sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let path = root + "/catalogs/\(id)-\(slow ? "slow" : "fast")-\(UUID().uuidString.prefix(8)).json"
        try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Two models in one catalog (for concurrent downloads of different models).
    func mergedCatalog(_ catalogs: [String]) throws -> String {
        var models: [Any] = []
        var first: [String: Any] = [:]
        for path in catalogs {
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            if first.isEmpty { first = doc }
            models += try #require(doc["models"] as? [Any])
        }
        first["models"] = models
        let path = root + "/catalogs/merged-\(UUID().uuidString.prefix(8)).json"
        try JSONSerialization.data(withJSONObject: first, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The `files` list of a folder, from `glasses-local catalog hash DIR`.
    func fileEntries(of directory: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let r = try run(["catalog", "hash", directory], catalog: nil, sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let doc = try r.jsonObject(sourceLocation: sourceLocation)
        return try #require(doc["files"] as? [[String: Any]], "\(r)", sourceLocation: sourceLocation)
    }

    /// A catalog whose only source is the archive at `<mirror>/<archivePath>` (its real size
    /// and SHA-256), unpacking with `stripComponents` to `files`.
    func archiveCatalog(id: String, archivePath: String, files: [[String: Any]], stripComponents: Int = 1,
                        slow: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let full = nginx.mirror + "/" + archivePath
        let size = try #require((try FileManager.default.attributesOfItem(atPath: full)[.size] as? NSNumber)?.int64Value,
                                sourceLocation: sourceLocation)
        let sha = try Self.sha256sum(full)
        let doc: [String: Any] = [
            "schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-01-01T00:00:00Z",
            "models": [[
                "id": id, "kind": "llm", "displayName": id, "requiredMb": 100, "autoEligible": false,
                "files": files,
                "sources": [["type": "archive", "url": nginx.origin + (slow ? "/slow/" : "/") + archivePath,
                             "format": "tar.bz2", "size": size, "sha256": sha, "stripComponents": stripComponents]],
            ]],
        ]
        let path = root + "/catalogs/\(id)-archive-\(UUID().uuidString.prefix(8)).json"
        try JSONSerialization.data(withJSONObject: doc, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// SHA-256 by coreutils, independent of the code under test.
    static func sha256sum(_ path: String) throws -> String {
        let r = try tool("/usr/bin/env", ["sha256sum", path])
        guard r.status == 0, let hex = r.stdout.split(separator: " ").first, hex.count == 64 else {
            throw HarnessError("sha256sum \(path) failed: \(r)")
        }
        return String(hex)
    }

    /// Runs a system tool (tar, python3, mount, dd) and returns what it did.
    static func tool(_ executable: String, _ arguments: [String], currentDirectory: String? = nil,
                     timeout: TimeInterval = 120) throws -> CLIResult {
        let io = FileManager.default.temporaryDirectory.path + "/glasses-local-tool-io"
        try FileManager.default.createDirectory(atPath: io, withIntermediateDirectories: true)
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = (env["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin:/usr/bin:/bin"
        env["LC_ALL"] = "C"
        return try Sandbox.runProcess(executable, arguments, environment: env, ioDirectory: io,
                                      currentDirectory: currentDirectory, timeout: timeout)
    }

    // MARK: Store state

    var partialRoot: String { store + "/.partial" }
    var stagingRoot: String { store + "/.staging" }
    func installFolder(_ id: String) -> String { store + "/" + id }

    /// `list --json`'s `isInstalled` for `id`.
    func isInstalled(_ id: String, catalog: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let r = try run(["list", "--json"], catalog: catalog, sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let models = try #require(try r.jsonObject(sourceLocation: sourceLocation)["models"] as? [[String: Any]], "\(r)",
                                  sourceLocation: sourceLocation)
        let model = try #require(models.first { $0["id"] as? String == id }, "\(id) is not in list --json\n\(r)",
                                 sourceLocation: sourceLocation)
        return try #require(model["isInstalled"] as? Bool, "\(r)", sourceLocation: sourceLocation)
    }

    /// P1 as a user sees it, after start-up repair: either installed (list says so, the
    /// folder is there, `verify` exits 0) or absent (list says not installed, no folder).
    /// - Returns: whether the model is installed.
    @discardableResult
    func expectAllOrNothing(_ id: String, catalog: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let installed = try isInstalled(id, catalog: catalog, sourceLocation: sourceLocation)
        let folder = Disk.isDirectory(installFolder(id))
        if installed {
            #expect(folder, "list says \(id) is installed but \(installFolder(id)) is missing", sourceLocation: sourceLocation)
            let v = try run(["verify", id], catalog: catalog, sourceLocation: sourceLocation)
            #expect(v.status == 0, "an installed model must verify\n\(v)", sourceLocation: sourceLocation)
        } else {
            #expect(!folder, "list says \(id) is not installed but \(installFolder(id)) exists: \(Disk.tree(installFolder(id)))",
                    sourceLocation: sourceLocation)
            let v = try run(["verify", id], catalog: catalog, sourceLocation: sourceLocation)
            #expect(v.status == 1 && v.stderr.contains("not installed"), "\(v)", sourceLocation: sourceLocation)
        }
        return installed
    }

    /// `doctor --json` says `records.integrityCheck == "ok"`.
    func expectRecordsIntact(catalog: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try run(["doctor", "--json"], catalog: catalog, sourceLocation: sourceLocation)
        let doc = try r.jsonObject(sourceLocation: sourceLocation)
        let records = try #require(doc["records"] as? [String: Any], "\(r)", sourceLocation: sourceLocation)
        #expect(records["integrityCheck"] as? String == "ok", "\(r)", sourceLocation: sourceLocation)
        #expect(records["journalMode"] as? String == "wal", "\(r)", sourceLocation: sourceLocation)
    }

    /// The installed folder holds exactly the mirror folder's files, byte for byte.
    func expectInstalledMatchesMirror(_ id: String, folder: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectInstalledMatches(id, source: nginx.mirror + "/" + folder, sourceLocation: sourceLocation)
    }

    /// The installed folder holds exactly the files of `source`, byte for byte.
    func expectInstalledMatches(_ id: String, source: String, installFolder folder: String? = nil,
                                sourceLocation: SourceLocation = #_sourceLocation) {
        let installed = folder ?? installFolder(id)
        let sourceFiles = Disk.regularFiles(under: source)
        let installedFiles = Disk.regularFiles(under: installed)
        #expect(!sourceFiles.isEmpty && installedFiles == sourceFiles,
                "installed tree \(installedFiles) differs from \(sourceFiles)", sourceLocation: sourceLocation)
        for path in sourceFiles {
            let a = FileManager.default.contents(atPath: source + "/" + path)
            let b = FileManager.default.contents(atPath: installed + "/" + path)
            #expect(a != nil && a == b, "\(path) is not byte-identical to \(source)/\(path)", sourceLocation: sourceLocation)
        }
    }

    /// Entries left in `.staging` and `.partial` (leftovers, resume data).
    var leftovers: [String] {
        Disk.tree(stagingRoot).map { ".staging: " + $0 } + Disk.tree(partialRoot).map { ".partial: " + $0 }
    }

    /// Sum of the bytes of the regular files under a folder (0 when it does not exist).
    func bytesUnder(_ path: String) -> Int64 {
        Disk.regularFiles(under: path).reduce(0) { $0 + (Disk.fileSize(path + "/" + $1) ?? 0) }
    }
}

// MARK: File-system helpers

/// Looks at the disk without following links.
enum Disk {
    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    static func fileSize(_ path: String) -> Int64? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(st.st_size)
    }

    /// Every entry under `root` (relative paths, sorted) with its type: `f` regular (with its
    /// size), `d` folder, `l` symlink, `c`/`b` device, `p` fifo, `s` socket. Never follows links.
    static func tree(_ root: String) -> [String] {
        var out: [String] = []
        func walk(_ rel: String) {
            let full = rel.isEmpty ? root : root + "/" + rel
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: full) else { return }
            for name in names.sorted() {
                let r = rel.isEmpty ? name : rel + "/" + name
                var st = stat()
                guard lstat(root + "/" + r, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: out.append("d \(r)"); walk(r)
                case S_IFREG: out.append("f \(r) \(st.st_size)")
                case S_IFLNK: out.append("l \(r)")
                case S_IFCHR: out.append("c \(r)")
                case S_IFBLK: out.append("b \(r)")
                case S_IFIFO: out.append("p \(r)")
                default: out.append("s \(r)")
                }
            }
        }
        if Disk.isDirectory(root) { walk("") }
        return out
    }

    /// The relative path of one `tree` line.
    static func path(ofTreeLine line: String) -> String {
        let body = line.dropFirst(2)
        guard line.hasPrefix("f "), let space = body.lastIndex(of: " ") else { return String(body) }
        return String(body[..<space])
    }

    /// Relative paths of the regular files under `root`, sorted.
    static func regularFiles(under root: String) -> [String] {
        Disk.tree(root).filter { $0.hasPrefix("f ") }.map(path(ofTreeLine:))
    }
}

/// A real small filesystem: tmpfs of `sizeMb` MiB mounted at `path` (root only).
final class TmpfsMount {
    let path: String
    private var mounted = false

    init(at path: String, sizeMb: Int) throws {
        self.path = path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let r = try World.tool("/usr/bin/env", ["mount", "-t", "tmpfs", "-o", "size=\(sizeMb)m,mode=0755", "tmpfs", path])
        guard r.status == 0 else { throw HarnessError("mount tmpfs at \(path) failed (the disk-full tests need root): \(r)") }
        mounted = true
    }

    deinit { unmount() }

    /// Unmounts (lazily if something still holds it). Safe to call twice.
    func unmount() {
        guard mounted else { return }
        mounted = false
        if let r = try? World.tool("/usr/bin/env", ["umount", path]), r.status == 0 { return }
        _ = try? World.tool("/usr/bin/env", ["umount", "-l", path])
    }

    /// Bytes free for writing, as `statvfs` says.
    var availableBytes: Int64 {
        var vfs = statvfs()
        guard statvfs(path, &vfs) == 0 else { return -1 }
        return Int64(vfs.f_bavail) * Int64(vfs.f_frsize)
    }
}

/// What a user would read, checked.
enum Check {
    /// Parses "2.9 MiB" / "512 B" as printed by the CLI into bytes (approximate by nature).
    static func parseHumanBytes(_ text: Substring) -> Double? {
        let parts = text.split(separator: " ")
        guard parts.count == 2, let value = Double(parts[0]) else { return nil }
        let units = ["B": 1.0, "KiB": 1024.0, "MiB": 1048576.0, "GiB": 1073741824.0]
        return units[String(parts[1])].map { $0 * value }
    }

    /// The JSON objects of a JSON-lines stdout; records an issue for any line that is not one.
    static func jsonLines(_ result: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        result.stdoutLines.compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("not a JSON object line: \(line)\n\(result)", sourceLocation: sourceLocation)
                return nil
            }
            return object
        }
    }

    /// Text that must never reach a user (P9).
    static func expectNoSQLiteBusy(_ result: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) {
        let all = (result.stdout + result.stderr).lowercased()
        #expect(!all.contains("sqlite_busy") && !all.contains("database is locked") && !all.contains("database table is locked"),
                "SQLite busy reached the user\n\(result)", sourceLocation: sourceLocation)
    }
}

extension Disk {
    /// Relative paths of the symbolic links under `root` (never followed), sorted.
    static func links(under root: String) -> [String] {
        Disk.tree(root).filter { $0.hasPrefix("l ") }.map(path(ofTreeLine:))
    }
}

extension World {
    /// A catalog of one voice model with an archive source (tar.bz2, one folder stripped)
    /// and then a per-file source, as the shipped Kokoro entry lists them.
    func voiceCatalog(id: String, displayName: String, files: [[String: Any]], archiveURL: String, archiveSize: Int64,
                      archiveSHA256: String, filesBaseURL: String, name: String) throws -> String {
        let doc: [String: Any] = [
            "schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-01-01T00:00:00Z",
            "models": [[
                "id": id, "kind": "voice", "displayName": displayName, "requiredMb": 600, "autoEligible": false,
                "files": files,
                "sources": [
                    ["type": "archive", "url": archiveURL, "format": "tar.bz2", "size": archiveSize, "sha256": archiveSHA256,
                     "stripComponents": 1],
                    ["type": "files", "baseURL": filesBaseURL],
                ],
            ]],
        ]
        let path = root + "/catalogs/\(name).json"
        try JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }
}
