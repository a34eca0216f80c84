import FoundationEssentials
import LocalModelKit

/// Everything a command needs, built lazily from the parsed line.
final class CommandContext {
    let invocation: Invocation
    let console: Console
    let environment: [String: String]
    private var cachedCatalog: (catalog: Catalog, source: String)?
    private var cachedEngine: LocalModelEngine?
    /// What opening the store repaired, for doctor.
    var repairs: [RepairAction] = []
    /// The device probe of this command: says once on stderr when a memory override is ignored.
    let memoryProbe: WarningDeviceProbe

    init(invocation: Invocation, console: Console, environment: [String: String]) {
        self.invocation = invocation
        self.environment = environment
        self.console = console
        memoryProbe = WarningDeviceProbe(SystemDeviceProbe(environment: environment), console: console)
    }

    /// The engine's setup from this command line: `--store`, `--catalog`, `--memory-share`
    /// over the environment (the same setup the SDK facades use).
    func setup() throws(CLIError) -> EngineSetup {
        let global = GlobalOptions.shared
        let store = invocation[global.store]
        // Checked here, not by the option's parser: a command that needs no store (catalog
        // validate without one, manpage) has always ignored an empty --store.
        if let store, store.isEmpty { throw .usage("\(global.store.name) needs a folder", of: invocation.command) }
        // `auto --memory-share`, checked by its declaration; the engine's default elsewhere.
        let share = invocation[QueryCommands.autoOptions.memoryShare] ?? 0.5
        var setup = EngineSetup(environment: environment, storeDirectory: store,
                                catalogFile: invocation[global.catalog], memoryShare: share, probe: memoryProbe)
        if invocation[global.offline] { setup.offlineBy = global.offline.name }
        // Read once for the command; doctor lists skipped key files as a check instead.
        setup.catalogKeys = keys(warn: invocation.command.name != "doctor").keys
        if let url = setup.catalogPath, EngineSetup.isURL(url), let problem = CatalogRules.urlProblem(url) {
            throw .usage("\(GlobalOptions.shared.catalog.name) \(URLOrigin.redacted(url)): \(problem)", of: invocation.command)
        }
        return setup
    }

    var storeRoot: String {
        get throws(CLIError) {
            guard let root = try setup().storeRoot else { throw CLIError(LocalModelError.noStoreFolder) }
            return root
        }
    }

    /// Whether `--catalog FILE` or `$EXTENTOS_CATALOG` names the catalog (not the store's own).
    var catalogIsNamed: Bool {
        guard let path = try? setup().catalogPath else { return false }
        return !EngineSetup.isURL(path)
    }

    /// The trusted catalog keys, read once per command; each `*.pub` of
    /// `EXTENTOS_CATALOG_KEYS` that is skipped is said once on stderr (`warning:`), so a FIFO
    /// or a stray file there is never silent. Doctor lists them instead (`keys(warn: false)`).
    func trustedKeys() -> [(name: String, pem: String)] { keys(warn: true).keys }

    func keys(warn: Bool) -> (keys: [(name: String, pem: String)], skipped: [String]) {
        let loaded = loadedKeys ?? TrustedCatalogKeys.load(environment: environment)
        loadedKeys = loaded
        if warn && !warnedAboutKeys && !console.quiet {
            for problem in loaded.skipped { console.err("warning: \(problem)") }
        }
        if warn { warnedAboutKeys = true }
        return loaded
    }
    private var loadedKeys: (keys: [(name: String, pem: String)], skipped: [String])?
    private var warnedAboutKeys = false

    /// Where the catalog came from, for messages.
    var catalogSource: String { (try? resolvedCatalog().source) ?? (try? setup().catalogPath) ?? "built-in" }

    func catalog() throws(CLIError) -> Catalog {
        try resolvedCatalog().catalog
    }

    /// The catalog and its source, read once per command.
    private func resolvedCatalog() throws(CLIError) -> (catalog: Catalog, source: String) {
        if let cachedCatalog { return cachedCatalog }
        // Says which key files are skipped (the engine reads the same folder).
        let resolved: (catalog: Catalog, source: String)
        do { resolved = try setup().resolvedCatalog() } catch let error as CLIError { throw error } catch { throw CLIError.from(error) }
        cachedCatalog = resolved
        return resolved
    }

    func engine(openExisting: Bool = true) throws(CLIError) -> LocalModelEngine {
        if let cachedEngine { return cachedEngine }
        let engine: LocalModelEngine
        do { engine = try setup().makeEngine(catalog: try catalog()) } catch let error as CLIError { throw error } catch { throw CLIError.from(error) }
        cachedEngine = engine
        // The store's own catalog of added models: a file that cannot be used is named, once.
        if !console.quiet {
            for warning in engine.userCatalogWarnings { console.err("warning: \(warning)") }
        }
        // An existing store is opened now so that repairs of leftovers are reported;
        // a store never written is left untouched by read-only commands.
        if openExisting && FileIO.exists(engine.layout.recordsPath) { try openStore() }
        return engine
    }

    /// Opens the store (creating it, repairing leftovers) and reports repairs on stderr.
    func openStore() throws(CLIError) {
        do {
            try openRecords(try engine())
        } catch {
            throw CLIError.from(error)
        }
    }

    /// What opening the store found, for the commands that still answer when the records
    /// database is damaged (`list` from the catalog, `doctor` with the way out).
    enum StoreState {
        case opened
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
            try openRecords(engine)
            return .opened
        } catch {
            if case .records(let records) = LocalModelError.wrap(error), case .corrupt = records.cause { return .damaged(records.cause) }
            throw CLIError.from(error)
        }
    }

    private func openRecords(_ engine: LocalModelEngine) throws {
        let repairs = try engine.openStore()
        self.repairs = repairs
        if !console.quiet {
            for repair in repairs { console.err("repaired: \(repair)") }
            if let missing = engine.storeCatalogVersionMissing, invocation.command.name != "doctor" {
                console.err("warning: the store has used catalog version \(missing), but no trusted copy of it is left; the built-in version \(engine.catalog.catalogVersion) stands in (installed models keep working, downloads wait). 'glasses-local doctor' says why; 'glasses-local catalog update' restores it.")
            }
        }
    }

    /// Leaves the catalogs this command read to the end of the process (`ProcessEnd`): the
    /// engine is released as before (its records closed), its catalog's objects are not freed.
    func keepCatalogsUntilExit() {
        if let cachedCatalog { ProcessEnd.keep(cachedCatalog.catalog) }
        if let cachedEngine { ProcessEnd.keep(cachedEngine.catalog) }
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
    private let warned = Locked(false)

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

    func space(at path: String) throws(LocalModelError) -> FilesystemSpace {
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
        self.init(error.code, message: error.description)
    }

    /// Any error met by a command, through the engine's one error type.
    static func from(_ error: any Error) -> CLIError {
        if let e = error as? CLIError { return e }
        return CLIError(LocalModelError.wrap(error))
    }

    /// The `code`, `message` and `exitCode` every `--json` error carries.
    var fields: [(String, JSONValue)] {
        [("code", .string(code.rawValue)), ("message", .string(message)), ("exitCode", JSONValue(Int(exitCode.rawValue)))]
    }

    /// The `{"code", "message", "exitCode"}` object.
    var json: JSONValue { .object(fields) }
}

