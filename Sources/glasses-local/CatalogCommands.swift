import FoundationEssentials
import LocalModelKit

/// `catalog validate` and `catalog hash`.
enum CatalogCommands {
    /// `catalog hash`'s options: with --id and --base-url, a whole catalog.
    struct HashOptions: OptionGroup {
        let id = Option("--id", value: "ID", help: "Model id for a whole-catalog output.", .checked(accepts: "a catalog model id", CatalogRules.idProblem))
        let baseURL = Option("--base-url", value: "URL", help: "Where the files are served (ends with '/').",
                             .checked(accepts: "an https URL ending with '/'") { url in
                                 CatalogRules.urlProblem(url) ?? CatalogRules.sourceURLPathProblem(url) ?? (url.hasSuffix("/") ? nil : "must end with '/'")
                             })
        let displayName = Option("--display-name", value: "NAME", help: "Display name (default: the id).", .text)
        let kind = Option("--kind", value: "KIND", help: "llm or voice (default llm).", ValueParser<ModelKind>.choice())
        let requiredMb = Option("--required-mb", value: "MB", help: "Memory the loaded model needs (default 1000).", .integer(1...Int.max, accepts: "a positive number"))
        let autoEligible = Flag("--auto-eligible", help: "Let autoChoice pick it.")
        let catalogVersion = Option("--catalog-version", value: "N", help: "catalogVersion of the output (default 1).", .integer(1...Int.max, accepts: "a positive number"))

        var rules: [OptionRule] { [.together(id, baseURL)] }
    }
    static let hashOptions = HashOptions()

    static let commands: [Command] = [
        Command("catalog validate", abstract: "Check a catalog file against every rule; list every problem with its JSON path.",
                discussion: "An expiresAt that has passed is a problem; with a store that has seen a newer catalog, so is a lower catalogVersion (rollback).",
                arguments: [Argument("file", "The catalog JSON file.", completion: .file)],
                exits: [ExitCase(.invalidCatalog, "The catalog has any problem.")], run: validate),
        Command("catalog hash", abstract: "Print the catalog 'files' entries (path, size, sha256) of a folder.",
                discussion: "For custom models and mirrors. With --id and --base-url it prints a whole catalog with one model, ready for --catalog.",
                arguments: [Argument("dir", "The folder holding the model's files.", completion: .directory)],
                options: hashOptions, run: hash),
    ]

    static func validate(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let file = context.invocation.positional[0]
        var issues: [CatalogIssue] = []
        var catalog: Catalog?
        do {
            catalog = try CatalogLoader().load(contentsOf: file)
        } catch {
            issues = error.issues
        }
        let unreadable = catalog == nil && !FileIO.exists(file)
        // P7: an expired catalog is no longer trusted, whichever store reads it.
        let now = SystemClock.wallSeconds()
        if let catalog, catalog.isExpired(now: Int64(now)), let expiresAt = catalog.expiresAt {
            issues.append(CatalogIssue(path: "expiresAt",
                                       message: "\(expiresAt) has passed (now \(CivilTime.iso8601(now) ?? "unknown")): the catalog expired and is no longer trusted"))
        }
        // P7: a store that has seen a newer catalog refuses this one.
        if let catalog, let root = try? context.storeRoot,
           let recorded = try context.attempt({ try LocalModelEngine.recordedCatalogVersion(storeRoot: root) }),
           catalog.catalogVersion < recorded {
            issues.append(CatalogIssue(path: "catalogVersion",
                                       message: "\(catalog.catalogVersion) is lower than version \(recorded) already used by the store \(root) (rollback)"))
        }
        let c = context.console
        if c.json {
            var doc: [(key: String, value: JSONValue)] = [("file", .string(file)), ("valid", .bool(issues.isEmpty)),
                                                          ("issues", .array(issues.map { ["path": .string($0.path), "message": .string($0.message)] }))]
            if let catalog, issues.isEmpty {
                doc.append(("catalogVersion", JSONValue(catalog.catalogVersion)))
                if let expiresAt = catalog.expiresAt { doc.append(("expiresAt", .string(expiresAt))) }
                doc.append(("models", JSONValue(catalog.models.count)))
                doc.append(("files", JSONValue(catalog.models.reduce(0) { $0 + $1.files.count })))
                doc.append(("installedBytes", .int(catalog.models.reduce(0) { $0 + $1.installedBytes })))
            }
            if !issues.isEmpty {
                // Every failed command's JSON carries `error`, the issues stay beside it.
                let error = CLIError(.invalidCatalog, message: "catalog \(file) is invalid (\(issues.count) problem\(issues.count == 1 ? "" : "s")): "
                                         + issues.map(\.description).joined(separator: "; "))
                doc.append(("error", error.json))
            }
            c.printJSON(.object(doc))
        } else if let catalog, issues.isEmpty {
            let files = catalog.models.reduce(0) { $0 + $1.files.count }
            let bytes = catalog.models.reduce(Int64(0)) { $0 + $1.installedBytes }
            let llm = catalog.models.filter { $0.kind == .llm }.count
            let expiry = catalog.expiresAt.map { ", expires \($0)" } ?? ""
            c.say("\(file): valid — catalog version \(catalog.catalogVersion)\(expiry), \(catalog.models.count) model\(catalog.models.count == 1 ? "" : "s") (\(llm) llm, \(catalog.models.count - llm) voice), \(Format.grouped(files)) files, \(Format.bytes(bytes))")
            for model in catalog.models where model.hasSizeOnlyFiles {
                let unhashed = model.files.filter { $0.sha256 == nil }.count
                c.say("  note: \(model.id): \(unhashed) file(s) have no SHA-256 and are size-checked only")
            }
        }
        if !issues.isEmpty {
            c.err("Error: catalog \(file) is invalid (\(issues.count) problem\(issues.count == 1 ? "" : "s")):")
            for issue in issues { c.err("  \(issue)") }
            c.err(unreadable ? "Check the path: \(file) does not exist." : "Fix each problem above (Catalog/catalog.schema.json describes the format).")
            return .invalidCatalog
        }
        return .ok
    }

    static func hash(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let dir = context.invocation.positional[0]
        let inv = context.invocation
        let walked: (files: [String], others: [String])
        do {
            walked = try FileIO.walkFiles(dir)
        } catch {
            throw CLIError(.io, message: "\(error.message). Pass a folder that holds the model's files.")
        }
        if !walked.others.isEmpty {
            throw CLIError(.notRegularFile, message: "\(dir) holds \(walked.others.count == 1 ? "1 entry that is not a regular file" : "\(walked.others.count) entries that are not regular files") (first: \(walked.others[0])); a catalog lists regular files only. Replace symlinks with the files they point to.")
        }
        if walked.files.isEmpty {
            throw CLIError(.empty, message: "\(dir) holds no files to hash")
        }
        var entries: [JSONValue] = []
        for path in walked.files {
            if let problem = CatalogRules.pathProblem(path) {
                throw CLIError(.badPath, message: "\(dir)/\(path): \(problem)")
            }
            let full = dir + "/" + path
            let result: (sha256: String, size: Int64)
            do {
                result = try SHA256Hasher.hashFile(atPath: full)
            } catch {
                throw CLIError(.io, message: "\(error)")
            }
            if result.size == 0 {
                throw CLIError(.emptyFile, message: "\(full) is empty; catalog files must have at least one byte")
            }
            entries.append(["path": .string(path), "size": .int(result.size), "sha256": .string(result.sha256)])
        }

        let o = hashOptions
        // Given together or not at all (the parser checks).
        guard let id = inv[o.id], let base = inv[o.baseURL] else {
            context.console.out(JSONValue.object([("files", .array(entries))]).serialized(pretty: true))
            return .ok
        }
        let kind = inv[o.kind] ?? .llm
        let requiredMb = inv[o.requiredMb] ?? 1000
        let version = inv[o.catalogVersion] ?? 1
        let now = Format.date(Date().timeIntervalSince1970)
        let doc: JSONValue = .object([
            ("schemaVersion", 1), ("catalogVersion", JSONValue(version)), ("generatedAt", .string(now)),
            ("models", [.object([
                ("id", .string(id)), ("kind", .string(kind.rawValue)), ("displayName", .string(inv[o.displayName] ?? id)),
                ("requiredMb", JSONValue(requiredMb)), ("autoEligible", .bool(inv[o.autoEligible])),
                ("files", .array(entries)),
                ("sources", [["type": "files", "baseURL": .string(base)]]),
            ])]),
        ])
        context.console.out(doc.serialized(pretty: true))
        return .ok
    }
}
