import FoundationEssentials

/// One download of one model, under its lock.
final class DownloadRun {
    let engine: LocalModelEngine
    let model: CatalogModel
    let records: Records
    let options: DownloadOptions
    let cancellation: CancellationFlag
    let onEvent: (DownloadEvent) -> Void
    var layout: StoreLayout { engine.layout }
    var id: String { model.id }

    /// The one writer of this download's state to the records.
    let recorder: DownloadRecorder
    /// What the Hugging Face cache holds of the model, looked up once before the run
    /// (`LocalModelEngine.huggingFaceCopies`); nil when there is nothing to link from there.
    let huggingFaceCopies: LocalCopies?
    /// Files a transfer of this run started over from zero: a linked copy among them was
    /// refused (its bytes did not match) and downloaded.
    private(set) var restartedFiles: Set<String> = []

    // Progress state.
    private var lastFraction = 0.0
    private var rateWindow: [(time: Double, bytes: Int64)] = []
    /// This run's first progress reading, for the average rate reported at the end.
    private var firstReading: (time: Double, bytes: Int64)?

    /// Reads what the records hold for the model (the one read of a download).
    init(engine: LocalModelEngine, model: CatalogModel, records: Records, options: DownloadOptions,
         cancellation: CancellationFlag, huggingFaceCopies: LocalCopies? = nil,
         onEvent: @escaping (DownloadEvent) -> Void) throws(LocalModelError) {
        self.engine = engine
        self.huggingFaceCopies = huggingFaceCopies
        self.model = model
        self.records = records
        self.options = options
        self.cancellation = cancellation
        self.onEvent = onEvent
        self.recorder = try DownloadRecorder(records: records, model: model, catalogVersion: engine.catalog.catalogVersion,
                                             stillNeeded: { [engine] present in engine.storageStillNeeded(model, present: present).required })
    }

    func io(_ error: any Error) -> LocalModelError { .wrap(error, modelId: id) }

    func execute() throws(LocalModelError) -> String {
        let finalPath = layout.installPath(id: id, kind: model.kind)
        try removePlantedLinks(finalPath: finalPath)
        // A bundle placed in the install folder by hand, every file checked: installed as it is.
        if try adoptPlaced(finalPath: finalPath) {
            emitFinalProgress()
            onEvent(.done(path: finalPath, alreadyInstalled: true))
            return finalPath
        }
        // Already installed with exactly these files: nothing to do.
        if isInstalledAsIs(finalPath) {
            emitFinalProgress()
            onEvent(.done(path: finalPath, alreadyInstalled: true))
            return finalPath
        }

        // Space, before any byte moves (counting other downloads' reservations).
        let fit: StorageFit
        do {
            let space = try engine.probe.space(at: layout.root)
            fit = engine.storageFit(model, installed: false, space: space, reservedByOthers: recorder.prior.reservedByOthers,
                                    held: recorder.prior.held)
        } catch { throw io(error) }
        guard fit.fits else {
            throw .insufficientStorage(modelId: id, requiredMb: fit.requiredMb, availableMb: fit.availableMb)
        }
        try recorder.begin(reserving: fit.requiredBytes, present: fit.presentBytes)

        do {
            let path = try fetchAndInstall(finalPath: finalPath)
            emitFinalProgress()
            onEvent(.done(path: path, alreadyInstalled: false))
            return path
        } catch {
            // An interruption carries the bytes its transfer left on disk (`TransferResult`).
            recorder.failed(error)
            throw error
        }
    }

    /// Whether the model is installed at `finalPath` with exactly the catalog's files.
    func isInstalledAsIs(_ finalPath: String) -> Bool {
        recorder.prior.install?.state == .installed && FileIO.isDirectory(finalPath) && model.matches(recorded: recorder.prior.files)
    }

    /// Links and special files in this model's partial and staging data, or in place of its
    /// install folder, are removed before anything is written (P11): a link is never
    /// followed, never resumed into, never moved. Each removal is recorded.
    func removePlantedLinks(finalPath: String) throws(LocalModelError) {
        var removed: [String] = []
        do {
            for path in [layout.partialPath(id: id), layout.partialArchivePath(id: id), layout.stagingPath(id: id)] {
                removed += try layout.removeLinks(in: path).map { $0.isEmpty ? path : path + "/" + $0 }
            }
            if try FileIO.status(finalPath)?.kind == .symbolicLink {
                try layout.remove(finalPath)
                removed.append(finalPath)
            }
            guard !removed.isEmpty else { return }
            try recorder.note(.repaired, "removed \(removed.count) symbolic link(s) or special file(s) planted in the store (first: \(removed[0])); links inside the store are never followed")
        } catch { throw io(error) }
    }

    // MARK: Sources

    /// Tries the sources in catalog order; the first that delivers a verified tree is installed.
    private func fetchAndInstall(finalPath: String) throws(LocalModelError) -> String {
        var lastError: LocalModelError?
        let deliveries = model.deliveries
        for (n, delivery) in deliveries.enumerated() {
            do {
                let tree = try delivery.fetch(in: self)
                let path = try install(tree, finalPath: finalPath)
                if let used = tree.localCopies { onEvent(.usedLocalCopies(used)) }
                return path
            } catch {
                switch error {
                case .cancelled, .diskFull, .insufficientStorage, .busy, .records, .system, .transfer, .incompleteInstall:
                    throw error
                default:
                    lastError = error
                    if n + 1 < deliveries.count {
                        onEvent(.sourceFallback(failed: delivery.source.primaryURL, reason: error.description))
                    }
                }
            }
        }
        throw lastError ?? .noSource(modelId: id, kind: options.source)
    }

    /// A catalog URL as this run fetches it: `--mirror`, else `HF_ENDPOINT`, applied.
    func rewrite(_ url: String) -> String { options.fetchURL(url) }

    /// Runs a transfer for a source. Its ticks go to the recorder (the resume state) and to
    /// the progress events; its answer goes back to the source.
    /// - Parameters:
    ///   - validatorKey: the name the validators are saved under (nil: each file's own).
    ///   - readers: who reads a request's partial file while it is written, by index.
    func transfer(_ requests: [FileRequest], plainHTTP: Bool, validatorKey: String? = nil,
                  readers: [Int: any PartialFileReader] = [:]) throws(LocalModelError) -> TransferResult {
        let session = TransferSession(
            options: options, cancellation: cancellation, allowPlainHTTPRedirects: plainHTTP,
            onEvent: { [self] event in
                if case .restarted(let file, _) = event { restartedFiles.insert(file) }
                onEvent(DownloadEvent(event))
            },
            onTick: { [self] tick in
                recorder.checkpoint(tick, key: validatorKey)
                if tick.reason != .validators { progress(tick.presentBytes, tick.totalBytes) }
            })
        do {
            return try session.run(requests, readers: readers)
        } catch {
            throw .transfer(error, modelId: id)
        }
    }

    /// One file's failure, named for this model, with the bytes the transfer left on disk.
    /// - Parameter downloadBytes: what the source fetches in all (for the space still needed).
    func failure(_ failure: FileFailure, request: FileRequest, result: TransferResult, downloadBytes: Int64) -> LocalModelError {
        .init(failure, modelId: id, request: request) { (result.bytesOnDisk, max(0, downloadBytes - result.bytesOnDisk)) }
    }

    // MARK: Progress

    /// One progress event per tick (the session's interval is the only throttle).
    private func progress(_ present: Int64, _ total: Int64) {
        if present > 0 && present < total { TestHooks.point("download") }
        let now = monotonicSeconds()
        if firstReading == nil { firstReading = (now, present) }
        rateWindow.append((now, present))
        rateWindow.removeAll { now - $0.time > 5 }
        let raw = total > 0 ? Double(present) / Double(total) : 0
        // Non-decreasing, and 1.0 only after the commit.
        let fraction = max(lastFraction, min(raw, 0.999))
        lastFraction = fraction
        // The last five seconds' rate; until they span 0.2 s, the run's average so far (a
        // download that ends within a tick still shows how fast it went).
        var rate = 0.0
        if let first = rateWindow.first, now - first.time > 0.2 {
            rate = max(0, Double(present - first.bytes) / (now - first.time))
        } else if let first = firstReading, now > first.time {
            rate = max(0, Double(present - first.bytes) / (now - first.time))
        }
        onEvent(.progress(bytes: present, total: total, fraction: fraction, bytesPerSecond: rate))
    }

    private func emitFinalProgress() {
        let total = model.downloadBytes
        var average = 0.0
        let now = monotonicSeconds()
        if let first = firstReading, now > first.time {
            average = Double(total - first.bytes) / (now - first.time)
        }
        onEvent(.progress(bytes: total, total: total, fraction: 1.0, bytesPerSecond: max(0, average)))
    }
}

/// A delivery sees the download through `DeliveryRun` alone.
extension DownloadRun: DeliveryRun {
    var savedValidators: [String: FileRecord] { recorder.prior.validators }
}
