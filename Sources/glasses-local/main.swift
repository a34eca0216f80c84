import FoundationEssentials
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LocalModelKit
internal import CBuildInfo

let version = "0.1.0"

func runMain() -> Int32 {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let parser = ArgumentParser(commands: allCommands)
    // Before parsing, so that a usage error is reported as asked (`--json frob`).
    let global = GlobalOptions.shared
    let console = Console(json: arguments.contains(global.json.name), quiet: arguments.contains(global.quiet.name))

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
        let context = CommandContext(invocation: invocation, console: console, environment: ProcessInfo.processInfo.environment)
        defer { context.keepCatalogsUntilExit() }
        do {
            return try invocation.run(context).rawValue
        } catch {
            return report(error)
        }
    }
}

exit(runMain())
