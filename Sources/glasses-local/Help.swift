import LocalModelKit

/// Help text in swift-argument-parser's layout, rendered from the commands' declarations.
enum Help {
    static let overview = "Manage the on-device models of the Extentos glasses SDK: list, fit, choose, verify."

    /// `--version` and `-h, --help`, which the parser handles itself, as help lists them.
    static let versionOption = OptionSpec(name: "--version", valueName: nil, help: "Show the version.")
    static let helpOption = OptionSpec(name: "-h, --help", valueName: nil, help: "Show help information.")

    static func root() -> String {
        var text = "OVERVIEW: \(overview)\n\n"
        text += "USAGE: glasses-local [<global options>] <command> [<args>]\n\n"
        text += "OPTIONS:\n" + optionLines(globalOptions + [versionOption, helpOption])
        text += "\nSUBCOMMANDS:\n"
        let specs = allCommands.map(\.spec)
        let width = (specs.map(\.name.count).max() ?? 0) + 2
        for spec in specs {
            text += "  " + spec.name.padded(to: width) + spec.abstract + "\n"
        }
        text += "\n  See 'glasses-local help <subcommand>' for detailed help.\n"
        // From the one table of exit statuses.
        let codes = ExitStatus.allCases.map { "\($0.rawValue) \($0.meaning)" }
        text += "\nEXIT CODES: " + codes.prefix(6).joined(separator: ", ") + ",\n  " + codes.dropFirst(6).joined(separator: ", ") + "."
        return text
    }

    static func command(_ spec: CommandSpec) -> String {
        var text = "OVERVIEW: \(spec.abstract)\n"
        if !spec.discussion.isEmpty { text += "\n" + wrap(spec.discussion, indent: 0) + "\n" }
        text += "\nUSAGE: \(spec.usage)\n"
        if !spec.arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for arg in spec.arguments { text += "  " + arg.label.padded(to: 24) + arg.help + "\n" }
        }
        text += "\nOPTIONS:\n" + optionLines(spec.options + globalOptions + [helpOption])
        if !spec.exits.isEmpty {
            text += "\nEXIT STATUS:\n"
            for exit in spec.exits {
                let lines = wrap(exit.when, indent: 8)
                text += "  " + String(exit.status.rawValue).padded(to: 6) + String(lines.dropFirst(8)) + "\n"
            }
        }
        if !spec.subcommands.isEmpty {
            text += "\nSUBCOMMANDS:\n"
            for (name, abstract) in zip(spec.subcommands, spec.subcommandAbstracts) {
                text += "  " + name.padded(to: 18) + abstract + "\n"
            }
            text += "\n  See 'glasses-local help \(spec.name) <subcommand>' for detailed help.\n"
        }
        return String(text.dropLast())
    }

    static func optionLines(_ options: [OptionSpec]) -> String {
        var text = ""
        for option in options {
            let label = option.name + (option.valueName.map { " <\($0.lowercased())>" } ?? "")
            if label.count >= 24 {
                text += "  \(label)\n" + wrap(option.help, indent: 26) + "\n"
            } else {
                let lines = wrap(option.help, indent: 26)
                text += "  " + label.padded(to: 24) + String(lines.dropFirst(26)) + "\n"
            }
        }
        return text
    }

    /// Wraps at 100 columns with a hanging indent.
    static func wrap(_ text: String, indent: Int) -> String {
        var lines: [String] = []
        var line = String(repeating: " ", count: indent)
        for word in text.split(separator: " ") {
            if line.count + word.count + 1 > 100 && line.trimmingWhitespace().count > 0 {
                lines.append(line)
                line = String(repeating: " ", count: indent)
            }
            line += (line.trimmingWhitespace().isEmpty ? "" : " ") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}
