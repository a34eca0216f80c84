import Foundation
import LocalModelKit
import Synchronization

let commandSpecs: [CommandSpec] = baseCommandSpecs.prefix(4) + transferCommandSpecs + baseCommandSpecs.dropFirst(4)

let baseCommandSpecs: [CommandSpec] = [
    CommandSpec(name: "list", abstract: "List the catalog's models with install state and storage fit.",
                usage: "glasses-local list [--json]"),
    CommandSpec(name: "info", abstract: "Show one model: sizes, files, sources, state, fit.",
                arguments: [("<id>", "A model id from 'glasses-local list'.")], positional: 1...1,
                usage: "glasses-local info <id>"),
    CommandSpec(name: "fit", abstract: "Tell whether installing a model fits this device's storage.",
                discussion: "Needed space counts the bytes not yet downloaded, unpack room for archives and a safety margin; available space is the store filesystem's free space for this user minus what other downloads have reserved. Exits 3 when it does not fit.",
                arguments: [("<id>", "A model id from 'glasses-local list'.")], positional: 1...1,
                usage: "glasses-local fit <id>"),
    CommandSpec(name: "auto", abstract: "Choose the ladder model to run now, or say why the cloud must serve.",
                discussion: "EXTENTOS_MEMORY_MB and EXTENTOS_MEMORY_AVAILABLE_MB override the memory readings (\"what would a 4 GB device get?\") with a whole number of MiB from 1 to 1,073,741,824 (1 PiB); any other value is ignored with a warning.",
                options: [OptionSpec(name: "--explain", valueName: nil, help: "Print each step of the rule."),
                          OptionSpec(name: "--memory-share", valueName: "F", help: "Share of physical memory a model may use (default 0.5).")],
                usage: "glasses-local auto [--explain] [--memory-share F]"),
    CommandSpec(name: "history", abstract: "Show the install history (append-only), newest last.",
                arguments: [("[<id>]", "Only this model's events.")], positional: 0...1,
                options: [OptionSpec(name: "--limit", valueName: "N", help: "Show at most the newest N events (default 100).")],
                usage: "glasses-local history [<id>] [--limit N]"),
    CommandSpec(name: "doctor", abstract: "Check the store, the records database, memory readings and the catalog.",
                discussion: "Opening the store repairs leftovers of interrupted work; doctor lists what it repaired. Exits 1 when a check fails.",
                usage: "glasses-local doctor"),
    CommandSpec(name: "catalog validate", abstract: "Check a catalog file against every rule; list every problem with its JSON path.",
                discussion: "Exits 6 when the catalog has any problem. With a store that has seen a newer catalog, a lower catalogVersion is a problem (rollback).",
                arguments: [("<file>", "The catalog JSON file.")], positional: 1...1,
                usage: "glasses-local catalog validate <file>"),
    CommandSpec(name: "catalog hash", abstract: "Print the catalog 'files' entries (path, size, sha256) of a folder.",
                discussion: "For custom models and mirrors. With --id and --base-url it prints a whole catalog with one model, ready for --catalog.",
                arguments: [("<dir>", "The folder holding the model's files.")], positional: 1...1,
                options: [OptionSpec(name: "--id", valueName: "ID", help: "Model id for a whole-catalog output."),
                          OptionSpec(name: "--base-url", valueName: "URL", help: "Where the files are served (ends with '/')."),
                          OptionSpec(name: "--display-name", valueName: "NAME", help: "Display name (default: the id)."),
                          OptionSpec(name: "--kind", valueName: "KIND", help: "llm or voice (default llm)."),
                          OptionSpec(name: "--required-mb", valueName: "MB", help: "Memory the loaded model needs (default 1000)."),
                          OptionSpec(name: "--auto-eligible", valueName: nil, help: "Let autoChoice pick it."),
                          OptionSpec(name: "--catalog-version", valueName: "N", help: "catalogVersion of the output (default 1).")],
                usage: "glasses-local catalog hash <dir> [--id ID --base-url URL ...]"),
]

/// Everything a command needs, built lazily from the parsed line.
final class CommandContext {
    let invocation: Invocation
    let console: Console
    let environment: [String: String]
    private var cachedCatalog: Catalog?
    private var cachedEngine: LocalModelEngine?
    /// What opening the store repaired, for doctor.
    var repairs: [RepairAction] = []
    /// The device probe of this command: says once on stderr when a memory override is ignored.
    let memoryProbe: WarningDeviceProbe

    init(invocation: Invocation, environment: [String: String]) {
        self.invocation = invocation
        self.environment = environment
        console = Console(json: invocation.flag("--json"), quiet: invocation.flag("--quiet"))
        memoryProbe = WarningDeviceProbe(SystemDeviceProbe(environment: environment), console: console)
    }

    /// The engine's setup from this command line: `--store`, `--catalog`, `--memory-share`
    /// over the environment (the same setup the SDK facades use).
    func setup() throws(CLIError) -> EngineSetup {
        if let store = invocation.value("--store"), store.isEmpty { throw .usage("--store needs a folder", of: invocation.command) }
        var share = 0.5
        if let text = invocation.value("--memory-share") {
            guard let value = Double(text), value > 0, value <= 1 else {
                throw .usage("--memory-share must be a number in (0, 1], got '\(text.prefix(40))'", of: invocation.command)
            }
            share = value
        }
        let setup = EngineSetup(environment: environment, storeDirectory: invocation.value("--store"),
                                catalogFile: invocation.value("--catalog"), memoryShare: share, probe: memoryProbe)
        if let file = setup.catalogPath, file.hasPrefix("https://") || file.hasPrefix("http://") {
            throw .usage("--catalog takes a file in this build; download the catalog first (curl -o catalog.json '\(file)') and pass the file", of: invocation.command)
        }
        return setup
    }

    var storeRoot: String {
        get throws(CLIError) {
            guard let root = try setup().storeRoot else { throw CLIError(LocalModelError.noStoreFolder) }
            return root
        }
    }

    /// Where the catalog came from, for messages.
    var catalogSource: String { (try? setup().catalogSource) ?? "built-in" }

    func catalog() throws(CLIError) -> Catalog {
        if let cachedCatalog { return cachedCatalog }
        let catalog: Catalog
        do { catalog = try setup().catalog() } catch let error as CLIError { throw error } catch { throw CLIError.from(error) }
        cachedCatalog = catalog
        return catalog
    }

    func engine(openExisting: Bool = true) throws(CLIError) -> LocalModelEngine {
        if let cachedEngine { return cachedEngine }
        let engine: LocalModelEngine
        do { engine = try setup().makeEngine(catalog: try catalog()) } catch let error as CLIError { throw error } catch { throw CLIError.from(error) }
        cachedEngine = engine
        // An existing store is opened now so that repairs of leftovers are reported;
        // a store never written is left untouched by read-only commands.
        if openExisting && FileIO.exists(engine.layout.recordsPath) { _ = try openStore() }
        return engine
    }

    /// Opens the store (creating it, repairing leftovers) and reports repairs on stderr.
    func openStore() throws(CLIError) -> Records {
        do {
            return try openRecords(try engine())
        } catch {
            throw CLIError.from(error)
        }
    }

    /// What opening the store found, for the commands that still answer when the records
    /// database is damaged (`list` from the catalog, `doctor` with the way out).
    enum StoreState {
        case opened(Records)
        /// No records database yet (and none was created).
        case notCreated
        /// `records.sqlite3` is damaged or not a database; it was left as it is.
        case damaged(RecordsError)
    }

    /// Like ``openStore()``, but a damaged records database is an answer, not an error.
    /// - Parameter create: create the store when it does not exist (doctor), or leave a
    ///   store that was never written untouched (list).
    func openStoreAllowingDamage(create: Bool) throws(CLIError) -> StoreState {
        let engine = try engine(openExisting: false)
        if !create && !FileIO.exists(engine.layout.recordsPath) { return .notCreated }
        do {
            return .opened(try openRecords(engine))
        } catch {
            if case .records(let records) = LocalModelError.wrap(error), case .corrupt = records { return .damaged(records) }
            throw CLIError.from(error)
        }
    }

    private func openRecords(_ engine: LocalModelEngine) throws -> Records {
        let (records, repairs) = try engine.open()
        self.repairs = repairs
        if !console.quiet {
            for repair in repairs { console.err("repaired: \(repair)") }
        }
        return records
    }

    /// Runs an engine call, mapping its errors to exit codes.
    func attempt<T>(_ body: () throws -> T) throws(CLIError) -> T {
        do {
            return try body()
        } catch {
            throw CLIError.from(error)
        }
    }
}

/// The system probe, plus one warning line on stderr per ignored memory override — once
/// per process, however often the memory is read (the library itself stays quiet and only
/// reports them in `MemoryReading.overrideProblems`).
final class WarningDeviceProbe: DeviceProbe {
    private let base: SystemDeviceProbe
    private let console: Console
    /// Set once the warnings were printed (or another report, like doctor's, took their place).
    private let warned = Mutex(false)

    init(_ base: SystemDeviceProbe, console: Console) {
        self.base = base
        self.console = console
    }

    func memory() -> MemoryReading {
        let reading = base.memory()
        let first = warned.withLock { done in
            defer { done = true }
            return !done
        }
        if first && !console.quiet {
            for problem in reading.overrideProblems { console.err("warning: \(problem)") }
        }
        return reading
    }

    func space(at path: String) throws(SystemError) -> FilesystemSpace {
        try base.space(at: path)
    }

    /// For a command that reports the problems in its own output (doctor): no stderr line.
    func reportedElsewhere() {
        warned.withLock { $0 = true }
    }
}

extension CLIError {
    /// An engine error as the command reports it: its stable code, its exit status, its text.
    init(_ error: LocalModelError) {
        self.init(exitCode: ExitCode(rawValue: error.exitStatus) ?? .failure, code: error.code.rawValue, message: error.description)
    }

    /// Any error met by a command, through the engine's one error type.
    static func from(_ error: any Error) -> CLIError {
        if let e = error as? CLIError { return e }
        return CLIError(LocalModelError.wrap(error))
    }

    /// The `code`, `message` and `exitCode` every `--json` error carries.
    var fields: [(String, JSONValue)] {
        [("code", .string(code)), ("message", .string(message)), ("exitCode", JSONValue(Int(exitCode.rawValue)))]
    }

    /// The `{"code", "message", "exitCode"}` object.
    var json: JSONValue { .object(fields) }
}

// MARK: - Commands

enum Commands {
    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        switch context.invocation.command.name {
        case "list": return try list(context)
        case "info": return try info(context)
        case "fit": return try fit(context)
        case "auto": return try auto(context)
        case "history": return try history(context)
        case "doctor": return try Doctor.run(context)
        case "catalog validate": return try CatalogCommands.validate(context)
        case "catalog hash": return try CatalogCommands.hash(context)
        case "download": return try TransferCommands.download(context)
        case "delete": return try TransferCommands.delete(context)
        case "verify": return try TransferCommands.verify(context)
        case "gc": return try TransferCommands.gc(context)
        default:
            throw CLIError(exitCode: .failure, code: "failure", message: "command '\(context.invocation.command.name)' has no implementation")
        }
    }

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
        if s.isInstalled { return "installed" }
        if s.fit.presentBytes > 0 { return "partial \(Int(Double(s.fit.presentBytes) * 100 / Double(max(1, s.model.downloadBytes))))%" }
        return "-"
    }

    /// `list --json`'s "state": installed, partial, notInstalled — or unknown when the
    /// records cannot be read.
    static func stateName(_ s: ModelStatus, recordsDamaged: Bool) -> String {
        if recordsDamaged { return "unknown" }
        if s.isInstalled { return "installed" }
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
        let problem = damage.map { CLIError(exitCode: .failure, code: "recordsDamaged", message: $0.description) }
        if context.console.json {
            var doc: [(key: String, value: JSONValue)] = [
                ("catalogVersion", JSONValue(engine.catalog.catalogVersion)),
                ("store", .string(engine.layout.root)),
                ("availableBytes", .int(space.availableBytes)),
                ("recordsDamaged", .bool(damage != nil)),
                ("models", .array(statuses.map { s in
                    ["id": .string(s.model.id), "kind": .string(s.model.kind.rawValue), "displayName": .string(s.model.displayName),
                     "requiredMb": JSONValue(s.model.requiredMb), "autoEligible": .bool(s.model.autoEligible),
                     "isInstalled": .bool(s.isInstalled), "state": .string(stateName(s, recordsDamaged: damage != nil)),
                     "downloadBytes": .int(s.model.downloadBytes),
                     "installedBytes": .int(s.model.installedBytes), "presentBytes": .int(s.fit.presentBytes),
                     "fit": ["requiredMb": JSONValue(s.fit.requiredMb), "availableMb": JSONValue(s.fit.availableMb), "fits": .bool(s.fit.fits)]]
                })),
            ]
            if let problem {
                doc.append(("error", problem.json))
            }
            context.console.printJSON(.object(doc))
        } else {
            var rows: [[String]] = [["ID", "KIND", "NAME", "MEMORY", "DOWNLOAD", "STATE", "STORAGE"]]
            for s in statuses {
                let storage = s.isInstalled ? "-" : (s.fit.fits ? "fits (\(Format.mb(s.fit.requiredMb)))" : "needs \(Format.mb(s.fit.requiredMb))")
                rows.append([s.model.id + (s.model.autoEligible ? " *" : ""), s.model.kind.rawValue, s.model.displayName,
                             Format.mb(s.model.requiredMb), Format.bytes(s.model.downloadBytes),
                             damage == nil ? stateText(s) : "unknown (records damaged)", storage])
            }
            context.console.say("Catalog version \(engine.catalog.catalogVersion) (\(context.catalogSource)), store \(engine.layout.root)")
            context.console.say("Free space: \(Format.bytes(space.availableBytes)) (\(Format.mb(Int(space.availableBytes >> 20))))\n")
            context.console.say(Format.table(rows))
            context.console.say("\n* auto-eligible: 'glasses-local auto' may pick it. MEMORY is what the loaded model needs.")
            if damage != nil {
                context.console.say("STATE unknown: the install records cannot be read; STORAGE counts only the partial data on disk.")
            }
        }
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
                "isInstalled": .bool(s.isInstalled), "state": JSONValue(record?.state.rawValue),
                "installPath": .string(record.map(engine.layout.folder(of:)) ?? engine.layout.installPath(id: m.id, kind: m.kind)),
                "downloadBytes": .int(m.downloadBytes), "installedBytes": .int(m.installedBytes),
                "fit": fitJSON(s.fit),
                "sources": .array(m.sources.map { source in
                    switch source {
                    case .files(let base): return ["type": "files", "baseURL": .string(base)]
                    case .archive(let a):
                        return ["type": "archive", "url": .string(a.url), "format": .string(a.format.rawValue), "size": .int(a.size),
                                "sha256": .string(a.sha256), "stripComponents": JSONValue(a.stripComponents)]
                    }
                }),
                "files": .array(m.files.map { ["path": .string($0.path), "size": .int($0.size), "sha256": JSONValue($0.sha256)] }),
            ])
            return .ok
        }
        let c = context.console
        c.say("\(m.id) — \(m.displayName)")
        c.say("  kind:           \(m.kind.rawValue)\(m.autoEligible ? " (auto-eligible)" : "")")
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
            switch source {
            case .files(let base): c.say("  source \(n + 1):       files from \(base)")
            case .archive(let a): c.say("  source \(n + 1):       \(a.format.rawValue) archive \(a.url)")
            }
        }
        c.say("  state:          \(s.isInstalled ? "installed in \(record.map(engine.layout.folder(of:)) ?? engine.layout.installPath(id: m.id, kind: m.kind))" : (s.fit.presentBytes > 0 ? "partly downloaded (\(Format.bytes(s.fit.presentBytes)))" : "not installed"))")
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
        let inputs = try context.attempt { try engine.autoChoiceInputs() }
        let decision = AutoChoiceRule.decide(inputs)
        let memory = engine.probe.memory()
        if context.console.json {
            context.console.printJSON([
                "modelId": JSONValue(decision.modelId), "isLocal": .bool(decision.isLocal),
                "cloudReason": JSONValue(decision.cloudReason?.rawValue), "downloadTarget": JSONValue(decision.downloadTarget),
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
            c.say("cloud: \(decision.cloudReason?.rawValue ?? "unknown")")
        }
        if let target = decision.downloadTarget {
            c.say("download target: \(target) (glasses-local download \(target))")
        }
        if context.invocation.flag("--explain") {
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
        var limit = 100
        if let text = context.invocation.value("--limit") {
            guard let n = Int(text), n > 0 else { throw .usage("--limit must be a positive number, got '\(text)'", of: context.invocation.command) }
            limit = n
        }
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
