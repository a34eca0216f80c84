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
///
/// Hashing a bundle takes seconds on a phone's or glasses' SoC (369 MB for Kokoro), so only
/// `download`, `verify` and ``LocalModelEngine/adoptPlacedBundle(modelId:)`` adopt. Queries
/// (`models()`, `status(of:)`, the facades' getters, `list`, `info`) only `lstat` the files
/// and report ``ModelStatus/placedBundle``: every file there with its size, as the upstream
/// SDK's `KokoroVoiceModel.isInstalled()` documents an installed voice.
extension ModelKind {
    /// Whether a bundle placed in this kind's install folder may become an install: voices.
    public var acceptsPlacedBundle: Bool { self == .voice }
}

extension LocalModelEngine {
    /// Adopts a bundle placed in `id`'s install folder, when the model's kind accepts one,
    /// it is not installed, and every file checks out (see above). Blocks while it hashes.
    ///
    /// `download` and `verify` call this themselves; queries never do. It costs one `lstat`
    /// when there is no folder, and a hash of the bundle once.
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

    /// ``adoptPlacedBundle(modelId:)`` on a thread of its own, for callers that must not
    /// block (an app's main actor): the hashing never runs on the caller's thread.
    public func adoptPlacedBundleInBackground(modelId id: String) async throws(LocalModelError) -> Bool {
        let result: Result<Bool, LocalModelError> = await withCheckedContinuation { continuation in
            Threads.start(name: "gl-adopt") {
                do throws(LocalModelError) {
                    continuation.resume(returning: .success(try self.adoptPlacedBundle(modelId: id)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Whether a bundle waits in `model`'s install folder for adoption, from `lstat`s alone:
    /// a kind that accepts one, no committed install, every catalog file there as a regular
    /// file of its size (reached without a link), and not a bundle this process already
    /// found not to match. What the upstream SDK calls an installed voice.
    func hasPlacedBundle(_ model: CatalogModel, record: InstallRecord?) -> Bool {
        guard model.kind.acceptsPlacedBundle, record?.state != .installed,
              let fingerprint = placedBundleFingerprint(model, in: layout.installPath(id: model.id, kind: model.kind)) else { return false }
        return placedBundleRejected(model.id) != fingerprint
    }

    /// The identity (inode, size, times) of every file of a complete bundle at `folder`;
    /// nil when the folder is missing or any catalog file is not a regular file of its size.
    func placedBundleFingerprint(_ model: CatalogModel, in folder: String) -> String? {
        guard FileIO.isDirectory(folder) else { return nil }
        // Every catalog file a regular file of its size, reached without a link (P11).
        var checked = Set<String>()
        var identity: [String] = []
        identity.reserveCapacity(model.files.count)
        for file in model.files {
            guard FileIO.regularFileSize(file.path, in: folder, checked: &checked) == file.size,
                  let found = try? FileIO.status(folder + "/" + file.path) else { return nil }
            identity.append("\(found.identity.inode):\(found.size):\(found.modified.seconds).\(found.modified.nanoseconds):\(found.statusChanged.seconds).\(found.statusChanged.nanoseconds)")
        }
        return identity.joined(separator: ",")
    }
}

extension DownloadRun {
    /// Under the model's lock: checks the tree at `finalPath` and, when every file matches,
    /// installs it as it is. Returns false (changing nothing) when it is not a complete,
    /// matching bundle.
    func adoptPlaced(finalPath: String) throws(LocalModelError) -> Bool {
        guard model.kind.acceptsPlacedBundle, recorder.prior.install?.state != .installed,
              // Anything less than a complete bundle costs no more than these `lstat`s.
              let fingerprint = engine.placedBundleFingerprint(model, in: finalPath),
              engine.placedBundleRejected(id) != fingerprint else { return false }

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
