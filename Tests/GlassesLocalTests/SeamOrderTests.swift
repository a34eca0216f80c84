import Foundation
import GlassesTestSupport
import Testing

extension ChildResult {
    /// The JSON document the probe printed (after any plain lines).
    func json() throws -> [String: Any] {
        let start = stdout.firstIndex(of: "{") ?? stdout.startIndex
        let object = try JSONSerialization.jsonObject(with: Data(stdout[start...].utf8))
        return try #require(object as? [String: Any], "\(self)")
    }
}

/// The register-before-create contract in real processes: the registry is process-wide by
/// design, so each start-up order runs in a fresh `seam-probe` (Tests/Tools/seam-probe).
@Suite("SDK seam: register() before Extentos.create(...)", .ownThreads, .networkGuard)
struct SeamOrderTests {
    let store: String

    init() throws {
        store = FileManager.default.temporaryDirectory.appendingPathComponent("glasses-seam-\(UUID().uuidString)").path
    }

    static func binary(_ name: String) throws -> String {
        try #require(BuiltProduct.path(name), "\(name) not found next to the test bundle; it is a dependency of GlassesLocalTests")
    }

    /// Runs `arguments` with a private store and a 16 GB device with 9 GB free now.
    func run(_ arguments: [String], env extra: [String: String] = [:]) throws -> ChildResult {
        var env = ProcessInfo.processInfo.environment
        env["EXTENTOS_MODELS_DIR"] = store
        env["EXTENTOS_MEMORY_MB"] = "16000"
        env["EXTENTOS_MEMORY_AVAILABLE_MB"] = "9000"
        env.removeValue(forKey: "EXTENTOS_STRICT_ORDER")
        env.removeValue(forKey: "EXTENTOS_CATALOG")
        return try ChildProcess.run(arguments[0], Array(arguments.dropFirst()), environment: env.merging(extra) { $1 }, timeout: 60)
    }

    func probe(_ scenario: String, env: [String: String] = [:]) throws -> ChildResult {
        try run([try Self.binary("seam-probe"), scenario], env: env)
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: store) }

    static func instance(_ doc: [String: Any], _ name: String) throws -> [String: Any] {
        let instances = try #require(doc["instances"] as? [String: Any])
        return try #require(instances[name] as? [String: Any], "no instance \(name) in \(doc)")
    }

    static func choice(_ instance: [String: Any]) throws -> [String: Any] {
        try #require(instance["autoChoice"] as? [String: Any])
    }

    @Test func createThenRegisterPrintsOneDiagnosticAndTheInstanceServesFromTheCloud() throws {
        defer { cleanUp() }
        let r = try probe("create-then-register")
        #expect(r.status == 0, "\(r)")
        let doc = try r.json()
        let createSite = try #require(doc["createSite"] as? String)
        let registerSite = try #require(doc["registerSite"] as? String)

        // Standard error: exactly one diagnostic, naming both call sites, the meaning and the fix.
        #expect(createSite.hasPrefix("seam-probe/main.swift:") && registerSite.hasPrefix("seam-probe/main.swift:"), "\(doc)")
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1, "one diagnostic, even though register() ran twice\n\(r)")
        #expect(r.stderr.contains("ExtentosLocalTier.register() ran at \(registerSite), after Extentos.create(...) at \(createSite)"), "\(r)")
        #expect(r.stderr.contains("That instance and 1 other created before \(registerSite) serve every local model from the cloud"), "\(r)")
        #expect(r.stderr.contains("declare the handle without an initializer"), "\(r)")

        // The same diagnostic, readable by the app.
        let diagnostics = try #require(doc["diagnostics"] as? [[String: Any]])
        #expect(diagnostics.count == 1)
        #expect(diagnostics.first?["code"] as? String == "registeredAfterCreate")
        #expect(diagnostics.first?["createSite"] as? String == createSite)
        #expect(diagnostics.first?["registerSite"] as? String == registerSite)
        #expect(diagnostics.first?["instancesAffected"] as? Int == 2)
        #expect((diagnostics.first?["message"] as? String).map { r.stderr.contains($0) } == true)

        // Both early instances answer cloud: upstream's noEligibleRungs, detail
        // localTierNotRegistered; the later one uses the tier.
        for name in ["early", "alsoEarly"] {
            let early = try Self.instance(doc, name)
            #expect(early["localTierAvailable"] as? Bool == false)
            #expect(early["localTier"] as? String == "unavailable: registered at \(registerSite), after this instance was created")
            let choice = try Self.choice(early)
            #expect(choice["isLocal"] as? Bool == false)
            #expect(choice["cloudReason"] as? String == "noEligibleRungs")
            #expect(choice["cloudDetail"] as? String == "localTierNotRegistered")
        }
        #expect(try Self.instance(doc, "alsoEarly")["createdAt"] as? String != createSite)
        let later = try Self.instance(doc, "later")
        #expect(later["localTierAvailable"] as? Bool == true)
        // Nothing is installed in the private store: the tier itself says the weights are missing.
        #expect(try Self.choice(later)["cloudReason"] as? String == "weightsNotPresent")
        #expect(try Self.choice(later)["cloudDetail"] is NSNull)
        #expect(try Self.choice(later)["downloadTarget"] as? String == "local-qwen3-8b")
    }

    @Test func registerThenCreateUsesTheTierAndSaysNothing() throws {
        defer { cleanUp() }
        let r = try probe("register-then-create")
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.json()
        #expect((doc["diagnostics"] as? [Any])?.isEmpty == true)
        let glasses = try Self.instance(doc, "glasses")
        #expect(glasses["localTier"] as? String == "available")
        #expect(glasses["localVoice"] as? String == "available")
        let choice = try Self.choice(glasses)
        #expect(choice["cloudReason"] as? String == "weightsNotPresent")
        #expect(choice["downloadTarget"] as? String == "local-qwen3-8b")
        // The handle's answer is the tier's own.
        let direct = try #require(doc["direct"] as? [String: Any])
        #expect(direct["cloudReason"] as? String == "weightsNotPresent")
    }

    @Test func aStoredPropertyThatCreatesBeforeInitRegistersIsCaught() throws {
        defer { cleanUp() }
        let r = try probe("stored-property")
        #expect(r.status == 0, "\(r)")
        let doc = try r.json()
        let createSite = try #require(doc["createSite"] as? String)
        #expect(createSite.hasPrefix("seam-probe/main.swift:"))
        // One diagnostic per tier, both naming the stored property's line.
        let diagnostics = try #require(doc["diagnostics"] as? [[String: Any]])
        #expect(diagnostics.map { $0["tier"] as? String } == ["models", "voice"], "\(r)")
        #expect(diagnostics.allSatisfy { $0["createSite"] as? String == createSite }, "\(r)")
        #expect(r.stderr.split(separator: "\n").count == 2, "\(r)")
        #expect(r.stderr.contains("after Extentos.create(...) at \(createSite)"), "\(r)")
        #expect(r.stderr.contains("stored-property initializers run before init()"), "\(r)")
        let app = try Self.instance(doc, "app")
        #expect(app["createdAt"] as? String == createSite)
        #expect(try Self.choice(app)["cloudReason"] as? String == "noEligibleRungs")
        #expect(try Self.choice(app)["cloudDetail"] as? String == "localTierNotRegistered")
        // Upstream's plain register() calls, named from the call stack: each its own line in init().
        let registerSites = try #require(doc["registerSites"] as? [String])
        #expect(diagnostics.map { $0["registerSite"] as? String } == registerSites, "\(r)")
        #expect(app["localVoice"] as? String == "unavailable: registered at \(registerSites[1]), after this instance was created", "\(app)")
        #expect(r.stderr.contains("ExtentosLocalTier.register() ran at \(registerSites[0]), after Extentos.create(...) at \(createSite)"), "\(r)")
        #expect(r.stderr.contains("ExtentosLocalVoice.register() ran at \(registerSites[1]), after Extentos.create(...) at \(createSite)"), "\(r)")
        #expect(!r.stderr.contains("could not name"), "\(r)")
    }

    /// Upstream's calls kept as unannotated values (`let setUp = ExtentosLocalTier.register`)
    /// and called late: the diagnostic names the lines that called them, not the SDK's own.
    @Test func callsKeptAsValuesAreNamedWhereTheyAreCalled() throws {
        defer { cleanUp() }
        let r = try probe("by-reference")
        #expect(r.status == 0, "\(r)")
        let doc = try r.json()
        let createSite = try #require(doc["createSite"] as? String)
        let registerSite = try #require(doc["registerSite"] as? String)
        let diagnostic = try #require((doc["diagnostics"] as? [[String: Any]])?.first, "\(r)")
        #expect(diagnostic["createSite"] as? String == createSite, "\(r)")
        #expect(diagnostic["registerSite"] as? String == registerSite, "\(r)")
        #expect(r.stderr.contains("ExtentosLocalTier.register() ran at \(registerSite), after Extentos.create(...) at \(createSite)"), "\(r)")
        #expect(try Self.instance(doc, "glasses")["createdAt"] as? String == createSite)
    }

    @Test func theDocumentedFixWorks() throws {
        defer { cleanUp() }
        let r = try probe("fixed-app")
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let app = try Self.instance(try r.json(), "app")
        #expect(app["localTier"] as? String == "available")
        #expect(app["localVoice"] as? String == "available")
        #expect(try Self.choice(app)["cloudReason"] as? String == "weightsNotPresent")
    }

    @Test("strict mode stops the program with the same message", arguments: [
        ("strict", ["EXTENTOS_STRICT_ORDER": "1"]),
        ("strict-config", [:]),
    ])
    func strictModeStops(_ scenario: String, _ env: [String: String]) throws {
        defer { cleanUp() }
        let r = try probe(scenario, env: env)
        // Stopped by its own trap (Swift's fatalError: SIGILL on x86_64, SIGTRAP on arm64),
        // not by the SIGTERM the helper sends a program still running at its timeout.
        #expect(!r.timedOut && r.signaled && [SIGILL, SIGTRAP].contains(r.status), "a late register() must stop the process\n\(r)")
        #expect(!r.stdout.contains("still running"), "\(r)")
        #expect(r.stderr.contains("ExtentosLocalTier.register() ran at seam-probe/main.swift:"), "\(r)")
        #expect(r.stderr.contains(", after Extentos.create(...) at seam-probe/main.swift:"), "\(r)")
        #expect(r.stderr.contains("declare the handle without an initializer"), "\(r)")
        #expect(r.stderr.contains("Fatal error"), "\(r)")
    }

    @Test func strictModeOffLetsTheProgramGoOn() throws {
        defer { cleanUp() }
        let r = try probe("strict", env: ["EXTENTOS_STRICT_ORDER": "0"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("still running"), "\(r)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r)")
    }

    @Test func concurrentRegistrationIsHarmless() throws {
        defer { cleanUp() }
        let r = try probe("concurrent")
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.json()
        #expect((doc["diagnostics"] as? [Any])?.isEmpty == true)
        #expect(try Self.instance(doc, "glasses")["localTier"] as? String == "available")
    }

    /// register() does no I/O: a syscall trace shows nothing between the markers the probe
    /// writes around three register() calls, and the first query opens the store afterwards.
    @Test func registerDoesNoIO() throws {
        defer { cleanUp() }
        guard let strace = ["/usr/bin/strace", "/bin/strace"].first(where: FileManager.default.isExecutableFile) else {
            Issue.record("strace is missing: Scripts/bootstrap installs it")
            return
        }
        let trace = store + ".strace"
        defer { try? FileManager.default.removeItem(atPath: trace) }
        let r = try run([strace, "-f", "-qq", "-e", "trace=%file,%desc,%network,%ipc", "-o", trace, try Self.binary("seam-probe"), "no-io"])
        #expect(r.status == 0, "\(r)")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        let begin = try #require(lines.firstIndex { $0.contains("write(1, \"BEGIN") }, "\(lines.suffix(20))")
        let end = try #require(lines.firstIndex { $0.contains("write(1, \"END") }, "\(lines.suffix(20))")
        // An anonymous mapping is memory, not I/O: the allocator's (AddressSanitizer's maps
        // its size classes so, `%desc` traces mmap for its descriptor argument).
        let between = lines[(begin + 1)..<end].filter { !($0.contains(" mmap(") && $0.contains("MAP_ANONYMOUS")) }
        #expect(between.isEmpty, "register() made system calls:\n\(between.joined(separator: "\n"))")
        // The first query after it is what touches the store.
        #expect(lines[end...].contains { $0.contains(store) }, "models() should open the store lazily")
    }
}
