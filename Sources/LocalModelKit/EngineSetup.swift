import FoundationEssentials

/// The one place a process's surroundings become a configured engine: the store folder,
/// the catalog file, the memory overrides (through the device probe), the CA file (through
/// the transfer policy). The facades and the command both build their engine here.
public struct EngineSetup: Sendable {
    /// The process environment (a value, so tests can set it).
    public var environment: [String: String]
    /// An explicit store folder (`--store`, `configure(storeDirectory:)`); nil for the
    /// environment's default (`StoreLayout.defaultRoot`).
    public var storeDirectory: String?
    /// An explicit catalog file (`--catalog`, `configure(catalogFile:)`); nil for
    /// `$EXTENTOS_CATALOG`, else the store's signed catalog or the built-in one. An http(s)
    /// URL is a signed catalog, fetched and checked as `catalog update` does.
    public var catalogFile: String?
    /// Share of physical memory a model may use (the memory class budget).
    public var memoryShare: Double
    /// The device probe; nil for the system's, which reads the `EXTENTOS_MEMORY_*` overrides.
    public var probe: (any DeviceProbe)?
    /// The trusted catalog keys when the caller read them already (the command, which also
    /// warns about skipped key files); nil to read them from the environment here.
    public var catalogKeys: [(name: String, pem: String)]?
    /// Why the network is off when a caller switched it off (`--offline`); nil leaves it to
    /// the environment (`EXTENTOS_OFFLINE`, `HF_HUB_OFFLINE`, `TRANSFORMERS_OFFLINE`).
    public var offlineBy: String?

    /// `catalogKeys`, else the shipped keys and those of `EXTENTOS_CATALOG_KEYS`.
    public var trustedKeys: [(name: String, pem: String)] { catalogKeys ?? TrustedCatalogKeys.all(environment: environment) }

    /// A setup; every argument left out is the environment's choice.
    /// - Parameters:
    ///   - environment: the process environment (tests give their own).
    ///   - storeDirectory: the store folder; nil for ``StoreLayout/defaultRoot(environment:)``.
    ///   - catalogFile: a catalog file or signed catalog URL; nil for `$EXTENTOS_CATALOG`,
    ///     else the store's signed catalog or the built-in one.
    ///   - memoryShare: share of physical memory a model may use.
    ///   - probe: a stand-in for the device; nil for the system's.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment, storeDirectory: String? = nil,
                catalogFile: String? = nil, memoryShare: Double = 0.5, probe: (any DeviceProbe)? = nil) {
        self.environment = environment
        self.storeDirectory = storeDirectory
        self.catalogFile = catalogFile
        self.memoryShare = memoryShare
        self.probe = probe
    }

    /// The store folder this setup opens, or nil when nothing names one (no HOME, no
    /// `EXTENTOS_MODELS_DIR`, none given).
    public var storeRoot: String? {
        if let storeDirectory, !storeDirectory.isEmpty { return storeDirectory }
        return StoreLayout.defaultRoot(environment: environment)
    }

    /// The catalog file this setup reads, nil for the built-in catalog.
    public var catalogPath: String? {
        if let catalogFile, !catalogFile.isEmpty { return catalogFile }
        if let file = environment["EXTENTOS_CATALOG"], !file.isEmpty { return file }
        return nil
    }

    /// Whether `--catalog` names a URL (a signed catalog to update from) rather than a file.
    package static func isURL(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.hasPrefix("https://") || CatalogRules.isPlainHTTP(text)
    }

    /// Where the catalog comes from, for messages: its path or URL, the stored catalog's
    /// path, or "built-in". Reads the catalog: callers that also need it use `resolvedCatalog()`.
    public var catalogSource: String { (try? resolvedCatalog().source) ?? catalogPath ?? "built-in" }

    /// The catalog: the file, fully validated and not expired; else the newest signed
    /// catalog the store accepted when it is newer than the built-in one; else the built-in
    /// one (validated when built, never expiring).
    public func catalog() throws(LocalModelError) -> Catalog {
        try resolvedCatalog().catalog
    }

    /// The catalog and where it came from (for messages), read once.
    public func resolvedCatalog() throws(LocalModelError) -> (catalog: Catalog, source: String) {
        let loader = CatalogLoader()
        if let url = catalogPath, Self.isURL(url) {
            // `--catalog URL`: the same checks as `catalog update`, then the catalog in use.
            var floor = self
            floor.catalogFile = nil
            floor.environment["EXTENTOS_CATALOG"] = nil
            let engine = try floor.makeEngine()
            let update = try engine.updateCatalog(from: url, keys: trustedKeys,
                                                  options: DownloadOptions(policy: transferPolicy()))
            return (update.catalog, url)
        }
        guard let path = catalogPath else {
            // The newest signed catalog the store accepted (`catalog update`), re-verified;
            // the built-in one is the floor.
            let bundled = loader.bundled()
            if let root = storeRoot,
               let stored = StoreLayout(root: root).storedCatalog(keys: trustedKeys),
               stored.catalog.catalogVersion > bundled.catalogVersion {
                return stored
            }
            return (bundled, "built-in")
        }
        let catalog: Catalog
        do {
            catalog = try loader.load(contentsOf: path)
        } catch {
            throw .invalidCatalog(error)
        }
        if catalog.isExpired(now: Int64(SystemClock.wallSeconds())), let expiresAt = catalog.expiresAt {
            throw .catalogExpired(source: path, expiresAt: expiresAt)
        }
        return (catalog, path)
    }

    /// The engine, over `catalog` when one was read already.
    public func makeEngine(catalog: Catalog? = nil) throws(LocalModelError) -> LocalModelEngine {
        guard let root = storeRoot else { throw .noStoreFolder }
        let chosen: Catalog
        if let catalog { chosen = catalog } else { chosen = try self.catalog() }
        // Unless a file was named, the catalog is the store's own choice (its newest trusted
        // catalog, one just accepted from a URL, or the built-in floor).
        let chosenByStore = catalogPath.map(Self.isURL) ?? true
        return LocalModelEngine(layout: StoreLayout(root: root), catalog: chosen,
                                probe: probe ?? SystemDeviceProbe(environment: environment), memoryShare: memoryShare,
                                catalogChosenByStore: chosenByStore, localCopies: LocalCopySettings(environment: environment))
    }

    /// Transfer defaults for this environment (`$EXTENTOS_CA_FILE` and curl's conventions,
    /// the credentials' places, offline, `HF_ENDPOINT`).
    public func transferPolicy() -> TransferPolicy {
        var policy = TransferPolicy(environment: environment)
        if let offlineBy { policy.offlineBy = offlineBy }
        return policy
    }
}

/// What the SDK facades answer. These never throw: an app asks at start-up, and a store
/// that cannot be read must still get an answer (the reason goes with it, for diagnostics).
extension LocalModelEngine {
    /// A storage fit in whole MiB, as the SDK's `DeviceFit` carries it.
    package struct FitAnswer: Sendable, Equatable {
        /// The model asked about.
        package var modelId: String
        /// Rounded up: never promise less than is needed.
        package var requiredMb: Int
        /// Rounded down: never promise more than there is.
        package var availableMb: Int
        /// Whether it fits (false for an id the catalog does not have).
        package var fits: Bool
    }

    /// Every catalog model with its state; when the store cannot be read, every model as
    /// not installed, with the reason.
    package func modelsAnswer() -> (models: [ModelStatus], problem: LocalModelError?) {
        do {
            return (try models(), nil)
        } catch {
            let none = catalog.models.map { model in
                ModelStatus(model: model, isInstalled: false, isPartial: false,
                            fit: StorageFit(modelId: model.id, requiredBytes: 0, availableBytes: 0, presentBytes: 0))
            }
            return (none, .wrap(error))
        }
    }

    /// Whether installing `id` fits. An id the catalog does not have answers
    /// `requiredMb 0, fits false` with the real `availableMb` (nothing can be installed
    /// under an unknown id); a store that cannot be read answers 0, 0, false, with the reason.
    package func fitAnswer(for id: String) -> (fit: FitAnswer, problem: LocalModelError?) {
        guard catalog.model(id: id) != nil else {
            let available = (try? probe.space(at: layout.root))?.availableBytes ?? 0
            return (FitAnswer(modelId: id, requiredMb: 0, availableMb: Int(max(0, available) >> 20), fits: false), nil)
        }
        do {
            let fit = try deviceFit(for: id)
            return (FitAnswer(modelId: id, requiredMb: fit.requiredMb, availableMb: fit.availableMb, fits: fit.fits), nil)
        } catch {
            return (FitAnswer(modelId: id, requiredMb: 0, availableMb: 0, fits: false), .wrap(error))
        }
    }
}
