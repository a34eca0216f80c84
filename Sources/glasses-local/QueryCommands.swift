import FoundationEssentials
import LocalModelKit

/// `list`, `info`, `fit`, `auto`, `history`: what the store and the device say.
enum QueryCommands {
    /// `auto`'s options.
    struct AutoOptions: OptionGroup {
        let explain = Flag("--explain", help: "Print each step of the rule.")
        let memoryShare = Option("--memory-share", value: "F", help: "Share of physical memory a model may use (default 0.5).",
                                 .number(accepts: "a number in (0, 1]") { $0 > 0 && $0 <= 1 })
    }
    static let autoOptions = AutoOptions()

    /// `history`'s options.
    struct HistoryOptions: OptionGroup {
        let limit = Option("--limit", value: "N", help: "Show at most the newest N events (default 100).",
                           .integer(1...Int.max, accepts: "a positive number"))
    }
    static let historyOptions = HistoryOptions()

    /// The commands that read the store and answer, as values (name, help, options, run).
    static let commands: [Command] = [
        Command("list", abstract: "List the catalog's models with install state and storage fit.",
                exits: [ExitCase(.failure, "The install records cannot be read (the catalog is still listed, every state unknown).")],
                run: list),
        Command("info", abstract: "Show one model: sizes, files, sources, state, fit.",
                arguments: [Argument("id", "A model id from 'glasses-local list'.")],
                exits: [ExitCase(.unknownModel, "Neither catalog has the id.")], run: info),
        Command("fit", abstract: "Tell whether installing a model fits this device's storage.",
                discussion: "Needed space counts the bytes not yet downloaded, unpack room for archives and a safety margin; available space is the store filesystem's free space for this user minus what other downloads have reserved.",
                arguments: [Argument("id", "A model id from 'glasses-local list'.")],
                exits: [ExitCase(.ok, "It fits, or it is installed."), ExitCase(.doesNotFit, "It does not fit."),
                        ExitCase(.unknownModel, "Neither catalog has the id.")],
                run: fit),
        Command("auto", abstract: "Choose the ladder model to run now, or say why the cloud must serve.",
                discussion: "EXTENTOS_MEMORY_MB and EXTENTOS_MEMORY_AVAILABLE_MB override the memory readings (\"what would a 4 GB device get?\") with a whole number of MiB from 1 to 1,073,741,824 (1 PiB); any other value is ignored with a warning.",
                options: autoOptions, run: auto),
        Command("history", abstract: "Show the install history (append-only), newest last.",
                arguments: [Argument("id", "Only this model's events.", .optional)],
                options: historyOptions, exits: [ExitCase(.unknownModel, "Neither the catalogs nor the records know the id.")],
                run: history),
    ]

    static func fitJSON(_ fit: StorageFit) -> JSONValue {
        ["modelId": .string(fit.modelId), "requiredMb": JSONValue(fit.requiredMb), "availableMb": JSONValue(fit.availableMb),
         "fits": .bool(fit.fits), "requiredBytes": .int(fit.requiredBytes), "availableBytes": .int(fit.availableBytes),
         "presentBytes": .int(fit.presentBytes)]
    }

    /// `[{"variable", "value", "reason", "message"}]`, for `auto --json` and `doctor --json`.
    static func overrideProblemsJSON(_ problems: [MemoryOverrideProblem]) -> JSONValue {
        .array(problems.map {
            ["variable": .string($0.variable), "value": .string($0.value), "reason": .string($0.reason.rawValue),
             "message": .string($0.description)]
        })
    }

    static func stateText(_ s: ModelStatus) -> String {
        if s.isInstalled { return s.updateAvailable ? "installed, update available" : "installed" }
        if s.placedBundle { return "placed, not verified" }
        if s.fit.presentBytes > 0 { return "partial \(Int(Double(s.fit.presentBytes) * 100 / Double(max(1, s.model.downloadBytes))))%" }
        return "-"
    }

    /// `list --json`'s "state": installed, partial, notInstalled — or unknown when the
    /// records cannot be read. A placed bundle is notInstalled (with `placedBundle`) until
    /// `verify` or a download adopts it.
    static func stateName(_ s: ModelStatus, recordsDamaged: Bool) -> String {
        if recordsDamaged { return "unknown" }
        if s.isInstalled { return "installed" }
        if s.placedBundle { return "notInstalled" }
        return s.isPartial || s.fit.presentBytes > 0 ? "partial" : "notInstalled"
    }

    /// The catalog with each model's state and storage fit. With a damaged records
    /// database it still lists the catalog — every state "unknown (records damaged)", the
    /// storage figures from the disk alone, as the library's `models()` answers — and
    /// exits 1 with the problem and its fix on stderr.
    static func list(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let state = try context.openStoreAllowingDamage(create: false)
        let engine = try context.engine(openExisting: false)
        var damage: RecordsError?
        if case .damaged(let error) = state { damage = error }
        let statuses: [ModelStatus]
        if damage == nil {
            statuses = try context.attempt { try engine.models() }
        } else {
            statuses = try context.attempt { try engine.modelsWithoutRecords() }
        }
        let space = try context.attempt { try engine.probe.space(at: engine.layout.root) }
        let problem = damage.map { CLIError(.recordsDamaged, message: $0.description) }
        if context.console.json {
            var doc: [(key: String, value: JSONValue)] = [
                ("catalogVersion", JSONValue(engine.catalog.catalogVersion)),
                ("store", .string(engine.layout.root)),
                ("availableBytes", .int(space.availableBytes)),
                ("recordsDamaged", .bool(damage != nil)),
                // Members as tuples, not dictionary literals: one array per object instead of
                // two (thousands of models).
                ("models", .array(statuses.map { s in
                    .object([("id", .string(s.model.id)), ("kind", .string(s.model.kind.rawValue)), ("displayName", .string(s.model.displayName)),
                     ("origin", .string(s.model.origin.rawValue)),
                     ("requiredMb", JSONValue(s.model.requiredMb)), ("autoEligible", .bool(s.model.autoEligible)),
                     ("isInstalled", .bool(s.isInstalled)), ("state", .string(stateName(s, recordsDamaged: damage != nil))),
                     ("updateAvailable", .bool(s.updateAvailable)), ("placedBundle", .bool(s.placedBundle)),
                     ("downloadBytes", .int(s.model.downloadBytes)),
                     ("installedBytes", .int(s.model.installedBytes)), ("presentBytes", .int(s.fit.presentBytes)),
                     ("fit", .object([("requiredMb", JSONValue(s.fit.requiredMb)), ("availableMb", JSONValue(s.fit.availableMb)),
                                      ("fits", .bool(s.fit.fits))]))])
                })),
            ]
            if let problem {
                doc.append(("error", problem.json))
            }
            let document = JSONValue.object(doc)
            context.console.printJSON(document)
            ProcessEnd.keep(document)
        } else {
            var rows: [[String]] = [["ID", "KIND", "NAME", "MEMORY", "DOWNLOAD", "STATE", "STORAGE"]]
            for s in statuses {
                let storage = s.isInstalled ? "-" : (s.fit.fits ? "fits (\(Format.mb(s.fit.requiredMb)))" : "needs \(Format.mb(s.fit.requiredMb))")
                rows.append([s.model.id + (s.model.autoEligible ? " *" : ""), s.model.kind.rawValue,
                             s.model.displayName + (s.model.origin == .user ? " (added)" : ""),
                             Format.mb(s.model.requiredMb), Format.bytes(s.model.downloadBytes),
                             damage == nil ? stateText(s) : "unknown (records damaged)", storage])
            }
            context.console.say("Catalog version \(engine.catalog.catalogVersion) (\(context.catalogSource)), store \(engine.layout.root)")
            context.console.say("Free space: \(Format.bytes(space.availableBytes)) (\(Format.mb(Int(space.availableBytes >> 20))))\n")
            context.console.say(Format.table(rows))
            context.console.say("\n* auto-eligible: 'glasses-local auto' may pick it. MEMORY is what the loaded model needs.")
            if statuses.contains(where: { $0.model.origin == .user }) {
                context.console.say("(added): added to this store with 'glasses-local add' (\(UserCatalog.path(in: engine.layout))); its MEMORY is the estimate made then.")
            }
            if let placed = statuses.first(where: \.placedBundle) {
                context.console.say("placed: every file is in the install folder with its size; 'glasses-local verify \(placed.model.id)' checks the hashes and installs it (nothing is fetched).")
            }
            if damage != nil {
                context.console.say("STATE unknown: the install records cannot be read; STORAGE counts only the partial data on disk.")
            }
        }
        ProcessEnd.keep(statuses)
        if let problem {
            context.console.err("Error: \(problem.message)")
            return problem.exitCode
        }
        return .ok
    }

    static func info(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let id = context.invocation.positional[0]
        let s = try context.attempt { try engine.status(of: id) }
        let record = try context.attempt { try engine.record(of: id) }
        let m = s.model
        let hashed = m.files.filter { $0.sha256 != nil }.count
        if context.console.json {
            context.console.printJSON([
                "id": .string(m.id), "kind": .string(m.kind.rawValue), "displayName": .string(m.displayName),
                "requiredMb": JSONValue(m.requiredMb), "autoEligible": .bool(m.autoEligible), "revision": JSONValue(m.revision),
                "origin": .string(m.origin.rawValue),
                "isInstalled": .bool(s.isInstalled), "state": JSONValue(record?.state.rawValue), "updateAvailable": .bool(s.updateAvailable),
                "placedBundle": .bool(s.placedBundle),
                "installPath": .string(record.map(engine.layout.folder(of:)) ?? engine.layout.installPath(id: m.id, kind: m.kind)),
                "downloadBytes": .int(m.downloadBytes), "installedBytes": .int(m.installedBytes),
                "fit": fitJSON(s.fit),
                "sources": .array(m.sources.map { source in
                    let auth: [(key: String, value: JSONValue)] = m.sourceAuth[source].map { [("auth", .string($0.rawValue))] } ?? []
                    switch source {
                    case .files(let base): return .object([("type", "files"), ("baseURL", .string(base))] + auth)
                    case .archive(let a):
                        return .object([("type", "archive"), ("url", .string(a.url)), ("format", .string(a.format.rawValue)), ("size", .int(a.size)),
                                        ("sha256", .string(a.sha256)), ("stripComponents", JSONValue(a.stripComponents))] + auth)
                    }
                }),
                "files": .array(m.files.map { ["path": .string($0.path), "size": .int($0.size), "sha256": JSONValue($0.sha256)] }),
            ])
            return .ok
        }
        let c = context.console
        c.say("\(m.id) — \(m.displayName)")
        c.say("  kind:           \(m.kind.rawValue)\(m.autoEligible ? " (auto-eligible)" : "")")
        if m.origin == .user { c.say("  origin:         added to this store (\(UserCatalog.path(in: engine.layout))); 'glasses-local remove \(m.id)' drops it") }
        c.say("  memory needed:  \(Format.mb(m.requiredMb))")
        c.say("  download:       \(Format.bytes(m.downloadBytes)) (\(Format.grouped(Int(m.downloadBytes))) bytes)")
        c.say("  installed size: \(Format.bytes(m.installedBytes)), \(m.files.count) file\(m.files.count == 1 ? "" : "s")")
        if case .archive? = m.sources.first {
            c.say("  integrity:      the archive's SHA-256 covers every byte; \(hashed) of \(m.files.count) files also have their own hash")
        } else if hashed == m.files.count {
            c.say("  integrity:      every file SHA-256 checked")
        } else {
            c.say("  integrity:      \(hashed) of \(m.files.count) files SHA-256 checked, the rest size-checked only")
        }
        if let revision = m.revision { c.say("  revision:       \(revision)") }
        for (n, source) in m.sources.enumerated() {
            let auth = m.sourceAuth[source] == .huggingface ? " (sends a Hugging Face token when one is set)" : ""
            switch source {
            case .files(let base): c.say("  source \(n + 1):       files from \(base)\(auth)")
            case .archive(let a): c.say("  source \(n + 1):       \(a.format.rawValue) archive \(a.url)\(auth)")
            }
        }
        let folder = record.map(engine.layout.folder(of:)) ?? engine.layout.installPath(id: m.id, kind: m.kind)
        if s.isInstalled {
            c.say("  state:          installed in \(folder)")
        } else if s.placedBundle {
            c.say("  state:          placed in \(folder), not verified yet: 'glasses-local verify \(m.id)' checks the hashes and installs it (nothing is fetched)")
        } else {
            c.say("  state:          \(s.fit.presentBytes > 0 ? "partly downloaded (\(Format.bytes(s.fit.presentBytes)))" : "not installed")")
        }
        if s.updateAvailable {
            c.say("  update:         available — the catalog changed its files; 'glasses-local download \(m.id)' installs the new version beside this one, then switches")
        }
        if !s.isInstalled {
            c.say("  storage:        needs \(Format.mb(s.fit.requiredMb)), \(Format.mb(s.fit.availableMb)) available → \(s.fit.fits ? "fits" : "does not fit")")
        }
        return .ok
    }

    static func fit(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let id = context.invocation.positional[0]
        let s = try context.attempt { try engine.status(of: id) }
        if context.console.json {
            context.console.printJSON(fitJSON(s.fit))
        } else if s.isInstalled {
            context.console.say("\(id): installed; needs no more space (\(Format.mb(s.fit.availableMb)) available)")
        } else if s.fit.fits {
            context.console.say("\(id): fits — needs \(Format.mb(s.fit.requiredMb)), \(Format.mb(s.fit.availableMb)) available in \(engine.layout.root)")
        } else {
            context.console.say("\(id): does not fit — needs \(Format.mb(s.fit.requiredMb)), only \(Format.mb(s.fit.availableMb)) available in \(engine.layout.root). Free \(Format.mb(s.fit.requiredMb - s.fit.availableMb)) or choose another store with --store.")
        }
        return s.fit.fits ? .ok : .doesNotFit
    }

    static func auto(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let explained = try context.attempt { try engine.explainAutoChoice() }
        let (decision, inputs, memory) = (explained.decision, explained.inputs, explained.memory)
        if context.console.json {
            context.console.printJSON([
                "modelId": JSONValue(decision.modelId), "isLocal": .bool(decision.isLocal),
                // cloudReason: the finest reason (insufficientStorage stays itself here); the
                // SDK's own CloudFallbackReason and its detail beside it.
                "cloudReason": JSONValue(decision.cloudReasonName), "downloadTarget": JSONValue(decision.downloadTarget),
                "cloudFallbackReason": JSONValue(decision.cloudReason?.rawValue), "cloudDetail": JSONValue(decision.cloudDetail?.rawValue),
                "storageShortfall": decision.storageShortfall.map { s -> JSONValue in
                    ["modelId": .string(s.modelId), "requiredMb": JSONValue(s.requiredMb), "availableMb": JSONValue(s.availableMb)]
                } ?? .null,
                "steps": .array(decision.steps.map { ["step": JSONValue($0.number), "rungId": JSONValue($0.rungId), "text": .string($0.text)] }),
                "memory": ["physicalMb": JSONValue(memory.physicalMb), "availableMb": JSONValue(memory.availableMb),
                           "classBudgetMb": JSONValue(inputs.classBudgetMb), "source": .string(memory.source),
                           "overrideProblems": overrideProblemsJSON(memory.overrideProblems)],
                "freeStorageBytes": .int(inputs.freeStorageBytes),
            ])
            return .ok
        }
        let c = context.console
        if let id = decision.modelId {
            c.say("local: \(id)")
        } else {
            c.say("cloud: \(decision.cloudReasonName ?? "unknown")"
                  + (decision.cloudDetail.map { " (the SDK's reason: \($0.reason.rawValue))" } ?? ""))
        }
        if let target = decision.downloadTarget {
            c.say("download target: \(target) (glasses-local download \(target))")
        }
        if context.invocation[autoOptions.explain] {
            c.say("")
            c.say("memory: \(Format.mb(memory.physicalMb)) physical × \(engine.memoryShare) = class budget \(Format.mb(inputs.classBudgetMb)); \(Format.mb(memory.availableMb)) available now (from \(memory.source))")
            for problem in memory.overrideProblems { c.say("memory: \(problem)") }
            c.say("storage: \(Format.mb(Int(inputs.freeStorageBytes >> 20))) free in \(engine.layout.root)")
            for step in decision.steps { c.say(step.description) }
        }
        return .ok
    }

    static func history(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let limit = context.invocation[historyOptions.limit] ?? 100
        let id = context.invocation.positional.first
        if let id, engine.catalog.model(id: id) == nil, (try context.attempt { try engine.record(of: id) }) == nil {
            throw CLIError.from(LocalModelError.unknownModel(id))
        }
        let events = try context.attempt { try engine.history(modelId: id, limit: limit) }
        if context.console.json {
            context.console.printJSON(["events": .array(events.map {
                ["id": .int($0.id), "at": .string(Format.date($0.at)), "modelId": JSONValue($0.modelId),
                 "event": .string($0.kind), "detail": JSONValue($0.detail)]
            })])
            return .ok
        }
        if events.isEmpty {
            context.console.say(id.map { "no history for \($0)" } ?? "no history yet")
            return .ok
        }
        context.console.say(Format.table([["TIME", "MODEL", "EVENT", "DETAIL"]] + events.map {
            [Format.date($0.at), $0.modelId ?? "-", $0.kind, $0.detail ?? ""]
        }))
        return .ok
    }
}
