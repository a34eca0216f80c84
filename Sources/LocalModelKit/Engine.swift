import FoundationEssentials

/// What the engine reports about one catalog model.
public struct ModelStatus: Sendable, Equatable {
    /// The catalog's entry.
    public var model: CatalogModel
    /// Every file verified and the install committed (records + a `stat` of the folder).
    public var isInstalled: Bool
    /// A download was started and not finished.
    public var isPartial: Bool
    /// Whether installing it (the rest of it) fits the store's free space.
    public var fit: StorageFit
    /// Installed, but the catalog now lists other files (or other bytes) for it: the
    /// installed version keeps working, with its recorded hashes, until `download`
    /// installs the new one beside it and switches.
    public var updateAvailable: Bool = false
    /// Not installed, but a complete bundle waits in its install folder (a voice an app
    /// seeded: every catalog file there, a regular file of its size): `download`, `verify`
    /// or `adoptPlacedBundle(modelId:)` check its hashes and install it as it is, with
    /// nothing fetched. Known from `lstat`s; nothing was hashed.
    public var placedBundle: Bool = false
}

/// Whether a model's install fits the store's filesystem.
public struct StorageFit: Sendable, Equatable {
    /// The model asked about.
    public var modelId: String
    /// What installing still needs: bytes not yet downloaded + unpack room + margin.
    public var requiredBytes: Int64
    /// Free space for this user on the store's filesystem, minus what other downloads
    /// in flight have reserved.
    public var availableBytes: Int64
    /// Bytes of this model already on disk (partial data, or everything when installed).
    public var presentBytes: Int64

    /// Whether the required bytes are within the available ones.
    public var fits: Bool { requiredBytes <= availableBytes }
    /// Rounded up: never promise less than is needed.
    public var requiredMb: Int { Int((requiredBytes + (1 << 20) - 1) >> 20) }
    /// Rounded down: never promise more than there is.
    public var availableMb: Int { Int(max(0, availableBytes) >> 20) }
}

/// The safety margin added to every storage requirement: 32 MiB plus 1% of the model,
/// so a "fits" answer survives logs, the records database and filesystem overhead.
package enum StorageMargin {
    /// The margin for a model of `installed` bytes.
    package static func bytes(forInstalledBytes installed: Int64) -> Int64 {
        (32 << 20) + installed / 100
    }
}

/// The model manager for one store and one catalog. All logic lives here; the public
/// facades only choose a shared instance. Thread-safe.
public final class LocalModelEngine: Sendable {
    /// The store this engine manages.
    public let layout: StoreLayout
    /// The catalog in use: the one given; after its models, those a user added to this store
    /// (`UserCatalog`: `origin == .user`; an id the given catalog has is never replaced by
    /// one); and, while it stands in for a newer catalog the store has used
    /// (`storeCatalogVersionMissing`), the models installed from that newer catalog that it
    /// does not list, described by their install records (P14: installed models keep
    /// working). Those are known once the store is opened.
    public var catalog: Catalog { merged.withLock { $0 } }
    private let givenCatalog: Catalog
    /// `catalog`, rebuilt whenever one of its parts changes (it is read far more often).
    private let merged: Locked<Catalog>
    private let installedFromMissingCatalog = Locked<[CatalogModel]>([])
    /// The store's own catalog as last read or written: its models, and why it could not be
    /// used when it could not.
    let userCatalog: Locked<(models: [CatalogModel], problem: String?)>
    /// Where memory and free space are read (the device, or a test's stand-in).
    public let probe: any DeviceProbe
    /// Share of physical memory a model may use (the memory class budget), 0.5 by default.
    public let memoryShare: Double
    /// Whether `catalog` is the one the store resolves to (its newest trusted catalog, else
    /// the built-in floor) rather than a file someone named. Only then may it be older than
    /// a version the store has used: the store's own copy was damaged or removed, and the
    /// built-in catalog stands in for reading what is installed (see `storeCatalogVersionMissing`).
    public let catalogChosenByStore: Bool
    /// Copies of models this machine already has outside the store: the Hugging Face hub
    /// cache (`import` without a folder reads it), and whether a download takes matching
    /// files from it before fetching. `EngineSetup` reads both from the environment.
    public let localCopies: LocalCopySettings
    private let opened = Locked<Records?>(nil)
    /// The highest catalog version the records say the store has used, once opened.
    private let recordedCatalogVersion = Locked<Int>(0)
    /// Per model: the identity (inode, size, times of every file) of a placed bundle found
    /// not to match, so an unchanged one is not hashed again by every query.
    private let rejectedPlacements = Locked<[String: String]>([:])

    /// An engine over one store and one catalog. Nothing is opened or read until the first
    /// call that needs the store; ``EngineSetup/makeEngine(catalog:)`` builds one from the
    /// environment, as the command and the facades do.
    public init(layout: StoreLayout, catalog: Catalog, probe: any DeviceProbe, memoryShare: Double = 0.5,
                catalogChosenByStore: Bool = false, localCopies: LocalCopySettings = LocalCopySettings()) {
        self.localCopies = localCopies
        self.layout = layout
        self.givenCatalog = catalog
        let user = UserCatalog.read(at: UserCatalog.path(in: layout))
        self.userCatalog = Locked(user)
        self.merged = Locked(user.models.isEmpty ? catalog : catalog.adding(user.models))
        self.probe = probe
        self.memoryShare = memoryShare
        self.catalogChosenByStore = catalogChosenByStore
    }

    /// The catalog version the store has used when no trusted copy of it is left and an older
    /// catalog stands in (known once the store is opened), else nil. Installed models keep
    /// working; downloads wait (`requireStoreCatalog`) until `updateCatalog` restores it.
    public var storeCatalogVersionMissing: Int? {
        let recorded = recordedCatalogVersion.withLock { $0 }
        return recorded > catalog.catalogVersion ? recorded : nil
    }

    /// Throws `catalogUnavailable` while an older catalog stands in for the store's: nothing
    /// may be fetched by a catalog the store has moved past (that would be a rollback).
    func requireStoreCatalog() throws(LocalModelError) {
        if let recorded = storeCatalogVersionMissing {
            throw .catalogUnavailable(inUse: catalog.catalogVersion, recorded: recorded, store: layout.root)
        }
    }

    // MARK: Opening

    /// Opens the store: creates its folders and records, refuses a catalog rollback, and
    /// repairs leftovers of interrupted work. Every other operation opens the store itself;
    /// call this to learn what the first opening repaired.
    ///
    /// - Returns: what was repaired, in order (empty when nothing was left over, and on every
    ///   call after the first).
    /// - Throws: ``LocalModelError`` when the store cannot be opened (its records are
    ///   damaged, read-only or newer, a folder cannot be made) or the catalog is a rollback.
    @discardableResult
    public func openStore() throws(LocalModelError) -> [RepairAction] {
        try open().repairs
    }

    /// Opens the store (see ``openStore()``) and returns its records with the repairs.
    /// Idempotent; later calls return the same records.
    @discardableResult
    package func open() throws(LocalModelError) -> (records: Records, repairs: [RepairAction]) {
        if let records = opened.withLock({ $0 }) { return (records, []) }
        let removedLinks: [String]
        let records: Records
        let recorded: Int
        do {
            removedLinks = try layout.createFolders()
            // A new store's records start with the catalog version (the floor, P7), written in
            // their creation: a first download then commits once before its first request.
            let version = catalog.catalogVersion
            records = try Records(path: layout.recordsPath, whenCreated: { ctx in
                try ctx.noteCatalogVersion(version)
                try ctx.append(.catalog, modelId: nil, detail: Self.catalogAccepted(version))
            })
            recorded = try records.read { try $0.highestCatalogVersion() }
        } catch {
            throw .wrap(error)
        }
        if catalog.catalogVersion < recorded && !catalogChosenByStore {
            throw LocalModelError.catalogRollback(offered: catalog.catalogVersion, recorded: recorded, store: layout.root)
        }
        recordedCatalogVersion.withLock { $0 = recorded }
        if catalog.catalogVersion < recorded {
            let known = catalog
            let kept = (try? records.read { ctx in try Self.modelsInstalled(from: ctx, after: known) }) ?? []
            installedFromMissingCatalog.withLock { $0 = kept }
            rebuildCatalog()
        }
        // Bookkeeping and repairs are writes: on a full disk they wait for the next open, so
        // that reading, deleting and gc still work and can make room.
        var repairs: [RepairAction] = []
        do {
            if catalog.catalogVersion > recorded {
                try records.write { ctx in
                    try ctx.noteCatalogVersion(catalog.catalogVersion)
                    try ctx.append(.catalog, modelId: nil, detail: Self.catalogAccepted(catalog.catalogVersion))
                }
            }
            for link in removedLinks {
                let what = "removed the symbolic link \(link), which stood where a store folder belongs; links inside the store are never followed"
                try records.append(.repaired, modelId: nil, detail: what)
                repairs.append(RepairAction(modelId: nil, what: what))
            }
            repairs += try StoreRepair(layout: layout, catalog: catalog, records: records,
                                   catalogIsStandIn: catalog.catalogVersion < recorded).run()
        } catch let error as RecordsError where error.isDiskFull {
            repairs.append(RepairAction(modelId: nil, what: "repairs postponed: the disk is full"))
        } catch let error as SystemError where error.isOutOfSpace {
            repairs.append(RepairAction(modelId: nil, what: "repairs postponed: the disk is full"))
        } catch RecordsError.readOnly {
            repairs.append(RepairAction(modelId: nil, what: "repairs left to the store's owner: the store is read-only for this user"))
        } catch {
            throw .wrap(error)
        }
        opened.withLock { $0 = records }
        return (records, repairs)
    }

    /// The history's words for a catalog version the store takes as its floor.
    private static func catalogAccepted(_ version: Int) -> String { "catalog version \(version) accepted" }

    /// The models installed from a catalog newer than `catalog` that it does not list, as
    /// their records describe them: their files (with the hashes verified at install), kind
    /// and size; never eligible for autoChoice, and with no source (nothing is fetched while
    /// an older catalog stands in).
    private static func modelsInstalled(from ctx: ReadContext, after catalog: Catalog) throws(SQLiteError) -> [CatalogModel] {
        var out: [CatalogModel] = []
        for install in try ctx.installs() where install.state == .installed
            && install.catalogVersion > catalog.catalogVersion && catalog.model(id: install.modelId) == nil {
            let files = try ctx.files(install.modelId).map { CatalogFile(path: $0.path, size: $0.size, sha256: $0.sha256 ?? $0.verifiedSha256) }
            out.append(CatalogModel(id: install.modelId, kind: install.kind,
                                    displayName: "\(install.modelId) (from catalog version \(install.catalogVersion))",
                                    requiredMb: 0, autoEligible: false, revision: nil, files: files, sources: []))
        }
        return out
    }

    /// Rebuilds `catalog` from its parts: the given catalog, the user's models, the models
    /// kept from a missing newer catalog.
    func rebuildCatalog() {
        let user = userCatalog.withLock { $0.models }
        let kept = installedFromMissingCatalog.withLock { $0 }
        let rebuilt = user.isEmpty && kept.isEmpty ? givenCatalog : givenCatalog.adding(user).adding(kept)
        merged.withLock { $0 = rebuilt }
    }

    /// What to tell a person about the store's own catalog: that it could not be used (named
    /// with its path), and each added model whose id the catalog in use also has (that
    /// catalog's model is the one used). Empty when all is well.
    public var userCatalogWarnings: [String] {
        let (models, problem) = userCatalog.withLock { $0 }
        var out = problem.map { [$0] } ?? []
        for id in models.map(\.id) where givenCatalog.model(id: id) != nil {
            out.append("the model \(id) added to this store (\(UserCatalog.path(in: layout))) has the id of a model of the catalog in use, which is the one used; 'glasses-local remove \(id)' drops the added entry, or add it again under another --id")
        }
        return out
    }

    /// The catalog's model `id`; one installed from a newer catalog than the one standing in
    /// is known once the store is open, so the store is opened (when it exists) to look.
    func knownModel(_ id: String) throws(LocalModelError) -> CatalogModel {
        if let model = catalog.model(id: id) { return model }
        if (try? existingRecords()) != nil, let model = catalog.model(id: id) { return model }
        throw .unknownModel(id)
    }

    /// The records if the store exists, without creating anything: reads on a store that
    /// was never written answer "nothing installed" and leave the disk untouched.
    func existingRecords() throws -> Records? {
        if let records = opened.withLock({ $0 }) { return records }
        guard FileIO.exists(layout.recordsPath) else { return nil }
        return try open().records
    }

    // MARK: Queries

    /// What start-up queries read: one records snapshot and one `statvfs`.
    private struct Snapshot {
        var installs: [String: InstallRecord]
        /// The recorded files of installs made from an older catalog version (the only ones
        /// an update can concern: a catalog standing in for a newer one offers none).
        var files: [String: [FileRecord]]
        /// `heldFiles()`.
        var held: Set<String>
        var reservations: [(modelId: String, pid: Int32, bytes: Int64)]
        var space: FilesystemSpace
        /// The names in `.partial`, listed once (nil when it could not be listed: then each
        /// model's entry is looked up).
        var partials: Set<String>?
        var reservedBytes: Int64 { ExternalNumber.saturatingSum(reservations.map(\.bytes)) }
    }

    private func snapshot() throws -> Snapshot {
        let version = catalog.catalogVersion
        // A user's model is compared whatever the version recorded: `add --force` changes it.
        let userIds = Set(catalog.models.lazy.filter { $0.origin == .user }.map(\.id))
        typealias Read = ([InstallRecord], [String: [FileRecord]], Set<String>, [(modelId: String, pid: Int32, bytes: Int64)])
        let (installs, files, held, reservations): Read = try existingRecords()?.read { ctx -> Read in
            let installs = try ctx.installs()
            var files: [String: [FileRecord]] = [:]
            for install in installs where install.state == .installed
                && (install.catalogVersion < version || userIds.contains(install.modelId)) {
                files[install.modelId] = try ctx.files(install.modelId)
            }
            return (installs, files, try ctx.heldFiles(), try ctx.reservations())
        } ?? ([], [:], [], [])
        return Snapshot(installs: Dictionary(installs.map { ($0.modelId, $0) }, uniquingKeysWith: { a, _ in a }),
                        files: files, held: held, reservations: reservations, space: try probe.space(at: layout.root),
                        partials: try? Set(FileIO.listDirectory(layout.partialRoot)))
    }

    /// Every catalog model with its install state and storage fit. Reads the records and
    /// `stat`s the store: never hashes, never writes (a placed bundle is reported, see
    /// ``ModelStatus/placedBundle``, and adopted only by `download`, `verify` or
    /// `adoptPlacedBundle(modelId:)`).
    public func models() throws(LocalModelError) -> [ModelStatus] {
        do {
            return models(in: try snapshot())
        } catch {
            throw .wrap(error)
        }
    }

    /// - Parameter kind: only the models of this kind (autoChoice needs the ladder alone, and
    ///   not the `lstat`s of a placed voice's files).
    private func models(in snap: Snapshot, kind: ModelKind? = nil) -> [ModelStatus] {
        let reserved = snap.reservedBytes
        // All of them (list) without a filtered copy of every model first.
        let chosen = kind.map { kind in catalog.models.filter { $0.kind == kind } } ?? catalog.models
        return chosen.map { model in
            let record = snap.installs[model.id]
            let installed = isInstalled(model, record: record)
            let placed = !installed && hasPlacedBundle(model, record: record)
            let own = snap.reservations.first { $0.modelId == model.id }?.bytes ?? 0
            let fit = storageFit(model, installed: installed || placed, space: snap.space, reservedByOthers: max(0, reserved - own),
                                 held: snap.held, partials: snap.partials)
            // An install made from this catalog version has this catalog's files (a user's
            // model is compared whatever its version: see `snapshot`).
            let update = installed && snap.files[model.id].map { !model.matches(recorded: $0) } == true
            return ModelStatus(model: model, isInstalled: installed, isPartial: record?.state == .partial, fit: fit,
                               updateAvailable: update, placedBundle: placed)
        }
    }

    /// The status of one model, read as ``models()`` reads them (records and `stat`s only).
    public func status(of id: String) throws(LocalModelError) -> ModelStatus {
        do {
            let model = try knownModel(id)
            let records = try existingRecords()
            let record = try records?.install(id)
            let installed = isInstalled(model, record: record)
            let placed = !installed && hasPlacedBundle(model, record: record)
            let reserved = try records?.read { try $0.reservedBytes(excluding: id) } ?? 0
            let fit = storageFit(model, installed: installed || placed, space: try probe.space(at: layout.root), reservedByOthers: reserved)
            // An install made from this catalog version has this catalog's files.
            // A user's model changes with `add --force`, whatever the catalog's version.
            let update = try installed && ((record?.catalogVersion ?? 0) < catalog.catalogVersion || model.origin == .user)
                && !model.matches(recorded: records?.files(id) ?? [])
            return ModelStatus(model: model, isInstalled: installed, isPartial: record?.state == .partial, fit: fit, updateAvailable: update,
                               placedBundle: placed)
        } catch {
            throw .wrap(error)
        }
    }

    /// Storage fit of one model.
    /// - Throws: `LocalModelError.unknownModel` for an id the catalog does not have.
    public func deviceFit(for id: String) throws(LocalModelError) -> StorageFit {
        try status(of: id).fit
    }

    /// The autoChoice rule over this device and store.
    public func autoChoice() throws(LocalModelError) -> AutoDecision {
        try explainAutoChoice().decision
    }

    /// The autoChoice rule with what it was decided from: the inputs and the one memory
    /// reading they came from (what `auto --explain` and `auto --json` print, so a command
    /// never runs the rule itself or reads the memory a second time).
    public func explainAutoChoice() throws(LocalModelError) -> AutoChoiceExplanation {
        let memory = probe.memory()
        let inputs = try autoChoiceInputs(memory: memory)
        return AutoChoiceExplanation(decision: AutoChoiceRule.decide(inputs), inputs: inputs, memory: memory)
    }

    /// The rule as upstream's resolver asks it: `servedRemotely`, the models are served
    /// elsewhere (upstream's simulator), so every rung's weights count as present and the
    /// store is not read; the answer turns on the device's memory alone.
    public func autoChoice(servedRemotely: Bool) throws(LocalModelError) -> AutoDecision {
        guard servedRemotely else { return try autoChoice() }
        let memory = probe.memory()
        let rungs = catalog.models.filter { $0.kind == .llm }.map {
            LadderRung(id: $0.id, requiredMb: $0.requiredMb, autoEligible: $0.autoEligible, isInstalled: true, storageNeededBytes: 0)
        }
        return AutoChoiceRule.decide(AutoChoiceInputs(rungs: rungs, classBudgetMb: classBudgetMb(memory),
                                                      availableNowMb: memory.availableMb, freeStorageBytes: 0))
    }

    /// The class budget of a memory reading: physical memory × ``memoryShare``, in MiB.
    package func classBudgetMb(_ memory: MemoryReading) -> Int {
        Int(Double(memory.physicalMb) * memoryShare)
    }

    /// The rule's inputs as read now (for `auto --explain` and tests).
    public func autoChoiceInputs() throws(LocalModelError) -> AutoChoiceInputs {
        try autoChoiceInputs(memory: probe.memory())
    }

    private func autoChoiceInputs(memory: MemoryReading) throws(LocalModelError) -> AutoChoiceInputs {
        do {
            let snap = try snapshot()
            let statuses = models(in: snap, kind: .llm)
            return AutoChoiceInputs(
                rungs: statuses.map {
                    LadderRung(id: $0.model.id, requiredMb: $0.model.requiredMb, autoEligible: $0.model.autoEligible,
                               isInstalled: $0.isInstalled, storageNeededBytes: $0.fit.requiredBytes)
                },
                classBudgetMb: classBudgetMb(memory),
                availableNowMb: memory.availableMb,
                freeStorageBytes: max(0, snap.space.availableBytes - snap.reservedBytes))
        } catch {
            throw .wrap(error)
        }
    }

    /// The history, newest last.
    public func history(modelId: String? = nil, limit: Int = 1000) throws(LocalModelError) -> [HistoryEvent] {
        do {
            return try existingRecords()?.history(modelId: modelId, limit: limit) ?? []
        } catch {
            throw .wrap(error)
        }
    }

    func placedBundleRejected(_ id: String) -> String? {
        rejectedPlacements.withLock { $0[id] }
    }

    func notePlacedBundleRejected(_ id: String, fingerprint: String) {
        rejectedPlacements.withLock { $0[id] = fingerprint }
    }

    /// The folder of an installed model; nil when it is not installed (or the store cannot be read).
    public func installedFolder(of id: String) -> String? {
        guard let model = catalog.model(id: id), let found = try? record(of: id),
              isInstalled(model, record: found) else { return nil }
        return layout.folder(of: found)
    }

    /// The record of one model, if any.
    public func record(of id: String) throws(LocalModelError) -> InstallRecord? {
        do {
            return try existingRecords()?.install(id)
        } catch {
            throw .wrap(error)
        }
    }

    // MARK: Rules

    /// Installed means: a committed `installed` record and its folder present. A `stat`,
    /// never a re-hash: start-up must stay nearly free.
    func isInstalled(_ model: CatalogModel, record: InstallRecord?) -> Bool {
        guard let record, record.state == .installed else { return false }
        return FileIO.isDirectory(layout.folder(of: record))
    }

    /// Bytes already downloaded into `.partial` for this model: of its archive
    /// (`.partial/<id>@archive`) or of its files (`.partial/<id>/`), whichever source holds
    /// more (a `--source files` download of a model whose first source is an archive counts).
    /// - Parameter held: `heldInStore()`, when the caller read it already (once for many models).
    /// - Parameter partials: the names in `.partial`, when the caller listed it.
    func partialBytes(_ model: CatalogModel, held known: Set<String>? = nil, partials: Set<String>? = nil) -> Int64 {
        var held = known
        return model.deliveries.reduce(0) { present, delivery in
            max(present, delivery.bytesPresent(in: layout, partials: partials, held: {
                if held == nil { held = heldInStore() }
                return held ?? []
            }))
        }
    }

    /// `sha256:size` of every verified file of the installed models (an update's unchanged
    /// files included), from the records (empty when the store has none).
    func heldInStore() -> Set<String> {
        (try? existingRecords()?.read { try $0.heldFiles() }) ?? []
    }

    /// - Parameter installed: installed, or a placed bundle whose adoption needs no room.
    func storageFit(_ model: CatalogModel, installed: Bool, space: FilesystemSpace, reservedByOthers: Int64,
                    held: Set<String>? = nil, partials: Set<String>? = nil) -> StorageFit {
        let available = max(0, space.availableBytes - reservedByOthers)
        if installed {
            return StorageFit(modelId: model.id, requiredBytes: 0, availableBytes: available, presentBytes: model.installedBytes)
        }
        let need = storageStillNeeded(model, present: partialBytes(model, held: held, partials: partials))
        return StorageFit(modelId: model.id, requiredBytes: need.required, availableBytes: available, presentBytes: need.present)
    }

    /// What installing a not-yet-installed model still needs on disk: the bytes not yet
    /// downloaded, unpack room for an archive, and the margin; and the bytes already there.
    func storageStillNeeded(_ model: CatalogModel) -> (required: Int64, present: Int64) {
        storageStillNeeded(model, present: partialBytes(model))
    }

    /// The same, with the bytes present as a running transfer knows them.
    func storageStillNeeded(_ model: CatalogModel, present: Int64) -> (required: Int64, present: Int64) {
        let remaining = max(0, model.downloadBytes - present)
        // Room the preferred source needs while it builds the tree (an archive unpacks beside itself).
        let buildRoom = model.preferredDelivery?.buildRoom ?? 0
        return (remaining + buildRoom + StorageMargin.bytes(forInstalledBytes: model.installedBytes), present)
    }
}

