import FoundationEssentials

/// A bundle placed in a voice's install folder by hand becomes an install. The upstream SDK
/// hands apps that folder (`ExtentosLocalVoice.modelDirectory`) so they can seed the voice
/// from their own bundle; here such a tree is never trusted on sight: every catalog file
/// must be a regular file of its size, reached without a link, and match the catalog's
/// SHA-256 where the catalog has one. Then it is installed through `install(from:…)`, the
/// one commit path, and recorded like a download (its hashes too, for later `verify` runs);
/// nothing is fetched for it, then or later. A tree that is incomplete (an app still
/// copying) is left alone; one that fails a hash is left alone too, noted in the history,
/// and not hashed again in this process until one of its files changes.
extension ModelKind {
    /// Whether a bundle placed in this kind's install folder may become an install: voices.
    public var acceptsPlacedBundle: Bool { self == .voice }
}

extension LocalModelEngine {
    /// Adopts a bundle placed in `id`'s install folder, when the model's kind accepts one,
    /// it is not installed, and every file checks out (see above).
    ///
    /// Queries (`models()`, `status(of:)`), `download` and `verify` call this themselves;
    /// it costs one `lstat` when there is no folder, and a hash of the bundle once.
    /// - Returns: whether the bundle was adopted by this call.
    /// - Throws: `unknownModel`; `busy` while another process holds the model's lock;
    ///   `catalogUnavailable` while an older catalog stands in for the store's; the store's
    ///   own failures (records, file system) when the install cannot be committed.
    @discardableResult
    public func adoptPlacedBundle(modelId id: String) throws(LocalModelError) -> Bool {
        guard let model = catalog.model(id: id) else { throw .unknownModel(id) }
        let finalPath = layout.installPath(id: id, kind: model.kind)
        guard model.kind.acceptsPlacedBundle, FileIO.isDirectory(finalPath) else { return false }
        let records = try open().records
        do {
            if try records.install(id)?.state == .installed { return false }
        } catch { throw .wrap(error, modelId: id) }
        try requireStoreCatalog()
        return try withModelLock(id) { () throws(LocalModelError) -> Bool in
            try DownloadRun(engine: self, model: model, records: records, options: DownloadOptions(),
                            cancellation: CancellationFlag(), onEvent: { _ in }).adoptPlaced(finalPath: finalPath)
        }
    }

    /// Whether `model` may have a placed bundle waiting: a kind that accepts one, no
    /// committed install, and a folder where its install goes (one `lstat`).
    func mayHavePlacedBundle(_ model: CatalogModel, record: InstallRecord?) -> Bool {
        model.kind.acceptsPlacedBundle && record?.state != .installed
            && FileIO.isDirectory(layout.installPath(id: model.id, kind: model.kind))
    }

    /// For queries, which answer whatever happens: adopts what may be adopted, and says
    /// whether anything was. A bundle that cannot be adopted now (busy, a read-only store)
    /// stays where it is and is tried again by the next query.
    func adoptPlacedBundles(_ models: [(CatalogModel, InstallRecord?)]) -> Bool {
        var adopted = false
        for (model, record) in models where mayHavePlacedBundle(model, record: record) {
            if (try? adoptPlacedBundle(modelId: model.id)) == true { adopted = true }
        }
        return adopted
    }
}

extension DownloadRun {
    /// Under the model's lock: checks the tree at `finalPath` and, when every file matches,
    /// installs it as it is. Returns false (changing nothing) when it is not a complete,
    /// matching bundle.
    func adoptPlaced(finalPath: String) throws(LocalModelError) -> Bool {
        guard model.kind.acceptsPlacedBundle, FileIO.isDirectory(finalPath) else { return false }
        if recorder.prior.install?.state == .installed { return false }
        // Every catalog file a regular file of its size, reached without a link (P11).
        // Anything less is not a bundle yet, and costs no more than these `lstat`s.
        var checked = Set<String>()
        var identity: [String] = []
        identity.reserveCapacity(model.files.count)
        for file in model.files {
            guard FileIO.regularFileSize(file.path, in: finalPath, checked: &checked) == file.size,
                  let found = try? FileIO.status(finalPath + "/" + file.path) else { return false }
            identity.append("\(found.identity.inode):\(found.size):\(found.modified.seconds).\(found.modified.nanoseconds):\(found.statusChanged.seconds).\(found.statusChanged.nanoseconds)")
        }
        let fingerprint = identity.joined(separator: ",")
        if engine.placedBundleRejected(id) == fingerprint { return false }

        onEvent(.phase(.verify))
        let result = try checkLocalFiles(model.files, in: finalPath, stopAtFirstProblem: true)
        if let (path, problem) = result.problems.first {
            engine.notePlacedBundleRejected(id, fingerprint: fingerprint)
            try? recorder.note(.verified, "the bundle placed in \(finalPath) was not adopted: \(path): \(problem). It stays where it is; a download replaces it.")
            return false
        }
        let hashes = result.hashes
        _ = try install(FetchedTree(path: finalPath, hashes: hashes, origin: "placed in \(finalPath)"), finalPath: finalPath)
        return true
    }
}
