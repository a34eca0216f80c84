import Foundation
import GlassesTestSupport
import LocalModelKit
import Testing

/// `glasses-local manpage`: the manual page Scripts/package installs. It is generated from the
/// command's own declarations, so these tests compare it with what `--help` says, with the
/// exit-status table and with the environment variables the sources read, and format it
/// with groff and man as a reader's `man glasses-local` would.
@Suite("glasses-local manpage", .ownThreads, .networkGuard)
struct ManPageTests {
    /// The page, from the built binary.
    static func page(_ sb: Sandbox, env: [String: String] = [:]) throws -> String {
        let r = try sb.run(["manpage"], env: env)
        try #require(r.status == 0 && r.stderr.isEmpty, "\(r)")
        return r.stdout
    }

    /// The page's text with roff's escapes undone (`\-` is `-`, fonts dropped), split into
    /// the part before any `.SS` and each `.SS` subsection, by heading.
    static func sections(_ page: String) -> (top: [String: String], commands: [String: String]) {
        func plain(_ line: String) -> String {
            line.replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\fB", with: "")
                .replacingOccurrences(of: "\\fI", with: "").replacingOccurrences(of: "\\fR", with: "")
                .replacingOccurrences(of: "\\(aq", with: "'").replacingOccurrences(of: "\\(dq", with: "\"")
                .replacingOccurrences(of: "\\&", with: "").replacingOccurrences(of: "\\e", with: "\\")
        }
        var top: [String: String] = [:], commands: [String: String] = [:]
        var section = "", command: String?
        for raw in page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let line = plain(raw)
            if line.hasPrefix(".SH ") {
                section = String(line.dropFirst(4)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                command = nil
            } else if line.hasPrefix(".SS ") {
                command = String(line.dropFirst(4)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            } else if let command {
                commands[command, default: ""] += line + "\n"
            } else {
                top[section, default: ""] += line + "\n"
            }
        }
        return (top, commands)
    }

    /// The names at the start of a help section's lines (`  --store <dir>   The model…` → `--store`).
    static func helpEntries(_ help: String, section: String) -> [String] {
        guard let start = help.range(of: "\n\(section):\n") else { return [] }
        var out: [String] = []
        for line in help[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty || !line.hasPrefix("  ") { break }
            let entry = line.dropFirst(2)
            guard let first = entry.first, first != " " else { continue }   // a wrapped help line
            out.append(String(entry.split(separator: " ")[0]).trimmingCharacters(in: CharacterSet(charactersIn: ",")))
        }
        return out
    }

    @Test("the page depends on nothing but the build, touches no store, and formats without a warning (groff -ww; man in the C and UTF-8 locales)")
    func formatsCleanly() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let page = try Self.page(sb)
        let other = try Self.page(sb, env: ["HOME": sb.root + "/elsewhere", "LANG": "C", "TZ": "Pacific/Kiritimati",
                                            "EXTENTOS_MODELS_DIR": sb.root + "/other-store", "XDG_DATA_HOME": "/nonexistent"])
        #expect(page == other, "the page must not depend on the environment")
        #expect(!FileManager.default.fileExists(atPath: sb.store) && !FileManager.default.fileExists(atPath: sb.root + "/other-store"))
        #expect(page.hasPrefix(".TH GLASSES\\-LOCAL 1 "), "\(page.prefix(200))")

        let file = try sb.write("glasses-local.1", page)
        let groff = try #require(["/usr/bin/groff", "/bin/groff"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                 "groff not found (Scripts/bootstrap installs groff-base)")
        let g = try World.tool(groff, ["-ww", "-man", "-z", file])
        #expect(g.status == 0 && g.stderr.isEmpty, "\(g)")
        let man = try #require(["/usr/bin/man", "/bin/man"].first { FileManager.default.isExecutableFile(atPath: $0) },
                               "man not found (Scripts/bootstrap installs man-db)")
        for locale in ["C", "C.UTF-8"] {
            let r = try Sandbox.runProcess(man, ["--warnings", "-l", file],
                                           environment: ["PATH": "/usr/bin:/bin", "LC_ALL": locale, "MANWIDTH": "80", "HOME": sb.root + "/home"],
                                           ioDirectory: sb.root + "/io")
            #expect(r.status == 0 && r.stderr.isEmpty, "LC_ALL=\(locale)\n\(r)")
            #expect(r.stdout.contains("NAME") && r.stdout.contains("EXIT STATUS") && r.stdout.contains("ENVIRONMENT"), "\(r.stdout.prefix(500))")
        }
    }

    @Test("every command, argument and option --help shows is in the page, each option under its command")
    func coversHelp() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (top, commands) = Self.sections(try Self.page(sb))
        let root = try sb.run(["--help"])
        let names = root.stdout.components(separatedBy: "\nSUBCOMMANDS:\n")[1].components(separatedBy: "\n\n")[0]
            .split(separator: "\n").map { line in
                // "  catalog validate  Check …": the name is what stands before the two spaces.
                String(line.dropFirst(2).components(separatedBy: "  ")[0])
            }
        try #require(names.count > 20 && names.contains("download") && names.contains("manpage"), "\(root)")
        #expect(Set(commands.keys) == Set(names), "commands in the page \(commands.keys.sorted()), in --help \(names)")

        let globals = Self.helpEntries(root.stdout, section: "OPTIONS")
        try #require(globals.contains("--store") && globals.contains("--version"), "\(root)")
        let options = try #require(top["OPTIONS"])
        for option in globals {
            #expect(options.contains("\n" + option), "global option \(option) is not in OPTIONS")
        }
        for name in names {
            let help = try sb.run(["help"] + name.split(separator: " ").map(String.init))
            try #require(help.status == 0, "\(help)")
            let body = try #require(commands[name], "no .SS \(name)")
            let abstract = help.stdout.components(separatedBy: "\n")[0].dropFirst("OVERVIEW: ".count)
            #expect(body.hasPrefix(abstract + "\n"), "\(name): the abstract\n\(body.prefix(300))")
            #expect(body.contains("Usage: glasses-local \(name)"), "\(name): the usage line")
            for entry in Self.helpEntries(help.stdout, section: "ARGUMENTS") + Self.helpEntries(help.stdout, section: "OPTIONS")
            where !globals.contains(entry) && entry != "-h" {
                #expect(body.contains("\n" + entry), "\(name): \(entry) is in --help but not under .SS \(name)")
            }
        }
    }

    @Test("EXIT STATUS lists every status of the one table with its meaning, and every error code under its status")
    func exitStatuses() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let text = try #require(Self.sections(try Self.page(sb)).top["EXIT STATUS"])
        let entries = text.components(separatedBy: ".TP\n").dropFirst()
        #expect(entries.count == ExitStatus.allCases.count, "\(text)")
        for status in ExitStatus.allCases {
            let entry = try #require(entries.first { $0.hasPrefix("\(status.rawValue)\n") }, "status \(status.rawValue) is missing\n\(text)")
            #expect(entry.lowercased().contains(status.meaning.lowercased()), "\(entry)")
            for code in ErrorCode.allCases where code.exit == status {
                #expect(entry.contains(" " + code.rawValue + ",") || entry.contains(" " + code.rawValue + "."),
                        "code \(code.rawValue) belongs under \(status.rawValue): \(entry)")
            }
        }
    }

    @Test("ENVIRONMENT names every variable the engine and the command read")
    func environment() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let text = try #require(Self.sections(try Self.page(sb)).top["ENVIRONMENT"])
        // Every string literal in the engine and the command that names a variable of ours, the
        // Hub client's, curl's, XDG's, or HOME and NETRC.
        let pattern = try NSRegularExpression(
            pattern: #""((EXTENTOS|HF|HUGGINGFACE|HUGGING_FACE|TRANSFORMERS|XDG|CURL|SSL|DBUS)_[A-Z0-9_]*[A-Z0-9]|HOME|NETRC|[a-z]+_proxy|[A-Z]+_PROXY)""#)
        var read: Set<String> = []
        for folder in ["Sources/LocalModelKit", "Sources/glasses-local"] {
            let root = PackageRoot.path() + "/" + folder
            let files = try #require(FileManager.default.enumerator(atPath: root)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
            for file in files where file != "ManPageCommand.swift" {
                let source = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
                for match in pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)) {
                    if let range = Range(match.range(at: 1), in: source) { read.insert(String(source[range])) }
                }
            }
        }
        try #require(read.contains("EXTENTOS_MODELS_DIR") && read.contains("HF_TOKEN") && read.contains("https_proxy"), "\(read.sorted())")
        let tags = text.components(separatedBy: "\n").enumerated().filter { $0.offset > 0 }
            .filter { text.components(separatedBy: "\n")[$0.offset - 1] == ".TP" }.map(\.element)
        let documented = Set(tags.flatMap { $0.components(separatedBy: ", ") })
        #expect(read.subtracting(documented).isEmpty, "read by the sources but not in ENVIRONMENT: \(read.subtracting(documented).sorted())")
    }
}
