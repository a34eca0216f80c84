import LocalModelKit

/// `glasses-local remove ID`: a model added with `add` dropped from the store's catalog,
/// its installed files with it. One file over the engine's `removeUserModel`.
enum RemoveCommand {
    static let command = Command(
        spec: CommandSpec(
            name: "remove", abstract: "Drop a model added with 'add': its installed files, then its entry in the store's catalog.",
            discussion: "Only models added with 'glasses-local add' can be removed; a model of the catalog is refused (exit 1: 'delete' removes its files). Refuses (exit 7) while another process downloads the model. Exits 5 for an id neither catalog has.",
            arguments: [("<id>", "A model added with 'glasses-local add'.")], positional: 1...1,
            usage: "glasses-local remove <id>"),
        run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let id = context.invocation.positional[0]
        let removal = try context.attempt { try engine.removeUserModel(id: id) }
        if context.console.json {
            context.console.printJSON(["modelId": .string(id), "removed": true, "deleted": .bool(removal.deleted.existed),
                                       "freedBytes": .int(removal.deleted.freedBytes)])
        } else {
            let files = removal.deleted.existed ? "its files deleted, \(Format.bytes(removal.deleted.freedBytes)) freed" : "nothing was installed"
            context.console.say("\(id): removed from \(UserCatalog.path(in: engine.layout)); \(files)")
        }
        return .ok
    }
}
