import LocalModelKit

/// `voice status | voice download | voice delete`: the catalog's on-device voice (the
/// Kokoro bundle), through the same engine calls as `download` and `delete`.
enum VoiceCommands {
    /// `voice download`'s options.
    struct DownloadOptions: OptionGroup {
        let source = Option("--source", value: "KIND", help: "archive or files: use only the catalog's source of that kind (default: the catalog's order).",
                            .choice([SourceKind.archive, .files]))
        let transfer = TransferOptions()
    }
    static let downloadOptions = DownloadOptions()

    static let commands: [Command] = [
        Command("voice status", abstract: "Say whether the on-device voice is installed, partly downloaded or absent.",
                discussion: "Shows its size, the source it was installed from, where it lives, and whether it fits this device's storage.",
                run: status),
        Command("voice download", abstract: "Download, verify and install the on-device voice (resumable).",
                options: downloadOptions, exits: downloadExits, run: download),
        Command("voice delete", abstract: "Delete the on-device voice and its partial data; print the space freed.", run: delete),
    ]

    /// The catalog's voice model (the first of kind `voice`).
    static func voice(_ context: CommandContext) throws(CLIError) -> CatalogModel {
        guard let model = try context.catalog().models.first(where: { $0.kind == .voice }) else {
            throw CLIError(.unknownModel, message: "the catalog (\(context.catalogSource)) has no voice model; use a catalog that lists one (kind \"voice\").")
        }
        return model
    }

    static func status(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let model = try voice(context)
        let engine = try context.engine()
        let status = try context.attempt { try engine.status(of: model.id) }
        let record = try context.attempt { try engine.record(of: model.id) }
        let state = status.isInstalled ? "installed" : (status.fit.presentBytes > 0 && !status.placedBundle ? "partial" : "notInstalled")
        let path = record.map(engine.layout.folder(of:)) ?? engine.layout.installPath(id: model.id, kind: model.kind)
        let source = status.isInstalled ? record?.source : nil
        if context.console.json {
            context.console.printJSON([
                "modelId": .string(model.id), "displayName": .string(model.displayName), "state": .string(state),
                "installedBytes": .int(model.installedBytes), "downloadBytes": .int(model.downloadBytes),
                "presentBytes": .int(status.fit.presentBytes), "source": JSONValue(source), "placedBundle": .bool(status.placedBundle),
                "path": status.isInstalled ? .string(path) : .null, "fit": QueryCommands.fitJSON(status.fit),
            ])
            return .ok
        }
        let c = context.console
        switch state {
        case "installed": c.say("\(model.id) (\(model.displayName)): installed")
        case "partial": c.say("\(model.id) (\(model.displayName)): partly downloaded, \(Format.bytes(status.fit.presentBytes)) of \(Format.bytes(model.downloadBytes)) kept")
        case _ where status.placedBundle:
            c.say("\(model.id) (\(model.displayName)): placed in \(path), not verified yet: 'glasses-local verify \(model.id)' (or 'voice download') checks the hashes and installs it, fetching nothing")
        default: c.say("\(model.id) (\(model.displayName)): not installed")
        }
        c.say("  size:    \(Format.bytes(model.installedBytes)) on disk (\(Format.grouped(Int(model.installedBytes))) bytes, \(model.files.count) files); download \(Format.bytes(model.downloadBytes)) from its first source")
        if let source { c.say("  source:  \(source)") }
        c.say(status.isInstalled ? "  folder:  \(path)" : "  folder:  \(path) (when installed)")
        let fit = status.fit
        c.say("  fits:    " + (status.isInstalled ? "installed" : fit.fits
            ? "yes: needs \(Format.mb(fit.requiredMb)), \(Format.mb(fit.availableMb)) available"
            : "no: needs \(Format.mb(fit.requiredMb)), only \(Format.mb(fit.availableMb)) available"))
        return .ok
    }

    static func download(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let model = try voice(context)
        var options = try TransferCommands.options(context)
        if let kind = context.invocation[downloadOptions.source] { options.source = kind }
        return try TransferCommands.download([model.id], options: options, context)
    }

    static func delete(_ context: CommandContext) throws(CLIError) -> ExitCode {
        try TransferCommands.delete([try voice(context).id], context)
    }
}
