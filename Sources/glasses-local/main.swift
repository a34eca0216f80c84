import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LocalModelKit
internal import CBuildInfo

/// Help text in swift-argument-parser's layout.
enum Help {
    static let overview = "Manage the on-device models of the Extentos glasses SDK: list, fit, choose, verify."

    static func root() -> String {
        var text = "OVERVIEW: \(overview)\n\n"
        text += "USAGE: glasses-local [<global options>] <command> [<args>]\n\n"
        text += "OPTIONS:\n" + optionLines(globalOptions + [
            OptionSpec(name: "--version", valueName: nil, help: "Show the version."),
            OptionSpec(name: "-h, --help", valueName: nil, help: "Show help information."),
        ])
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
            for arg in spec.arguments { text += "  " + arg.name.padded(to: 24) + arg.help + "\n" }
        }
        text += "\nOPTIONS:\n" + optionLines(spec.options + globalOptions + [OptionSpec(name: "-h, --help", valueName: nil, help: "Show help information.")])
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

let version = "0.1.0"

func runMain() -> Int32 {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let parser = ArgumentParser(commands: allCommands)
    let wantsJSON = arguments.contains("--json")
    let console = Console(json: wantsJSON, quiet: arguments.contains("--quiet"))

    func report(_ error: CLIError) -> Int32 {
        if console.json {
            console.printJSON(["error": error.json])
        }
        console.err("Error: \(error.message)")
        if error.exitCode == .usage {
            if let spec = error.usageOf {
                console.err("Usage: \(spec.usage)")
                console.err("  See 'glasses-local \(spec.name) --help'.")
            } else {
                console.err("Usage: glasses-local [<global options>] <command> [<args>]")
                console.err("  See 'glasses-local --help'.")
            }
        }
        return error.exitCode.rawValue
    }

    let parsed: ParseResult
    do {
        parsed = try parser.parse(arguments)
    } catch {
        return report(error)
    }
    switch parsed {
    case .version:
        // The version, the commit and the catalog built in: what a bug report needs. The commit
        // is embedded by Scripts/ship (`git describe --always --dirty`; Package.swift,
        // CBuildInfo); other builds say "unknown".
        let buildCommit = String(cString: glasses_local_build_commit())
        let catalogVersion = BundledCatalog.catalog.catalogVersion
        if console.json {
            console.printJSON(["version": .string(version), "commit": .string(buildCommit), "catalogVersion": .int(Int64(catalogVersion))])
        } else {
            console.out("glasses-local \(version)\ncommit \(buildCommit)\nbuilt-in catalog version \(catalogVersion)")
        }
        return 0
    case .help(let spec):
        console.out(spec.map(Help.command) ?? Help.root())
        return 0
    case .run(let invocation):
        // Validate global option values once, for every command.
        if let mirror = invocation.value("--mirror"), let problem = CatalogRules.urlProblem(mirror) {
            return report(.usage("--mirror: \(problem)", of: invocation.command))
        }
        if let stall = invocation.value("--stall-timeout"), Double(stall).map({ $0 >= 1 && $0 <= 86_400 }) != true {
            return report(.usage("--stall-timeout must be 1…86400 seconds, got '\(stall.prefix(40))'", of: invocation.command))
        }
        let context = CommandContext(invocation: invocation, console: console, environment: ProcessInfo.processInfo.environment)
        do {
            return try invocation.run(context).rawValue
        } catch {
            return report(error)
        }
    }
}

exit(runMain())
