import LocalModelKit

/// `glasses-local mirror DIR [ID...]`: installed models into a folder that any static web
/// server can serve as a mirror for `--mirror`. One file over the engine's `mirror`.
enum MirrorCommand {
    static let command = Command(
        "mirror", abstract: "Write installed models into a folder laid out as a mirror for --mirror.",
        discussion: "Each model's files go under the URL path of its per-file source (hard links where the filesystem allows, else copies, each replacing the old file atomically; a file already in place is left alone). The store is only read: a folder inside the store is refused, and links under the folder are never followed. Serve the folder with any static web server and point devices at it with --mirror http://host:port: they fetch nothing from the origin.",
        arguments: [Argument("dir", "The folder to write into (outside the store).", completion: .directory),
                    Argument("id", "Models to mirror (default: every installed one).", .optionalMany)],
        run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let dir = context.invocation.positional[0]
        let reports = try context.attempt { try engine.mirror(into: FileIO.absolutePath(dir), ids: Array(context.invocation.positional.dropFirst())) }
        if context.console.json {
            context.console.printJSON(["models": .array(reports.map { r in
                ["modelId": .string(r.modelId), "linked": JSONValue(r.linked), "copied": JSONValue(r.copied),
                 "unchanged": JSONValue(r.unchanged), "folder": JSONValue(r.folder), "skipped": JSONValue(r.skipped)]
            })])
        }
        for r in reports {
            if let why = r.skipped {
                context.console.say("\(r.modelId): skipped (\(why))")
            } else {
                context.console.say("\(r.modelId): \(r.linked) file(s) linked, \(r.copied) copied, \(r.unchanged) already in place, in \(r.folder ?? dir)")
            }
        }
        if reports.isEmpty { context.console.say("no installed models to mirror") }
        return .ok
    }
}
