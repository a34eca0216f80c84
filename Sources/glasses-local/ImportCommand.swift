import LocalModelKit

/// `glasses-local import ID [DIR]`: a model installed from copies already on this machine
/// (a folder, or the Hugging Face cache). One file over the engine's `importModel`.
enum ImportCommand {
    static let command = Command(
        "import", abstract: "Install a model from copies of its files already on this machine.",
        discussion: "With DIR, each file is looked up under its catalog path in DIR (a USB stick, a folder from 'hf download --local-dir', a factory image). Without DIR, in the Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub), in the snapshot of the repository and revision the model's per-file source names; a file that snapshot lacks (the cache holds another revision) by its SHA-256 in the repository's blobs/, or unchanged in another of its snapshots. Each file is hard-linked into the store where the filesystem allows, else copied; the place is never changed. Every file is then checked: by SHA-256 where the catalog has one, by size where it has none (as for a bundle placed by hand). The model is installed when every file is good; otherwise the good ones are kept, the others are listed, and 'glasses-local download ID' fetches only those. No network is used.",
        arguments: [Argument("id", "The model to import."), Argument("dir", "The folder holding its files (default: the Hugging Face cache).", .optional)],
        exits: [ExitCase(.ok, "The model ends installed."),
                ExitCase(.failure, "A file is missing or does not match (the good ones are kept; 'download' fetches the rest).")],
        run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let inv = context.invocation
        let id = inv.positional[0]
        let place: LocalCopyPlace
        if inv.positional.count > 1 {
            place = .folder(FileIO.absolutePath(inv.positional[1]))
        } else if let hub = engine.localCopies.huggingFaceHub {
            place = .huggingFaceCache(hub: hub)
        } else {
            throw CLIError(.usage, message: "no Hugging Face cache folder is known (no HOME): set HF_HUB_CACHE or HF_HOME, or name the folder: glasses-local import \(id) DIR")
        }
        let report = try context.attempt { try engine.importModel(id, from: place) }
        let outstanding = report.outstanding
        let failure = report.installed ? nil : CLIError(.importIncomplete, message: outstanding.isEmpty
            ? "\(id) was not installed"
            : "\(outstanding.count) of \(report.files.count) file(s) of \(id) not found or not matching in \(report.folder ?? report.place); the \(report.files.count - outstanding.count) good one(s) are kept: run 'glasses-local download \(id)' to fetch only the rest")
        if context.console.json {
            var doc: [(key: String, value: JSONValue)] = [
                ("modelId", .string(id)), ("place", .string(report.place)), ("folder", JSONValue(report.folder)),
                ("installed", .bool(report.installed)), ("alreadyInstalled", .bool(report.alreadyInstalled)), ("path", JSONValue(report.path)),
                ("files", .array(report.files.map { f in
                    ["path": .string(f.path), "outcome": .string(f.outcome.rawValue), "detail": JSONValue(f.detail)]
                })),
            ]
            if let failure { doc.append(("error", failure.json)) }
            context.console.printJSON(.object(doc))
        } else {
            for f in report.files where f.outcome == .missing || f.outcome == .mismatch {
                context.console.say("\(id): \(f.path): \(f.outcome == .missing ? "missing" : "refused")\(f.detail.map { " (\($0))" } ?? "")")
            }
            let count = { (o: ImportedFile.Outcome) in report.files.filter { $0.outcome == o }.count }
            if report.alreadyInstalled {
                context.console.say("\(id): already installed in \(report.path ?? "")")
            } else if report.installed {
                context.console.say("\(id): installed in \(report.path ?? "") from \(report.folder ?? report.place): \(count(.linked)) file(s) linked, \(count(.copied)) copied, \(count(.present)) already in the store, every one verified")
            }
            if let failure { context.console.err("Error: \(failure.message)") }
        }
        return failure?.exitCode ?? .ok
    }
}
