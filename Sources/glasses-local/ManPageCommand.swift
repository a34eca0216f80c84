import LocalModelKit

/// `glasses-local manpage`: the manual page, glasses-local(1), in roff — or with --markdown
/// the command-line reference, docs/cli.md (`MarkdownReference`). Generated from the same
/// command values as `--help` and the completions (`allCommands`, `globalOptions`), the
/// one exit-status table (`ExitStatus`, with each `ErrorCode` under its status), and the
/// environment and files below, so the page cannot drift from the command. The output
/// depends on nothing but this build (no date, no environment): `Scripts/package` installs
/// it as /usr/share/man/man1/glasses-local.1.gz; `Scripts/cli-reference` writes docs/cli.md.
enum ManPageCommand {
    /// Roff, or Markdown.
    struct Options: OptionGroup {
        let markdown = Flag("--markdown", help: "Print the reference as Markdown instead (docs/cli.md: Scripts/cli-reference writes it).")
    }
    static let options = Options()

    static let command = Command(
        "manpage", abstract: "Print the manual page, glasses-local(1), in roff.",
        discussion: "Generated from the same declarations as --help. Read it without installing it: glasses-local manpage | man -l -",
        options: options, run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let commands = allCommands.map(\.spec)
        context.console.out(context.invocation[options.markdown] ? MarkdownReference.page(commands: commands) : page(commands: commands))
        return .ok
    }

    /// One environment variable (or a group read together) and what it does.
    struct Variable {
        var names: [String]
        var text: String
    }

    /// Every variable the command reads, in the order a reader looks for them. A test checks
    /// that each name the sources read is here (`ManPageTests`).
    static let environment: [Variable] = [
        Variable(names: ["EXTENTOS_MODELS_DIR"], text: "The store folder, as --store (which wins). Default: $XDG_DATA_HOME/extentos/models when XDG_DATA_HOME is an absolute path, else ~/.local/share/extentos/models."),
        Variable(names: ["XDG_DATA_HOME", "HOME"], text: "Where the default store lives (see EXTENTOS_MODELS_DIR). HOME is also the ~ of ~/.netrc and of the Hugging Face cache and token defaults. When HOME is unset or empty, this user's home in the password database is used; with no home at all and no store named, commands that need the store fail with code noStore."),
        Variable(names: ["EXTENTOS_CATALOG"], text: "A catalog file used instead of the store's signed catalog or the built-in one, as --catalog (which wins)."),
        Variable(names: ["EXTENTOS_CATALOG_URL"], text: "Where catalog update fetches the signed catalog (URL and URL.sig) when --from is not given; prefetch updates from it first when it is set (a failed update is a warning)."),
        Variable(names: ["EXTENTOS_CATALOG_KEYS"], text: "A folder whose *.pub files (Ed25519 public keys, PEM) are trusted to sign catalogs, besides the keys built in. A file that is not a regular file is skipped with a warning."),
        Variable(names: ["EXTENTOS_CA_FILE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"], text: "A CA bundle (PEM) trusted for https, for a private mirror or a proxy that intercepts TLS; the first one set is used. Certificate verification is never turned off."),
        Variable(names: ["EXTENTOS_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"], text: "1, on, yes or true: open no network connection at all, as --offline. A command that needs the network fails with code offline; prefetch ends with exit 0. TRANSFORMERS_OFFLINE is read only when HF_HUB_OFFLINE is unset or empty, as the Hub client reads it."),
        Variable(names: ["EXTENTOS_MEMORY_MB", "EXTENTOS_MEMORY_AVAILABLE_MB"], text: "Override the physical memory and the memory available now (otherwise /proc/meminfo, capped by a cgroup v2 memory.max), in whole MiB from 1 to 1073741824. Empty counts as unset; any other value is ignored with a warning line, and doctor fails a check."),
        Variable(names: ["EXTENTOS_NO_HF_CACHE"], text: "1: download, voice download and prefetch do not look for the model's files in the Hugging Face cache (import without DIR still does)."),
        Variable(names: ["HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"], text: "The Hugging Face cache, in the Hub client's order: $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub; ~ and $VAR are expanded as the client expands them, and an empty variable counts as unset."),
        Variable(names: ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"], text: "The Hugging Face token, sent as a bearer token only to the origin of a catalog source marked \"auth\": \"huggingface\" (never to the CDN it redirects to, nor to a --mirror). HUGGING_FACE_HUB_TOKEN is the older name, read when HF_TOKEN is unset."),
        Variable(names: ["HF_TOKEN_PATH"], text: "The token file when no token variable is set. Default: $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token. It must be a regular file this user can read (else code tokenUnusable, exit 77)."),
        Variable(names: ["HF_HUB_DISABLE_IMPLICIT_TOKEN"], text: "1, on, yes or true: send no Hugging Face token."),
        Variable(names: ["HF_ENDPOINT"], text: "A Hub mirror, such as https://hf-mirror.com: every source on https://huggingface.co is fetched from it instead, its path kept. It must be an https URL (plain http only to 127.0.0.1 or localhost) without a login, query or fragment, else code invalidSetting. --mirror wins over it."),
        Variable(names: ["NETRC"], text: "A netrc file (machine HOST login USER password PASS) whose logins every request may use; default ~/.netrc. It must be a regular file, and doctor fails its credentials check when group or others can read it."),
        Variable(names: ["https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"], text: "The proxy, by libcurl's rules: https_proxy (or HTTPS_PROXY) for https, http_proxy (lowercase only) for plain http, all_proxy for both, no_proxy for hosts that bypass it."),
        Variable(names: ["HTTP_PROXY"], text: "Ignored, as curl ignores it (a CGI request can set it); doctor notes it when it is set."),
        Variable(names: ["EXTENTOS_METERED"], text: "yes or no: stands in for NetworkManager's answer to prefetch --require-unmetered; any other value is ignored with a warning line."),
        Variable(names: ["DBUS_SYSTEM_BUS_ADDRESS"], text: "The system bus asked for NetworkManager's metered state (default unix:path=/run/dbus/system_bus_socket)."),
        Variable(names: ["EXTENTOS_NOW", "EXTENTOS_LOADAVG", "EXTENTOS_POWER_SUPPLY_DIR"], text: "Stand in for prefetch's readings, for tests and rehearsals: the local time (ISO 8601, advancing with the clock from there), the 1-minute load average, and the folder read instead of /sys/class/power_supply."),
    ]

    /// What the command reads and writes on disk.
    static let files: [(path: String, text: String)] = [
        ("STORE/", "The store: $EXTENTOS_MODELS_DIR, else $XDG_DATA_HOME/extentos/models, else ~/.local/share/extentos/models, or --store. It is the user's: installing or removing this program never touches it."),
        ("STORE/records.sqlite3", "The install records (SQLite, WAL: with -wal and -shm beside it): installs and their files, resume state, reservations, the history, the highest catalog version seen. A damaged file is never deleted or rewritten: doctor says how to move it aside."),
        ("STORE/ID/", "An installed model; STORE/voices/ID/ an installed voice."),
        ("STORE/.partial/", "Resumable data of downloads not finished; gc removes what no download can use."),
        ("STORE/.staging/", "A verified tree about to be renamed into place."),
        ("STORE/.locks/", "One lock file per model (flock), and the catalog's and prefetch's."),
        ("STORE/.catalog/", "Signed catalogs the store accepted (VERSION.json and VERSION.json.sig), keys named by them (keys/NAME.pub), and stored catalogs set aside as damaged (damaged/)."),
        ("~/.netrc", "Logins for requests (see NETRC)."),
        ("~/.cache/huggingface/", "The Hugging Face cache and token file, read, never written (see HF_HOME)."),
        ("/usr/lib/systemd/user/glasses-local-prefetch.timer", "A nightly prefetch as a systemd user timer (it starts glasses-local-prefetch.service beside it), installed by the Debian package and disabled until a user enables it: systemctl --user enable --now glasses-local-prefetch.timer (and loginctl enable-linger so it runs while the user is logged out)."),
        ("/proc/meminfo, /proc/loadavg, /sys/class/power_supply/", "The memory, load and power readings behind auto and prefetch (memory capped by the cgroup's memory.max)."),
    ]

    /// Examples for the EXAMPLES section: what it does, then the command line.
    static let examples: [(text: String, command: String)] = [
        ("See the catalog, what is installed and what fits:", "glasses-local list"),
        ("Ask which model to run now, step by step:", "glasses-local auto --explain"),
        ("Download a model (Ctrl-C keeps the partial data; run it again to resume):", "glasses-local download local-qwen3-1.7b"),
        ("Prefetch every night at a quiet hour, as this user:", "systemctl --user enable --now glasses-local-prefetch.timer"),
        ("Take a signed catalog update:", "glasses-local catalog update --from https://HOST/PATH/catalog.json"),
    ]

    // MARK: The page

    static func page(commands: [CommandSpec]) -> String {
        var lines: [String] = []
        /// Plain words, escaped.
        func text(_ words: String) { lines.append(guarded(escape(words))) }
        /// A line already in roff (bold and italic pieces escaped by `bold`/`italic`).
        func roff(_ line: String) { lines.append(guarded(line)) }
        /// A tagged paragraph: the tag in roff, the body in plain words.
        func tagged(_ tag: String, _ body: String) {
            lines.append(".TP")
            roff(tag)
            text(body)
        }
        func option(_ o: OptionSpec) -> String {
            bold(o.name) + (o.valueName.map { " " + italic($0.lowercased()) } ?? "")
        }

        lines.append(".TH GLASSES\\-LOCAL 1 \"\" \"glasses\\-local \(escape(version))\" \"User Commands\"")
        // No hyphenation (paths and options break badly) and a ragged right margin.
        lines.append(".nh")
        lines.append(".ad l")
        lines.append(".SH NAME")
        text("glasses-local - manage the on-device models of the Extentos glasses SDK")
        lines.append(".SH SYNOPSIS")
        roff(bold("glasses-local") + " [" + italic("global options") + "] " + italic("command") + " [" + italic("arguments") + "]")
        lines.append(".br")
        roff(bold("glasses-local") + " " + bold("--version") + " | " + bold("--help") + " | " + bold("help") + " [" + italic("command") + "]")

        lines.append(".SH DESCRIPTION")
        text(Help.overview)
        lines.append(".PP")
        text("It keeps a catalog of local AI models, tells whether a model fits this device, chooses which model to run or why the cloud must serve, downloads models resumably while verifying every byte against the catalog's SHA-256, installs them atomically into the store and records each install. Global options may stand before or after the command; help COMMAND, -h and --help work everywhere.")
        lines.append(".PP")
        text("Text output is for people and never drives the terminal: a control character in anything printed is written as \\uXXXX. With --json a command prints one JSON document on standard output (JSON lines for the commands that stream: download, prefetch, voice download) and its human message on standard error; a failed command's document has an \"error\" object with its code, message and exitCode. Sizes are in MiB (2^20 bytes).")

        lines.append(".SH OPTIONS")
        text("These options are accepted by every command.")
        for o in globalOptions { tagged(option(o), o.help + (o.accepts.map { " Accepts: \($0)." } ?? "")) }
        tagged(bold("--version"), "Print the version, the commit it was built from and the version of the catalog built in (with --json, as one JSON object).")
        tagged(bold("-h") + ", " + bold("--help"), "Print help for the command (or for all commands), then exit 0.")

        lines.append(".SH COMMANDS")
        for spec in commands {
            lines.append(".SS \"" + escape(spec.name) + "\"")
            text(spec.abstract)
            if !spec.discussion.isEmpty {
                lines.append(".PP")
                text(spec.discussion)
            }
            lines.append(".PP")
            roff(bold("Usage:") + " " + escape(spec.usage))
            for argument in spec.arguments { tagged(italic(argument.label), argument.help) }
            for o in spec.options { tagged(option(o), o.help + (o.accepts.map { " Accepts: \($0)." } ?? "")) }
            if !spec.exits.isEmpty {
                lines.append(".PP")
                roff(bold("Exit status:"))
                for exit in spec.exits { tagged(bold(String(exit.status.rawValue)), exit.when) }
            }
        }

        lines.append(".SH ENVIRONMENT")
        for variable in environment {
            tagged(variable.names.map(bold).joined(separator: ", "), variable.text)
        }

        lines.append(".SH FILES")
        for file in files { tagged(italic(file.path), file.text) }

        lines.append(".SH EXIT STATUS")
        text("The one table of exit statuses; each failure's code (the --json error code) is listed under its status.")
        for status in ExitStatus.allCases {
            let codes = ErrorCode.allCases.filter { $0.exit == status }.map(\.rawValue)
            let body = status.meaning.prefix(1).uppercased() + status.meaning.dropFirst() + "."
                + (codes.isEmpty ? "" : " Codes: " + codes.joined(separator: ", ") + ".")
            tagged(bold(String(status.rawValue)), body)
        }

        lines.append(".SH EXAMPLES")
        for (index, example) in examples.enumerated() {
            if index > 0 { lines.append(".PP") }
            text(example.text)
            lines.append(".PP")
            lines.append(".RS")
            text(example.command)
            lines.append(".RE")
        }

        lines.append(".SH SEE ALSO")
        roff(bold("systemctl") + "(1), " + bold("crontab") + "(5), " + bold("systemd.timer") + "(5), " + bold("curl") + "(1)")
        return lines.joined(separator: "\n")
    }

    // MARK: roff

    /// `text` as roff: a backslash, a hyphen and quotes become escapes (`\e`, `\-`, `\(aq`),
    /// so no input can start an escape of its own; other control characters are dropped.
    /// Outside ASCII, the characters help texts use become glyphs every output device has
    /// (`…` is `...`, `—` is `\(em`: `man` in the C locale formats for ASCII, where a
    /// `\[u2026]` would be a warning); any other one is `\[uXXXX]`.
    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            case "'": out += "\\(aq"
            case "`": out += "\\(ga"
            case "\"": out += "\\(dq"
            case "\n", "\t": out += " "
            case "\u{2026}": out += "..."
            case "\u{2014}": out += "\\(em"
            case "\u{2013}": out += "\\(en"
            case "\u{2018}", "\u{2019}": out += "\\(aq"
            case "\u{201C}", "\u{201D}": out += "\\(dq"
            case "\u{00D7}": out += "\\(mu"
            case "\u{2192}": out += "\\(->"
            case "\u{2264}": out += "\\(<="
            case "\u{2265}": out += "\\(>="
            default:
                if !scalar.isASCII {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
                } else if scalar.value >= 0x20 && scalar.value != 0x7F {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    /// A text line may not start with `.` or `'`: roff would take it for a request.
    private static func guarded(_ line: String) -> String {
        line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : line
    }

    private static func bold(_ text: String) -> String { "\\fB" + escape(text) + "\\fR" }
    private static func italic(_ text: String) -> String { "\\fI" + escape(text) + "\\fR" }
}
