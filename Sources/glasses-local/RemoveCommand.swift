import LocalModelKit

/// `glasses-local remove ID`: a model added with `add` dropped from the store's catalog,
/// its installed files with it. One file over the engine's `removeUserModel`.
enum RemoveCommand {
    static let command = Command(
        "remove", abstract: "Drop a model added with 'add': its installed files, then its entry in the store's catalog.",
        discussion: "Only models added with 'glasses-local add' can be removed.",
        arguments: [Argument("id", "A model added with 'glasses-local add'.")],
        exits: [ExitCase(.failure, "A model of the catalog is refused ('delete' removes its files)."),
                ExitCase(.unknownModel, "Neither catalog has the id."),
                ExitCase(.busy, "Refused while another process downloads the model.")],
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
