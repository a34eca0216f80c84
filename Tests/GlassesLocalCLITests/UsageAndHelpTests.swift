import Foundation
import GlassesTestSupport
import Testing

/// Usage errors (exit 2, `Error:` / `Usage:` / `See '… --help'.` on stderr) and help
/// (stdout, exit 0) in swift-argument-parser's layout.
@Suite("glasses-local: usage errors and help", .ownThreads, .networkGuard)
struct UsageAndHelpTests {
    struct UsageCase: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        /// Words the `Error:` line must contain (what was wrong).
        var mentions: [String]
        /// The command whose usage is shown; nil for the root usage.
        var command: String?
        var testDescription: String { arguments.isEmpty ? "(no arguments)" : arguments.joined(separator: " ") }
    }

    static let usageCases: [UsageCase] = [
        UsageCase(arguments: [], mentions: ["no command"], command: nil),
        UsageCase(arguments: ["frob"], mentions: ["unknown command", "frob"], command: nil),
        UsageCase(arguments: ["list", "--frob"], mentions: ["unknown option", "--frob"], command: "list"),
        UsageCase(arguments: ["fit"], mentions: ["missing", "<id>"], command: "fit"),
        UsageCase(arguments: ["fit", "a", "b"], mentions: ["unexpected argument", "'b'"], command: "fit"),
        UsageCase(arguments: ["list", "--explain"], mentions: ["--explain", "list"], command: "list"),
        UsageCase(arguments: ["list", "--stall-timeout", "abc"], mentions: ["--stall-timeout", "abc"], command: "list"),
        UsageCase(arguments: ["list", "--stall-timeout", "0"], mentions: ["--stall-timeout", "'0'"], command: "list"),
        UsageCase(arguments: ["list", "--mirror", "http://example.com"], mentions: ["--mirror", "http://example.com", "https"], command: "list"),
        UsageCase(arguments: ["list", "--store"], mentions: ["missing value", "--store"], command: "list"),
        UsageCase(arguments: ["list", "--json=yes"], mentions: ["--json", "takes no value"], command: "list"),
        UsageCase(arguments: ["catalog"], mentions: ["catalog", "validate", "hash"], command: "catalog"),
        UsageCase(arguments: ["catalog", "frob"], mentions: ["catalog frob", "validate", "hash"], command: "catalog"),
        UsageCase(arguments: ["help", "frob"], mentions: ["unknown command", "frob"], command: nil),
    ]

    @Test("usage errors: exit 2, nothing on stdout, Error/Usage/See lines on stderr", arguments: usageCases)
    func usageError(_ c: UsageCase) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(c.arguments)
        #expect(r.status == 2, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        let lines = r.stderrLines
        try #require(lines.count == 3, "\(r)")
        #expect(lines[0].hasPrefix("Error: "), "\(r)")
        for word in c.mentions {
            #expect(lines[0].contains(word), "the error names '\(word)'\n\(r)")
        }
        #expect(lines[1].hasPrefix("Usage: glasses-local"), "\(r)")
        if let command = c.command {
            #expect(lines[1].hasPrefix("Usage: glasses-local \(command)"), "\(r)")
        }
        let see = lines[2].trimmingCharacters(in: .whitespaces)
        #expect(see.hasPrefix("See 'glasses-local ") && see.hasSuffix("--help'."), "\(r)")
        #expect(!FileManager.default.fileExists(atPath: sb.store), "a usage error touches no store")

        // The help the message points to exists.
        let quoted = see.dropFirst("See '".count).dropLast("'.".count)
        let helpArgs = quoted.split(separator: " ").dropFirst().map(String.init)
        let help = try sb.run(helpArgs)
        #expect(help.status == 0, "`\(quoted)` must work\n\(help)")
        #expect(help.stdout.hasPrefix("OVERVIEW:"), "\(help)")
    }

    @Test("a usage error with --json also puts the error document on stdout")
    func usageErrorJSON() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["--json", "frob"])
        #expect(r.status == 2, "\(r)")
        #expect(r.stderr.hasPrefix("Error: unknown command 'frob'"), "\(r)")
        let error = try #require(try r.jsonObject()["error"] as? [String: Any], "\(r)")
        #expect(error["code"] as? String == "usage")
        #expect(error["exitCode"] as? Int == 2)
    }

    @Test("--mirror accepts plain http to 127.0.0.1 (local mirrors)")
    func mirrorLoopbackAccepted() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["list", "--mirror", "http://127.0.0.1:8000/", "--json"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect((try r.jsonObject()["models"] as? [Any])?.count == 6)
    }

    // MARK: help

    @Test("root help: --help, -h and help print OVERVIEW, USAGE, OPTIONS, SUBCOMMANDS to stdout",
          arguments: [["--help"], ["-h"], ["help"]])
    func rootHelp(_ args: [String]) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(args)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.hasPrefix("OVERVIEW: "), "\(r)")
        for section in ["\nUSAGE: glasses-local", "\nOPTIONS:\n", "\nSUBCOMMANDS:\n"] {
            #expect(r.stdout.contains(section), "missing \(section.debugDescription)\n\(r)")
        }
        for command in ["list", "info", "fit", "auto", "history", "doctor", "catalog validate", "catalog hash"] {
            #expect(r.stdoutLines.contains { $0.hasPrefix("  \(command) ") }, "SUBCOMMANDS lists \(command)\n\(r)")
        }
        for option in ["--store <dir>", "--catalog <file>", "--mirror <url>", "--json", "--quiet", "--stall-timeout <s>", "--version"] {
            #expect(r.stdout.contains("  \(option)"), "OPTIONS lists \(option)\n\(r)")
        }
    }

    @Test("help fit, fit --help and fit -h print the same command help with ARGUMENTS",
          arguments: [["help", "fit"], ["fit", "--help"], ["fit", "-h"], ["--json", "fit", "--help"]])
    func commandHelp(_ args: [String]) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(args)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.hasPrefix("OVERVIEW: "), "\(r)")
        #expect(r.stdout.contains("\nUSAGE: glasses-local fit <id>"), "\(r)")
        #expect(r.stdout.contains("\nARGUMENTS:\n  <id>"), "\(r)")
        #expect(r.stdout.contains("\nOPTIONS:\n"), "\(r)")
        #expect(r.stdout.contains("\nEXIT STATUS:\n") && r.stdoutLines.contains { $0.hasPrefix("  3 ") }, "the help explains the exit code\n\(r)")
        #expect(!r.stdout.contains("SUBCOMMANDS:"), "\(r)")

        let reference = try sb.run(["help", "fit"])
        #expect(r.stdout == reference.stdout)
    }

    @Test("auto help lists its own options before the global ones")
    func autoHelpOptions() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["help", "auto"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let explain = try #require(r.stdout.range(of: "  --explain"), "\(r)")
        let store = try #require(r.stdout.range(of: "  --store <dir>"), "\(r)")
        #expect(explain.lowerBound < store.lowerBound)
        #expect(r.stdout.contains("EXTENTOS_MEMORY_MB"), "\(r)")
    }

    @Test("help for the catalog command group: catalog --help and help catalog list its subcommands",
          arguments: [["catalog", "--help"], ["help", "catalog"]])
    func catalogGroupHelp(_ args: [String]) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(args)
        #expect(r.status == 0, "`glasses-local \(args.joined(separator: " "))` is how a user asks what 'catalog' does\n\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.contains("validate") && r.stdout.contains("hash"), "\(r)")
    }

    @Test("--version names the version, the commit (unknown in a development build) and the built-in catalog's version")
    func version() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let shipped = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: PackageRoot.bundledCatalog))) as? [String: Any]
        let catalogVersion = try #require(shipped?["catalogVersion"] as? Int)
        for args in [["--version"], ["list", "--version"]] {
            let r = try sb.run(args)
            #expect(r.status == 0, "\(r)")
            #expect(r.stderr.isEmpty, "\(r)")
            try #require(r.stdoutLines.count == 3, "\(r)")
            let line = r.stdoutLines[0]
            #expect(line.hasPrefix("glasses-local "), "\(r)")
            let number = line.dropFirst("glasses-local ".count)
            #expect(number.split(separator: ".").count == 3 && number.split(separator: ".").allSatisfy { Int($0) != nil }, "\(r)")
            // `swift build` embeds no commit; Scripts/ship does (PackageTests checks the shipped one).
            #expect(r.stdoutLines[1] == "commit unknown", "\(r)")
            #expect(r.stdoutLines[2] == "built-in catalog version \(catalogVersion)", "\(r)")
        }
        let json = try sb.run(["--version", "--json"])
        let doc = try json.jsonObject()
        #expect(doc["version"] as? String == String(try #require(try sb.run(["--version"]).stdoutLines.first).dropFirst("glasses-local ".count)), "\(json)")
        #expect(doc["commit"] as? String == "unknown" && doc["catalogVersion"] as? Int == catalogVersion, "\(json)")
    }
}
