// Hand-written argument parsing: global options anywhere on the line, a command
// (optionally with a subcommand), its own options and positional arguments.

import LocalModelKit

/// The process's exit status: the one table, `ExitStatus`, under the name the commands use.
typealias ExitCode = ExitStatus

/// An error the command line reports and exits with: its stable code (from the one code
/// table, `ErrorCode`), hence its exit status, and its message.
struct CLIError: Error {
    var code: ErrorCode
    var message: String
    /// The command whose usage to show for usage errors.
    var usageOf: CommandSpec?

    init(_ code: ErrorCode, message: String, usageOf: CommandSpec? = nil) {
        self.code = code
        self.message = message
        self.usageOf = usageOf
    }

    var exitCode: ExitCode { code.exit }

    static func usage(_ message: String, of command: CommandSpec?) -> CLIError {
        CLIError(.usage, message: message, usageOf: command)
    }
}

/// One option a command accepts.
struct OptionSpec {
    var name: String          // "--store"
    var valueName: String?    // "DIR"; nil for a flag
    var help: String
}

/// One command (or `catalog validate` style subcommand).
struct CommandSpec {
    var name: String                       // "fit" or "catalog validate"
    var abstract: String
    var discussion: String = ""
    var arguments: [(name: String, help: String)] = []
    /// How many positional arguments: `min...max`.
    var positional: ClosedRange<Int> = 0...0
    var options: [OptionSpec] = []
    var usage: String                      // "glasses-local fit <id>"
    /// For a group (`catalog`): its subcommands' last words and abstracts.
    var subcommands: [String] = []
    var subcommandAbstracts: [String] = []
}

/// One command as a value: its name, help and options, and what it runs. Each group's
/// file holds its commands; `allCommands` lists them in help order.
struct Command: Sendable {
    var spec: CommandSpec
    var run: @Sendable (CommandContext) throws(CLIError) -> ExitCode
}

/// Every command, in the order help lists them.
let allCommands: [Command] = QueryCommands.commands + TransferCommands.commands
    + [PrefetchCommand.command, ImportCommand.command, AddCommand.command, RemoveCommand.command, MirrorCommand.command]
    + VoiceCommands.commands + [Doctor.command] + CatalogCommands.commands + CatalogSigningCommands.commands
    + [CatalogUpdateCommand.command, Completions.command, ManPageCommand.command]

/// Options that every command accepts, before or after the command name.
let globalOptions: [OptionSpec] = [
    OptionSpec(name: "--store", valueName: "DIR", help: "The model store folder (default: $EXTENTOS_MODELS_DIR, else $XDG_DATA_HOME/extentos/models, else ~/.local/share/extentos/models)."),
    OptionSpec(name: "--catalog", valueName: "FILE", help: "Use this catalog file instead of the built-in one."),
    OptionSpec(name: "--mirror", valueName: "URL", help: "Replace the origin of every source URL (local mirrors, air-gapped installs); wins over HF_ENDPOINT."),
    OptionSpec(name: "--json", valueName: nil, help: "Print one JSON document (JSON lines for downloads) instead of text."),
    OptionSpec(name: "--quiet", valueName: nil, help: "Print only errors."),
    OptionSpec(name: "--no-progress", valueName: nil, help: "Never draw a progress bar."),
    OptionSpec(name: "--stall-timeout", valueName: "S", help: "Seconds under 1 KiB/s before a transfer is retried (default 30)."),
    OptionSpec(name: "--offline", valueName: nil, help: "Open no network connection at all (as EXTENTOS_OFFLINE=1, HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1): commands that need one fail with code offline; prefetch ends with exit 0."),
]

/// The parsed command line.
struct Invocation {
    var command: CommandSpec
    /// What the command runs.
    var run: (CommandContext) throws(CLIError) -> ExitCode
    var positional: [String] = []
    /// Option name → value ("" for flags). Last one wins.
    var options: [String: String] = [:]
    /// Option name → every value given, in order (`add --include A --include B`).
    var allValues: [String: [String]] = [:]

    func flag(_ name: String) -> Bool { options[name] != nil }
    func value(_ name: String) -> String? { options[name] }
    /// Every value of an option that may be repeated, in the order given.
    func values(_ name: String) -> [String] { allValues[name] ?? [] }
}

/// What the parser decided to do.
enum ParseResult {
    case run(Invocation)
    case help(CommandSpec?)
    case version
}

struct ArgumentParser {
    let commands: [Command]
    var specs: [CommandSpec] { commands.map(\.spec) }

    func command(named name: String) -> Command? { commands.first { $0.spec.name == name } }

    /// Parses `arguments` (without the program name).
    func parse(_ arguments: [String]) throws(CLIError) -> ParseResult {
        var words: [String] = []          // command words and positionals, in order
        var options: [String: String] = [:]
        var allValues: [String: [String]] = [:]
        var wantsHelp = false
        var index = 0
        var onlyPositionals = false

        // First pass: separate options from words. Command-specific options are checked
        // once the command is known; their values are taken here by looking them up in
        // every command's specs (an option name means the same everywhere).
        let allOptions = globalOptions + specs.flatMap(\.options)
        while index < arguments.count {
            let arg = arguments[index]
            index += 1
            if onlyPositionals || !arg.hasPrefix("-") || arg == "-" {
                words.append(arg)
                continue
            }
            if arg == "--" { onlyPositionals = true; continue }
            if arg == "-h" || arg == "--help" { wantsHelp = true; continue }
            if arg == "--version" { return .version }
            var name = arg
            var inlineValue: String?
            if let eq = arg.firstIndex(of: "="), arg.hasPrefix("--") {
                name = String(arg[..<eq])
                inlineValue = String(arg[arg.index(after: eq)...])
            }
            guard let spec = allOptions.first(where: { $0.name == name }) else {
                throw .usage("unknown option '\(name)'", of: commandGuess(words))
            }
            if spec.valueName != nil {
                if let inlineValue {
                    options[name] = inlineValue
                } else {
                    guard index < arguments.count else {
                        throw .usage("missing value for '\(name) <\(spec.valueName ?? "value")>'", of: commandGuess(words))
                    }
                    options[name] = arguments[index]
                    index += 1
                }
                allValues[name, default: []].append(options[name] ?? "")
            } else {
                if inlineValue != nil { throw .usage("'\(name)' takes no value", of: commandGuess(words)) }
                options[name] = ""
            }
        }

        // `help` and `help <command...>`.
        if words.first == "help" {
            let rest = Array(words.dropFirst())
            if rest.isEmpty { return .help(nil) }
            if let spec = resolve(rest)?.command.spec { return .help(spec) }
            if rest.count == 1, let group = groupSpec(rest[0]) { return .help(group) }
            throw .usage("unknown command '\(rest.joined(separator: " "))'", of: nil)
        }
        guard !words.isEmpty else {
            if wantsHelp { return .help(nil) }
            throw .usage("no command given", of: nil)
        }
        guard let (command, consumed) = resolve(words) else {
            if let group = groupSpec(words[0]) {
                if wantsHelp && words.count == 1 { return .help(group) }
                let subs = group.subcommands.joined(separator: ", ")
                throw .usage(words.count > 1 ? "unknown subcommand '\(words[0]) \(words[1])' (expected: \(subs))"
                                             : "'\(words[0])' needs a subcommand: \(subs)", of: group)
            }
            throw .usage("unknown command '\(words[0])'", of: nil)
        }
        let spec = command.spec
        if wantsHelp { return .help(spec) }

        // Command-specific options must belong to this command.
        for name in options.keys where !globalOptions.contains(where: { $0.name == name }) && !spec.options.contains(where: { $0.name == name }) {
            throw .usage("'\(name)' is not an option of '\(spec.name)'", of: spec)
        }
        let positional = Array(words.dropFirst(consumed))
        if positional.count < spec.positional.lowerBound {
            let missing = spec.arguments.dropFirst(positional.count).first?.name ?? "argument"
            throw .usage("missing \(missing)", of: spec)
        }
        if positional.count > spec.positional.upperBound {
            throw .usage("unexpected argument '\(positional[spec.positional.upperBound])'", of: spec)
        }
        return .run(Invocation(command: spec, run: command.run, positional: positional, options: options, allValues: allValues))
    }

    /// A command group such as `catalog` (its commands are named `catalog validate`, …).
    func groupSpec(_ name: String) -> CommandSpec? {
        let members = specs.filter { $0.name.hasPrefix(name + " ") }
        guard !members.isEmpty else { return nil }
        var spec = CommandSpec(name: name, abstract: "The \(name) commands: " + members.map { $0.name }.joined(separator: ", ") + ".",
                               usage: "glasses-local \(name) <subcommand>")
        spec.subcommands = members.map { String($0.name.dropFirst(name.count + 1)) }
        spec.subcommandAbstracts = members.map(\.abstract)
        return spec
    }

    /// The longest command name matching the leading words.
    private func resolve(_ words: [String]) -> (command: Command, consumed: Int)? {
        if words.count >= 2, let command = command(named: words[0] + " " + words[1]) { return (command, 2) }
        if let command = command(named: words[0]) { return (command, 1) }
        return nil
    }

    private func commandGuess(_ words: [String]) -> CommandSpec? {
        words.isEmpty ? nil : resolve(words)?.command.spec
    }
}
