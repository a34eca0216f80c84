import Foundation
import GlassesTestSupport
import Testing

/// `glasses-local completions bash|zsh|fish`, tried in the real shells (Scripts/bootstrap
/// installs them): what a person gets when pressing Tab.
@Suite("Shell completions", .ownThreads, .networkGuard)
struct CompletionsTests {
    /// The script for `shell`, written to a file.
    static func script(_ shell: String, in w: World) throws -> String {
        let r = try w.run(["completions", shell], catalog: nil)
        try #require(r.status == 0, "\(r)")
        let path = w.root + "/completion.\(shell)"
        try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// What bash's completion offers for the words typed so far (the last one is being completed).
    static func bashOffers(_ script: String, _ words: [String]) throws -> [String] {
        let quoted = words.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let program = "source '\(script)'; COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1); _glasses_local; printf '%s\\n' \"${COMPREPLY[@]}\""
        let r = try World.tool("/bin/bash", ["-c", program])
        #expect(r.status == 0, "\(r)")
        return r.stdoutLines.filter { !$0.isEmpty }.sorted()
    }

    @Test("bash: the script, sourced in a real bash, offers the commands after 'glasses-local d' and the options after 'download --'")
    func bash() throws {
        let w = try World(); defer { w.remove() }
        let script = try Self.script("bash", in: w)
        #expect(try Self.bashOffers(script, ["glasses-local", "d"]) == ["delete", "doctor", "download"])
        let options = try Self.bashOffers(script, ["glasses-local", "download", "--"])
        for option in ["--parallel", "--retries", "--retry-delay", "--store", "--catalog", "--json", "--help"] {
            #expect(options.contains(option), "download -- offers \(option): \(options)")
        }
        #expect(!options.contains("--repair") && !options.contains("--explain"), "only download's own and the global options: \(options)")
        #expect(try Self.bashOffers(script, ["glasses-local", "--store", "/tmp", "catalog", "v"]) == ["validate", "verify"],
                "a global option's value is skipped when finding the command")
        #expect(try Self.bashOffers(script, ["glasses-local", "completions", ""]) == ["bash", "fish", "zsh"])
        #expect(try Self.bashOffers(script, ["glasses-local", "verify", "--re"]) == ["--repair", "--retries", "--retry-delay"])
    }

    @Test("every command in --help is offered at the top level (the scripts come from the same command values)")
    func noDrift() throws {
        let w = try World(); defer { w.remove() }
        let help = try w.run(["--help"], catalog: nil)
        let lines = help.stdoutLines
        let start = try #require(lines.firstIndex(of: "SUBCOMMANDS:"))
        let names = Set(lines[(start + 1)...].prefix { !$0.isEmpty }.compactMap { $0.split(separator: " ").first.map(String.init) })
        let offered = Set(try Self.bashOffers(try Self.script("bash", in: w), ["glasses-local", ""]))
        #expect(names.isSubset(of: offered) && names.contains("completions"), "help lists \(names.sorted()), bash offers \(offered.sorted())")
    }

    @Test("fish: 'complete -C' in a real fish offers the same commands and options")
    func fish() throws {
        let w = try World(); defer { w.remove() }
        let script = try Self.script("fish", in: w)
        func offers(_ line: String) throws -> [String] {
            let r = try World.tool("/usr/bin/fish", ["--no-config", "-c", "source '\(script)'; complete -C '\(line)'"])
            #expect(r.status == 0, "\(r)")
            return r.stdoutLines.map { String($0.split(separator: "\t").first ?? "") }.sorted()
        }
        #expect(try offers("glasses-local d") == ["delete", "doctor", "download"])
        #expect(try offers("glasses-local download --p") == ["--parallel"])
        #expect(try offers("glasses-local catalog ") == ["hash", "keygen", "sign", "update", "validate", "verify"])
    }

    @Test("zsh: the script parses and registers _glasses_local with compinit")
    func zsh() throws {
        let w = try World(); defer { w.remove() }
        let script = try Self.script("zsh", in: w)
        let syntax = try World.tool("/usr/bin/zsh", ["-n", script])
        #expect(syntax.status == 0, "\(syntax)")
        let r = try World.tool("/usr/bin/zsh", ["-f", "-c", "autoload -U compinit; compinit -u -D; source '\(script)'; print -r -- $_comps[glasses-local]"])
        #expect(r.status == 0 && r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "_glasses_local", "\(r)")
    }

    @Test("an unknown shell is a usage error")
    func unknownShell() throws {
        let w = try World(); defer { w.remove() }
        let r = try w.run(["completions", "tcsh"], catalog: nil)
        #expect(r.status == 2 && r.stderr.contains("unknown shell 'tcsh'"), "\(r)")
    }
}

/// Start-up like a C tool: libcurl, libarchive and libbz2 (and their dozens of
/// dependencies) are opened only by the commands that transfer or unpack; `list` never
/// loads them.
@Suite("Libraries load on first use", .ownThreads, .networkGuard)
struct LazyLibraryTests {
    /// The shared objects a run opened, seen by strace.
    static func librariesOpened(_ w: World, _ arguments: [String]) throws -> [String] {
        let binary = try w.binary
        let r = try World.tool("/usr/bin/strace", ["-f", "-e", "trace=openat", "-o", w.root + "/strace.txt", binary,
                                                   "--store", w.store] + arguments)
        #expect(r.status == 0 || r.status == 1, "\(r)")
        let trace = (try? String(contentsOfFile: w.root + "/strace.txt", encoding: .utf8)) ?? ""
        return trace.split(separator: "\n").filter { $0.contains(".so") && !$0.contains("ENOENT") }.map(String.init)
    }

    @Test("list and --version open none of libcurl, libarchive and libbz2; doctor (which reports libcurl's and libarchive's versions) opens them")
    func lazyLoading() throws {
        let w = try World(); defer { w.remove() }
        for command in [["list"], ["list", "--json"], ["--version"], ["fit", "local-qwen3-1.7b"]] {
            let opened = try Self.librariesOpened(w, command)
            #expect(!opened.contains { $0.contains("libcurl") || $0.contains("libarchive") || $0.contains("libbz2") }, "\(command): \(opened)")
        }
        let doctor = try Self.librariesOpened(w, ["doctor"])
        #expect(doctor.contains { $0.contains("libcurl.so") } && doctor.contains { $0.contains("libarchive.so") }, "\(doctor)")
    }
}
