// The tests' side of the network guard: no test may reach past loopback, and one that tries
// fails, naming the host it tried.
//
// Before the first test the runner starts a proxy on 127.0.0.1 that answers every request
// 403 and logs it (Tests/Tools/netguard.py, started by Tests/NetGuard/netguard.c), and
// points `https_proxy`, `http_proxy` and `all_proxy` at it, with `no_proxy` keeping loopback
// direct: libcurl in this process reads them, and `Subprocess` hands them to every program
// a test starts unless the test chose a proxy of its own. At the end of each test (its
// suite carries `.networkGuard`) the log is read: an attempt by a program this test
// started, or by this process itself (an in-process transfer) while this test ran, is an
// issue of this test. An attempt no test claims fails the whole run when the runner exits.
import CTestNetGuard
import Foundation
import Testing

public enum NetworkGuard {
    /// One refused connection, as the proxy logged it.
    struct Attempt: Decodable {
        var seq: Int
        /// Seconds since the epoch.
        var time: Double
        var method: String
        /// host:port.
        var target: String
        /// The process that connected, then its parent, and so on (empty: not found).
        var pids: [Int32]
        var command: String
    }

    /// Which test started a program.
    private struct Spawn {
        var test: Test.ID?
        var command: String
    }

    /// A test (case) while it runs, and after.
    private struct Window {
        var test: Test.ID
        var name: String
        var start: Double
        var end: Double?
    }

    /// The guard's log folder, nil when it did not start.
    static let directory: String? = glasses_netguard_directory().map { String(cString: $0) }
    /// Why the guard did not start (every connection off loopback is then refused, none counted).
    public static let problem: String? = glasses_netguard_problem().map { String(cString: $0) }
    private static let runner = getpid()

    /// The proxy variables as the guard set them in this process.
    private static let proxyVariables: [String: String] = {
        var variables: [String: String] = [:]
        for name in ["https_proxy", "http_proxy", "all_proxy", "no_proxy"] {
            if let value = getenv(name) { variables[name] = String(cString: value) }
        }
        return variables
    }()
    /// Every name libcurl reads a proxy setting from.
    private static let proxyNames: Set<String> = ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY",
                                                  "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"]

    private static let lock = NSLock()
    private nonisolated(unsafe) static var spawned: [Int32: Spawn] = [:]   // guarded by `lock`
    private nonisolated(unsafe) static var windows: [Window] = []          // guarded by `lock`
    private nonisolated(unsafe) static var claimed: Set<Int> = []          // guarded by `lock`

    /// `environment` with the guard's proxy variables added, unless it names a proxy setting
    /// of its own (a test that routes traffic through a server of its own keeps it).
    public static func guarded(_ environment: [String: String]) -> [String: String] {
        if environment.keys.contains(where: proxyNames.contains) { return environment }
        return environment.merging(proxyVariables) { $1 }
    }

    /// Notes that the current test started `pid` (Subprocess calls it after each spawn).
    static func started(pid: Int32, command: [String]) {
        let test = Test.current
        let line = command.joined(separator: " ")
        lock.withLock { spawned[pid] = Spawn(test: test?.id, command: line) }
        let name = test.map(describe) ?? ""
        append("spawns.tsv", "\(pid)\t\(oneLine(name))\t\(oneLine(line))\n")
    }

    /// Starts watching `test`: returns its window's index.
    fileprivate static func begin(_ test: Test) -> Int {
        let start = Date().timeIntervalSince1970
        return lock.withLock {
            windows.append(Window(test: test.id, name: describe(test), start: start))
            return windows.count - 1
        }
    }

    /// Ends the window and records an issue for each attempt off loopback it answers for.
    fileprivate static func end(_ index: Int, _ test: Test) {
        let end = Date().timeIntervalSince1970
        lock.withLock { windows[index].end = end }
        if let problem {
            Issue.record("The network guard did not start (\(problem)): every connection off loopback is refused, and none can be counted.",
                         sourceLocation: test.sourceLocation)
            return
        }
        let logged = attempts()
        guard !logged.isEmpty else { return }
        let (window, overlapping, spawns) = lock.withLock { (windows[index], windows, spawned) }
        // One issue per culprit (a program, or this process), naming each target it tried
        // and how often: a download that retries tries many times.
        var reported: [Int] = []
        var culprits: [String] = []
        var targets: [String: [(target: String, count: Int)]] = [:]
        // An in-process attempt cannot say which test's transfer made it: every test that ran
        // at the time reports it, naming the others.
        let inProcess = "by this test process itself (an in-process transfer) while this test ran"
        var beside: [String] = []
        for attempt in logged where attempt.time >= window.start && attempt.time <= end {
            let who: String
            if let spawn = attempt.pids.lazy.compactMap({ spawns[$0] }).first {
                guard spawn.test == window.test else { continue }   // another test's program
                who = "by `\(spawn.command)` (pid \(attempt.pids.first ?? 0)), which this test started"
            } else if attempt.pids.first == runner {
                who = inProcess
                for other in overlapping where other.start <= attempt.time && (other.end ?? end) >= attempt.time
                    && other.name != window.name && !beside.contains(other.name) {
                    beside.append(other.name)
                }
            } else {
                continue   // a process no test started: the run's final check lists it
            }
            reported.append(attempt.seq)
            let target = "\(attempt.method) \(attempt.target)"
            if targets[who] == nil { culprits.append(who) }
            if let i = targets[who, default: []].firstIndex(where: { $0.target == target }) {
                targets[who, default: []][i].count += 1
            } else {
                targets[who, default: []].append((target, 1))
            }
        }
        for who in culprits {
            let tried = targets[who, default: []].map { $0.count == 1 ? $0.target : "\($0.target) (\($0.count) times)" }
            let also = who == inProcess && !beside.isEmpty ? " (and beside it: \(beside.joined(separator: ", ")))" : ""
            Issue.record("""
                Connections off loopback: \(tried.joined(separator: ", ")) \(who)\(also). The network guard refused \
                them; no test may reach past loopback (serve it from 127.0.0.1).
                """, sourceLocation: test.sourceLocation)
        }
        claim(reported)
    }

    /// Takes these attempts off the run's final check (which reads the file `claimed`).
    private static func claim(_ seqs: [Int]) {
        let new = lock.withLock { seqs.filter { claimed.insert($0).inserted } }
        if !new.isEmpty { append("claimed", new.map { "\($0)\n" }.joined()) }
    }

    /// The attempts made by the programs the current test started, as "METHOD host:port",
    /// taken off the run's final check: for a test of the guard itself (its suite does not
    /// carry `.networkGuard`).
    public static func claimAttemptsOfThisTest() -> [String] {
        guard let test = Test.current?.id else { return [] }
        let (mine, done) = lock.withLock { (Set(spawned.filter { $0.value.test == test }.keys), claimed) }
        let made = attempts().filter { !done.contains($0.seq) && $0.pids.contains(where: mine.contains) }
        claim(made.map(\.seq))
        return made.map { "\($0.method) \($0.target)" }
    }

    /// Every attempt the proxy has logged so far.
    static func attempts() -> [Attempt] {
        guard let directory, let data = FileManager.default.contents(atPath: directory + "/attempts.jsonl"),
              !data.isEmpty else { return [] }
        let decoder = JSONDecoder()
        // A line still being written has no newline yet: it waits for the next reading.
        return data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).dropLast(data.last == UInt8(ascii: "\n") ? 0 : 1)
            .compactMap { try? decoder.decode(Attempt.self, from: Data($0)) }
    }

    private static func describe(_ test: Test) -> String {
        ([test.id.moduleName] + test.id.nameComponents).joined(separator: ".")
    }

    private static func oneLine(_ text: String) -> String {
        String(text.map { $0 == "\t" || $0 == "\n" ? " " : $0 })
    }

    /// Appends `text` to a file of the guard's folder (O_APPEND: whole lines, whatever the thread).
    private static func append(_ name: String, _ text: String) {
        guard let directory else { return }
        let fd = open(directory + "/" + name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}

/// Fails each test that reached past loopback: every suite carries it.
public struct NetworkGuardTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        let window = NetworkGuard.begin(test)
        defer { NetworkGuard.end(window, test) }
        try await function()
    }
}

extension Trait where Self == NetworkGuardTrait {
    /// The test fails on any connection off loopback it makes (see `NetworkGuard`).
    public static var networkGuard: Self { NetworkGuardTrait() }
}
