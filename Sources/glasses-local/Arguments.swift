// Argument parsing: global options anywhere on the line, a command (optionally with a
// subcommand), its own options and positional arguments. Every option is looked up in the
// declarations of the command it is given to (Options.swift) and its value is parsed and
// checked there before the command runs: a command reads typed values, never strings.

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

/// One positional argument of a command.
struct Argument: Sendable {
    enum Arity: Sendable {
        case one, optional
        /// One or more.
        case many
        /// Zero or more.
        case optionalMany
    }

    var name: String
    var help: String
    var arity: Arity = .one
    var completion: ValueCompletion = .none

    init(_ name: String, _ help: String, _ arity: Arity = .one, completion: ValueCompletion = .none) {
        self.name = name
        self.help = help
        self.arity = arity
        self.completion = completion
    }

    /// `<id>`, `[<id>]`, `<id>...`, `[<id>...]`.
    var label: String {
        switch arity {
        case .one: return "<\(name)>"
        case .optional: return "[<\(name)>]"
        case .many: return "<\(name)>..."
        case .optionalMany: return "[<\(name)>...]"
        }
    }
}

/// One exit status a command may end with, and when: help, the man page and the reference
/// list them under the command (the meaning of each status is the one table, `ExitStatus`).
struct ExitCase: Sendable {
    var status: ExitStatus
    var when: String

    init(_ status: ExitStatus, _ when: String) {
        self.status = status
        self.when = when
    }
}

/// A command's declaration: its name, help, arguments, options and exit statuses.
struct CommandSpec: Sendable {
    var name: String                       // "fit" or "catalog validate"
    var abstract: String
    var discussion: String = ""
    var arguments: [Argument] = []
    /// The options' declarations, read when asked: a command line needs only its own
    /// command's, and reading every command's at start-up (reflection over 30 groups) was
    /// a quarter of a short command's instructions.
    var group: any OptionGroup = NoOptions()
    var exits: [ExitCase] = []
    /// For a group (`catalog`): its subcommands' last words and abstracts.
    var subcommands: [String] = []
    var subcommandAbstracts: [String] = []

    /// How many positional arguments: `min...max` (a repeated argument takes up to 64 in all).
    var positional: ClosedRange<Int> {
        let min = arguments.filter { $0.arity == .one || $0.arity == .many }.count
        let repeated = arguments.contains { $0.arity == .many || $0.arity == .optionalMany }
        return min...(repeated ? 64 : arguments.count)
    }

    /// `glasses-local fit <id>`, its options after the arguments.
    var usage: String {
        if !subcommands.isEmpty { return "glasses-local \(name) <subcommand>" }
        return (["glasses-local", name] + arguments.map(\.label) + options.map(\.usage)).joined(separator: " ")
    }

    /// Every option declared, in declaration order (``OptionGroup/specs``).
    var options: [OptionSpec] { group.specs }
    /// The rules over them (``OptionGroup/allRules``).
    var rules: [OptionRule] { group.allRules }

    func option(named name: String) -> OptionSpec? { options.first { $0.name == name } }
}

/// One command as a value: its declaration and what it runs. Each group's file holds its
/// commands; `allCommands` lists them in help order.
struct Command: Sendable {
    var spec: CommandSpec
    var run: @Sendable (CommandContext) throws(CLIError) -> ExitCode

    /// - Parameter options: the command's `OptionGroup`; its declarations are the options.
    init(_ name: String, abstract: String, discussion: String = "", arguments: [Argument] = [],
         options: some OptionGroup = NoOptions(), exits: [ExitCase] = [],
         run: @escaping @Sendable (CommandContext) throws(CLIError) -> ExitCode) {
        spec = CommandSpec(name: name, abstract: abstract, discussion: discussion, arguments: arguments,
                           group: options, exits: exits)
        self.run = run
    }
}

/// Every command, in the order help lists them.
let allCommands: [Command] = QueryCommands.commands + TransferCommands.commands
    + [PrefetchCommand.command, ImportCommand.command, AddCommand.command, RemoveCommand.command, MirrorCommand.command]
    + VoiceCommands.commands + [Doctor.command] + CatalogCommands.commands + CatalogSigningCommands.commands
    + [CatalogUpdateCommand.command, Completions.command, ManPageCommand.command]

/// The parsed command line: the command, its positional arguments, and each option's
/// typed value (read with `invocation[option]`).
struct Invocation {
    var command: CommandSpec
    /// What the command runs.
    var run: (CommandContext) throws(CLIError) -> ExitCode
    var positional: [String] = []
    /// Option name → every value given, parsed, in order.
    var values: [String: [any Sendable]] = [:]
    /// The flags given.
    var flags: Set<String> = []

    /// Whether the flag was given.
    subscript(flag: Flag) -> Bool { flags.contains(flag.name) }

    /// The option's value (the last one given), or nil when it was not given.
    subscript<Value>(option: Option<Value>) -> Value? { all(option).last }

    /// The value of an option declared `required` (the parser refuses a line without it).
    func required<Value>(_ option: Option<Value>) -> Value {
        guard option.required, let value = self[option] else { preconditionFailure("\(option.name) is not a required option of \(command.name)") }
        return value
    }

    /// Every value given to a repeatable option, in order (`add --include A --include B`).
    func all<Value>(_ option: Option<Value>) -> [Value] {
        (values[option.name] ?? []).map { value in
            // The parser stored what this very declaration's parser returned.
            guard let typed = value as? Value else { preconditionFailure("\(option.name) holds a \(type(of: value)), not a \(Value.self)") }
            return typed
        }
    }
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
        var given: [(spec: OptionSpec, text: String?)] = []
        var wantsHelp = false
        var index = 0
        var onlyPositionals = false

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
            let spec = try declaration(of: name, after: words)
            if let valueName = spec.valueName {
                if let inlineValue {
                    given.append((spec, inlineValue))
                } else {
                    guard index < arguments.count else {
                        throw .usage("missing value for '\(name) <\(valueName)>'", of: commandGuess(words))
                    }
                    given.append((spec, arguments[index]))
                    index += 1
                }
            } else {
                if inlineValue != nil { throw .usage("'\(name)' takes no value", of: commandGuess(words)) }
                given.append((spec, nil))
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

        // An option given before the command's name must be one of the command's, too.
        for (option, _) in given where !isGlobal(option.name) && spec.option(named: option.name) == nil {
            throw notAnOption(option.name, of: spec)
        }
        let positional = Array(words.dropFirst(consumed))
        if positional.count < spec.positional.lowerBound {
            let missing = spec.arguments.dropFirst(positional.count).first?.label ?? "argument"
            throw .usage("missing \(missing)", of: spec)
        }
        if positional.count > spec.positional.upperBound {
            throw .usage("unexpected argument '\(positional[spec.positional.upperBound])'", of: spec)
        }

        // Each value checked against its declaration, in the order given.
        var invocation = Invocation(command: spec, run: command.run, positional: positional)
        for (option, text) in given {
            guard let text, let parse = option.parse else {
                invocation.flags.insert(option.name)
                continue
            }
            do {
                invocation.values[option.name, default: []].append(try parse(text))
            } catch {
                throw .usage(option.refusal(error, text: text), of: spec)
            }
        }
        for option in spec.options where option.required && invocation.values[option.name] == nil {
            let help = option.help.hasSuffix(".") ? String(option.help.dropLast()) : option.help
            throw .usage("\(spec.name) needs \(option.name) \(option.valueName ?? "") (\(help.prefix(1).lowercased() + help.dropFirst()))", of: spec)
        }
        let present = Set(given.map(\.spec.name))
        for rule in spec.rules {
            switch rule {
            case .allOrNone(let options):
                let names = options.map(\.name)
                if names.contains(where: present.contains) && !names.allSatisfy(present.contains) {
                    throw .usage(Self.list(names) + " go together: give " + (names.count == 2 ? "both or neither" : "all or none"), of: spec)
                }
            case .atMostOne(let options):
                let names = options.map(\.name).filter(present.contains)
                if names.count > 1 { throw .usage(Self.list(names) + " exclude each other: give one", of: spec) }
            }
        }
        return .run(invocation)
    }

    /// `a`, `a and b`, `a, b and c`.
    static func list(_ names: [String]) -> String {
        names.count <= 2 ? names.joined(separator: " and ") : names.dropLast().joined(separator: ", ") + " and " + (names.last ?? "")
    }

    private func isGlobal(_ name: String) -> Bool { globalOptions.contains { $0.name == name } }

    /// The declaration `name` stands for: a global option, else an option of the command the
    /// words so far name. Before the command's name (`--parallel 4 download ID`) it is taken
    /// from the commands that declare it — a name takes a value in every command or in none
    /// (`CLIReferenceTests` checks it) — and checked against the command once it is known.
    private func declaration(of name: String, after words: [String]) throws(CLIError) -> OptionSpec {
        if let global = globalOptions.first(where: { $0.name == name }) { return global }
        if let command = words.first == "help" ? nil : resolve(words)?.command.spec {
            guard let own = command.option(named: name) else { throw notAnOption(name, of: command) }
            return own
        }
        guard let any = specs.lazy.compactMap({ $0.option(named: name) }).first else {
            throw .usage("unknown option '\(name)'", of: commandGuess(words))
        }
        return any
    }

    /// `--explain` given to `list`: an unknown option, or one of other commands.
    private func notAnOption(_ name: String, of command: CommandSpec) -> CLIError {
        let owners = specs.filter { $0.option(named: name) != nil }.map { "'\($0.name)'" }
        guard !owners.isEmpty else { return .usage("unknown option '\(name)'", of: command) }
        return .usage("'\(name)' is not an option of '\(command.name)' (it is one of \(Self.list(owners)))", of: command)
    }

    /// A command group such as `catalog` (its commands are named `catalog validate`, …).
    func groupSpec(_ name: String) -> CommandSpec? {
        let members = specs.filter { $0.name.hasPrefix(name + " ") }
        guard !members.isEmpty else { return nil }
        var spec = CommandSpec(name: name, abstract: "The \(name) commands: " + members.map { $0.name }.joined(separator: ", ") + ".")
        spec.subcommands = members.map { String($0.name.dropFirst(name.count + 1)) }
        spec.subcommandAbstracts = members.map(\.abstract)
        return spec
    }

    /// The longest command name matching the leading words.
    private func resolve(_ words: [String]) -> (command: Command, consumed: Int)? {
        guard let first = words.first else { return nil }
        if words.count >= 2, let command = command(named: first + " " + words[1]) { return (command, 2) }
        if let command = command(named: first) { return (command, 1) }
        return nil
    }

    private func commandGuess(_ words: [String]) -> CommandSpec? {
        words.isEmpty ? nil : resolve(words)?.command.spec
    }
}
