import Foundation
import GlassesTestSupport
import Testing

/// The command line's options as declarations: docs/cli.md is what the binary generates
/// from them, and every value is checked against its declaration before the command runs —
/// a usage error (exit 2) naming the option, with the command's usage, and nothing done.
@Suite("glasses-local: option declarations, validation and docs/cli.md", .ownThreads, .networkGuard)
struct CLIReferenceTests {
    static let regenerate = "Scripts/cli-reference (or: swift run glasses-local manpage --markdown > docs/cli.md)"

    @Test("docs/cli.md is what 'glasses-local manpage --markdown' prints (regenerate with Scripts/cli-reference)")
    func referenceIsCurrent() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["manpage", "--markdown"])
        try #require(r.status == 0 && r.stderr.isEmpty, "\(r)")
        let path = PackageRoot.path() + "/docs/cli.md"
        let committed = try #require(try? String(contentsOfFile: path, encoding: .utf8), "\(path) is missing: run \(Self.regenerate)")
        if committed != r.stdout {
            let old = committed.components(separatedBy: "\n"), new = r.stdout.components(separatedBy: "\n")
            let first = (0..<min(old.count, new.count)).first { old[$0] != new[$0] } ?? min(old.count, new.count)
            Issue.record("""
                docs/cli.md is stale: run \(Self.regenerate) and commit it.
                First difference at line \(first + 1):
                  committed: \(first < old.count ? old[first] : "(end of file)")
                  generated: \(first < new.count ? new[first] : "(end of output)")
                """)
        }
    }

    @Test("the reference lists every command of --help, each option under its command with what it accepts, and the exit-status table")
    func referenceCoversCommands() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let page = try sb.run(["manpage", "--markdown"]).stdout
        let help = try sb.run(["--help"]).stdout
        let names = help.components(separatedBy: "\nSUBCOMMANDS:\n")[1].components(separatedBy: "\n\n")[0]
            .split(separator: "\n").map { String($0.dropFirst(2).components(separatedBy: "  ")[0]) }
        try #require(names.count > 20, "\(help)")
        for name in names {
            #expect(page.contains("\n## \(name)\n"), "no section for \(name)")
        }
        // What the README once listed by hand and lost: each under its command, with what it accepts.
        for (command, row) in [("history", "| `--limit <n>` | a positive number |"), ("auto", "| `--memory-share <f>` | a number in (0, 1] |"),
                               ("catalog hash", "| `--kind <kind>` | llm or voice |"), ("download", "| `--parallel <n>` | 1…32 |")] {
            let section = try #require(page.components(separatedBy: "\n## \(command)\n").dropFirst().first?.components(separatedBy: "\n## ").first)
            #expect(section.contains(row), "\(command): \(row)\n\(section)")
        }
        #expect(page.contains("| 75 | temporary (retry later) | `temporary` |"), "the exit-status table")
    }

    @Test("an option name takes a value in every command that declares it, or in none (the parser relies on it before the command's name)")
    func optionNamesAgree() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let page = try sb.run(["manpage", "--markdown"]).stdout
        var takesValue: [String: Set<Bool>] = [:]
        for line in page.split(separator: "\n") where line.hasPrefix("| `--") {
            let label = line.dropFirst(3).prefix { $0 != "`" }
            let name = String(label.split(separator: " ")[0])
            takesValue[name, default: []].insert(label.contains(" <"))
        }
        try #require(takesValue.count > 30, "\(takesValue.keys.sorted())")
        for (name, kinds) in takesValue {
            #expect(kinds.count == 1, "\(name) is a flag in one command and takes a value in another")
        }
    }

    struct Refused: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        /// Words the `Error:` line must contain: the option, and what was wrong with it.
        var mentions: [String]
        /// The command whose usage follows.
        var command: String
        var testDescription: String { arguments.joined(separator: " ") }
    }

    static let refused: [Refused] = [
        // Unknown options, before and after the command's name.
        Refused(arguments: ["download", "x", "--frob"], mentions: ["unknown option '--frob'"], command: "download"),
        Refused(arguments: ["catalog", "hash", "DIR", "--frob=1"], mentions: ["unknown option '--frob'"], command: "catalog hash"),
        // Bad values: a range, an enum, a format, a problem of its own.
        Refused(arguments: ["download", "x", "--parallel", "0"], mentions: ["--parallel must be 1…32, got '0'"], command: "download"),
        Refused(arguments: ["download", "x", "--retries=101"], mentions: ["--retries must be 0…100, got '101'"], command: "download"),
        Refused(arguments: ["auto", "--memory-share", "1.5"], mentions: ["--memory-share must be a number in (0, 1], got '1.5'"], command: "auto"),
        Refused(arguments: ["history", "--limit", "-3"], mentions: ["--limit must be a positive number, got '-3'"], command: "history"),
        Refused(arguments: ["catalog", "hash", "DIR", "--kind", "gguf"], mentions: ["--kind must be llm or voice, got 'gguf'"], command: "catalog hash"),
        Refused(arguments: ["voice", "download", "--source", "torrent"], mentions: ["--source must be archive or files, got 'torrent'"], command: "voice download"),
        Refused(arguments: ["prefetch", "--window", "25:00-26:00"], mentions: ["--window must be HH:MM-HH:MM", "'25:00-26:00'"], command: "prefetch"),
        Refused(arguments: ["prefetch", "--rate-limit", "1023"], mentions: ["--rate-limit", "at least 1024", "'1023'"], command: "prefetch"),
        Refused(arguments: ["catalog", "hash", "DIR", "--id", "Upper", "--base-url", "https://h.example/m/"], mentions: ["--id: "], command: "catalog hash"),
        Refused(arguments: ["catalog", "hash", "DIR", "--id", "x", "--base-url", "https://h.example/m"], mentions: ["--base-url: must end with '/'"], command: "catalog hash"),
        // Missing values.
        Refused(arguments: ["download", "x", "--parallel"], mentions: ["missing value for '--parallel <N>'"], command: "download"),
        Refused(arguments: ["prefetch", "--window"], mentions: ["missing value for '--window <HH:MM-HH:MM>'"], command: "prefetch"),
        // An option of another command, after and before the command's name.
        Refused(arguments: ["list", "--parallel", "4"], mentions: ["'--parallel' is not an option of 'list'", "'download'"], command: "list"),
        Refused(arguments: ["--explain", "fit", "x"], mentions: ["'--explain' is not an option of 'fit'", "'auto'"], command: "fit"),
        Refused(arguments: ["download", "x", "--source", "files"], mentions: ["'--source' is not an option of 'download'", "'voice download'"], command: "download"),
        // A flag given a value, a required option left out, options that go together.
        Refused(arguments: ["auto", "--explain=yes"], mentions: ["'--explain' takes no value"], command: "auto"),
        Refused(arguments: ["catalog", "sign", "catalog.json"], mentions: ["catalog sign needs --key KEY"], command: "catalog sign"),
        Refused(arguments: ["catalog", "hash", "DIR", "--base-url", "https://h.example/m/"], mentions: ["--id and --base-url go together"], command: "catalog hash"),
    ]

    @Test("a refused option: exit 2, the option named with what to do, the command's usage, nothing done", arguments: refused)
    func refusedOption(_ c: Refused) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        // A real folder to hash: only the option can be what is wrong.
        try sb.write("model/weights.bin", "weights")
        let r = try sb.run(c.arguments.map { $0 == "DIR" ? sb.root + "/model" : $0 })
        #expect(r.status == 2, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        let lines = r.stderrLines
        try #require(lines.count == 3, "\(r)")
        #expect(lines[0].hasPrefix("Error: "), "\(r)")
        for words in c.mentions {
            #expect(lines[0].contains(words), "the error says \(words.debugDescription)\n\(r)")
        }
        #expect(lines[1].hasPrefix("Usage: glasses-local \(c.command)"), "\(r)")
        #expect(lines[2].trimmingCharacters(in: .whitespaces) == "See 'glasses-local \(c.command) --help'.", "\(r)")
        #expect(!FileManager.default.fileExists(atPath: sb.store), "a usage error touches no store")
    }

    @Test("values are checked before the command does anything: a bad value wins over a missing folder or a broken catalog")
    func checkedBeforeRunning() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let hash = try sb.run(["catalog", "hash", sb.root + "/no-such-folder", "--required-mb", "0"])
        #expect(hash.status == 2 && hash.stderr.hasPrefix("Error: --required-mb must be a positive number"), "\(hash)")
        let broken = try sb.write("broken.json", "{")
        let history = try sb.run(["history", "--catalog", broken, "--limit", "0"])
        #expect(history.status == 2 && history.stderr.hasPrefix("Error: --limit must be a positive number"), "\(history)")
        // `--kind` is checked even when it would not be used (no --id): a typo is said, not ignored.
        try sb.write("model/weights.bin", "weights")
        let kind = try sb.run(["catalog", "hash", sb.root + "/model", "--kind", "vioce"])
        #expect(kind.status == 2 && kind.stderr.contains("--kind must be llm or voice, got 'vioce'"), "\(kind)")
    }

    @Test("a command's option before the command's name still works, and is still checked")
    func optionBeforeCommand() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let ok = try sb.run(["--limit", "1", "history"])
        #expect(ok.status == 0 && ok.stdout == "no history yet\n", "\(ok)")
        let bad = try sb.run(["--limit", "0", "history"])
        #expect(bad.status == 2 && bad.stderr.hasPrefix("Error: --limit must be a positive number, got '0'"), "\(bad)")
    }

    @Test("help lists a command's exit statuses from its declaration, and the man page has them under the command")
    func exitStatusesInHelp() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let help = try sb.run(["help", "download"])
        try #require(help.status == 0, "\(help)")
        let section = try #require(help.stdout.components(separatedBy: "\nEXIT STATUS:\n").dropFirst().first, "\(help)")
        let statuses = section.split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "") }
        #expect(statuses == [3, 4, 7, 75, 130], "\(section)")
        let page = try sb.run(["manpage"]).stdout
        let download = try #require(page.components(separatedBy: ".SS \"download\"\n").dropFirst().first?.components(separatedBy: ".SS ").first)
        #expect(download.contains("\\fBExit status:\\fR\n.TP\n\\fB3\\fR\n"), "\(download)")
    }

    @Test("bash completion offers an option's choices and a command's one argument from their declarations")
    func completionChoices() throws {
        let w = try World(); defer { w.remove() }
        let script = try CompletionsTests.script("bash", in: w)
        #expect(try CompletionsTests.bashOffers(script, ["glasses-local", "catalog", "hash", "d", "--kind", ""]) == ["llm", "voice"])
        #expect(try CompletionsTests.bashOffers(script, ["glasses-local", "voice", "download", "--source", "a"]) == ["archive"])
        #expect(try CompletionsTests.bashOffers(script, ["glasses-local", "completions", "z"]) == ["zsh"])
    }
}
