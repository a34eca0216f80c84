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

    // Progress state.
    private var lastFraction = 0.0
    private var rateWindow: [(time: Double, bytes: Int64)] = []
    /// This run's first progress reading, for the average rate reported at the end.
    private var firstReading: (time: Double, bytes: Int64)?
    /// When the resume state was last written to the records.
    private var lastPersisted = 0.0
    /// Server validators not yet written (see `persist`).
    private var pendingValidators: [FileRecord] = []
    /// Archive entries the catalog does not list, skipped by the unpacking (for the history).
    var skippedExtras: [String] = []

    init(engine: LocalModelEngine, model: CatalogModel, records: Records, options: DownloadOptions,
         cancellation: CancellationFlag, onEvent: @escaping (DownloadEvent) -> Void) {
        self.engine = engine
        self.model = model
        self.records = records
        self.options = options
        self.cancellation = cancellation
        self.onEvent = onEvent
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
        if let record = try? records.install(id), record.state == .installed, FileIO.isDirectory(finalPath),
           let files = try? records.files(id), model.matches(recorded: files) {
            emitFinalProgress()
            onEvent(.done(path: finalPath, alreadyInstalled: true))
            return finalPath
        }

        // Space, before any byte moves (counting other downloads' reservations).
        let fit: StorageFit
        do {
            let reserved = try records.read { try $0.reservedBytes(excluding: id) }
            let space = try engine.probe.space(at: layout.root)
            fit = engine.storageFit(model, installed: false, space: space, reservedByOthers: reserved)
        } catch { throw io(error) }
        guard fit.fits else {
            throw .insufficientStorage(modelId: id, requiredMb: fit.requiredMb, availableMb: fit.availableMb)
        }

        let resumed = fit.presentBytes > 0
        do {
            try records.write { ctx in
                try ctx.reserve(id, bytes: fit.requiredBytes, pid: ProcessEnvironment.processID)
                if try ctx.read.install(id)?.state != .installed {
                    try ctx.upsert(InstallRecord(modelId: id, kind: model.kind, state: .partial, catalogVersion: engine.catalog.catalogVersion,
                                                 path: nil, totalBytes: model.installedBytes, createdAt: ctx.now, updatedAt: ctx.now))
                }
                try ctx.append(resumed ? .resumed : .started, modelId: id,
                               detail: resumed ? "resuming with \(fit.presentBytes) bytes on disk" : "downloading \(model.downloadBytes) bytes")
            }
        } catch { throw io(error) }

        do {
            let path = try fetchAndInstall(finalPath: finalPath)
            emitFinalProgress()
            onEvent(.done(path: path, alreadyInstalled: false))
            return path
        } catch {
            let kept = engine.partialBytes(model)
            try? records.write { ctx in
                try ctx.release(id)
                if var record = try ctx.read.install(id), record.state == .partial {
                    record.lastError = error.description
                    record.updatedAt = ctx.now
                    try ctx.upsert(record)
                }
                if case .cancelled = error {
                    try ctx.append(.failed, modelId: id, detail: "interrupted; \(kept) bytes kept")
                } else {
                    try ctx.append(.failed, modelId: id, detail: error.description)
                }
            }
            if case .cancelled = error { throw LocalModelError.cancelled(modelId: id, keptBytes: kept) }
            throw error
        }
    }

    /// Links and special files in this model's partial and staging data, or in place of its
    /// install folder, are removed before anything is written (P11): a link is never
    /// followed, never resumed into, never moved. Each removal is recorded.
    private func removePlantedLinks(finalPath: String) throws(LocalModelError) {
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
            try records.append(.repaired, modelId: id, detail: "removed \(removed.count) symbolic link(s) or special file(s) planted in the store (first: \(removed[0])); links inside the store are never followed")
        } catch { throw io(error) }
    }

    // MARK: Sources

    private func fetchAndInstall(finalPath: String) throws(LocalModelError) -> String {
        var lastError: LocalModelError?
        for (n, source) in model.sources.enumerated() {
            do {
                switch source {
                case .files(let base):
                    let hashes = try fetchFiles(baseURL: rewrite(base))
                    return try install(from: layout.partialPath(id: id), hashes: hashes, finalPath: finalPath, origin: source.recordText)
                case .archive(let archive):
                    let hashes = try fetchArchive(archive)
                    return try install(from: layout.stagingPath(id: id), hashes: hashes, finalPath: finalPath, origin: source.recordText)
                }
            } catch {
                switch error {
                case .cancelled, .diskFull, .insufficientStorage, .busy, .records, .system, .transfer, .incompleteInstall:
                    throw error
                default:
                    lastError = error
                    if n + 1 < model.sources.count {
                        onEvent(.sourceFallback(failed: source.primaryURL, reason: error.description))
                    }
                }
            }
        }
        throw lastError ?? .noSource(modelId: id, kind: options.source)
    }

    func rewrite(_ url: String) -> String { MirrorRewrite.apply(options.mirror, to: url) }

    private func allowPlainHTTP(_ url: String) -> Bool {
        CatalogRules.isPlainHTTP(url)
    }

    private func fetchFiles(baseURL: String) throws(LocalModelError) -> [String: String] {
        onEvent(.phase(.download))
        let saved = (try? records.read { try $0.partialFiles(id) }) ?? []
        let validators = Dictionary(saved.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        let partialRoot = layout.partialPath(id: id)
        adoptStoredCopies()
        let requests = model.files.map { file in
            FileRequest(name: file.path, url: baseURL + ModelURL.percentEncode(file.path), partialPath: partialRoot + "/" + file.path,
                        boundary: layout.root, size: file.size, sha256: file.sha256, etag: validators[file.path]?.etag,
                        lastModified: validators[file.path]?.lastModified)
        }
        let outcomes = try transfer(requests, plainHTTP: allowPlainHTTP(baseURL))
        var hashes: [String: String] = [:]
        for (request, outcome) in zip(requests, outcomes) {
            switch outcome {
            case .completed(let sha, _, _): hashes[request.name] = sha
            case .failed(let failure): throw map(failure, request: request)
            }
        }
        onEvent(.phase(.verify))
        return hashes
    }

    /// Downloads the archive and unpacks it while the bytes arrive (`ArchiveFeed`); the
    /// unpacked tree counts only once the archive's SHA-256 matched. A stream that restarts
    /// under the extractor is unpacked again from the verified file.
    private func fetchArchive(_ archive: ArchiveSource) throws(LocalModelError) -> [String: String] {
        onEvent(.phase(.download))
        let url = rewrite(archive.url)
        let saved = (try? records.read { try $0.partialFiles(id) })?.first { $0.path == "@archive" }
        let request = FileRequest(name: FileIO.lastComponent(of: archive.url), url: url, partialPath: layout.partialArchivePath(id: id),
                                  boundary: layout.root, size: archive.size, sha256: archive.sha256, etag: saved?.etag, lastModified: saved?.lastModified)
        let staging = layout.stagingPath(id: id)
        do {
            try layout.remove(staging)
            try layout.createDirectory(staging)
        } catch { throw io(error) }

        let feed = ArchiveFeed(path: request.partialPath)
        let unpacking = Unpacking()
        let (files, flag) = (model.files, cancellation)
        Threads.start(name: "gl-unpack") {
            unpacking.finish(Swift.Result { () throws(UnpackError) in
                try ArchiveExtractor.extract(feed: feed, format: archive.format, stripComponents: archive.stripComponents,
                                             into: staging, files: files, isCancelled: { flag.isCancelled })
            })
        }
        let outcomes: [FileOutcome]
        do {
            outcomes = try transfer([request], plainHTTP: allowPlainHTTP(url), validatorKey: "@archive", feed: feed)
        } catch {
            feed.abandon("the transfer could not run")
            _ = unpacking.wait()
            _ = try? layout.remove(staging)
            throw error
        }
        if case .failed(let failure) = outcomes[0] {
            feed.abandon("the download did not finish")
            _ = unpacking.wait()
            _ = try? layout.remove(staging)
            throw map(failure, request: request)
        }
        // Every byte is on disk and matched the catalog's SHA-256.
        feed.finish(at: archive.size)
        onEvent(.phase(.verify))
        onEvent(.phase(.unpack))
        TestHooks.point("unpack")
        var result = unpacking.wait()
        if case .failure(.abandoned) = result {
            do {
                try layout.remove(staging)
                try layout.createDirectory(staging)
            } catch { throw io(error) }
            result = Swift.Result { () throws(UnpackError) in
                try ArchiveExtractor.extract(archivePath: request.partialPath, format: archive.format,
                                             stripComponents: archive.stripComponents, into: staging, files: model.files,
                                             isCancelled: { self.cancellation.isCancelled })
            }
        }
        switch result {
        case .success(let extracted):
            skippedExtras = extracted.skipped
            if !extracted.skipped.isEmpty { onEvent(.skippedExtras(entries: extracted.skipped)) }
            return extracted.hashes
        case .failure(let error):
            _ = try? layout.remove(staging)
            switch error {
            case .cancelled: throw .cancelled(modelId: id, keptBytes: archive.size)
            case .noSpace(let path):
                throw .diskFull(modelId: id, file: path, neededMb: Int((model.installedBytes + (1 << 20) - 1) >> 20), keptBytes: archive.size)
            case .system(let error): throw .system(error, modelId: id)
            default:
                // The archive matched its catalog hash, so the catalog itself is wrong or hostile.
                throw .unsafeArchive(modelId: id, url: url, problem: error.description)
            }
        }
    }

    /// Runs a transfer session; its ticks carry the resume state, persisted in one place.
    private func transfer(_ requests: [FileRequest], plainHTTP: Bool, validatorKey: String? = nil,
                          feed: ArchiveFeed? = nil) throws(LocalModelError) -> [FileOutcome] {
        let session = TransferSession(
            policy: options.policy, cancellation: cancellation, allowPlainHTTPRedirects: plainHTTP,
            tickInterval: options.progressInterval,
            onEvent: { [self] event in
                switch event {
                case let .restarted(file, reason):
                    feed?.abandon(reason)
                    onEvent(.restarted(file: file, reason: reason))
                case let .retry(file, attempt, cause, delay): onEvent(.retry(file: file, attempt: attempt, cause: cause, delay: delay))
                case .stalled(let file): onEvent(.stall(file: file))
                case .completed(let file, _): onEvent(.fileCompleted(file: file))
                }
            },
            onTick: { [self] tick in
                feed?.advance(to: tick.presentBytes)
                persist(tick, validatorKey: validatorKey)
                if tick.reason != .validators { progress(tick.presentBytes, tick.totalBytes) }
            })
        do {
            return try session.run(requests)
        } catch {
            throw .transfer(error, modelId: id)
        }
    }

    /// The one place the resume state reaches the records: validators for `If-Range`, and
    /// the space reservation brought down to what is still missing (so other downloads'
    /// free-space checks neither double-count the bytes already written nor miss ours).
    /// Validators of files worth resuming are written before their first body byte; the
    /// rest, with the reservation, every 2 s and at the end (a commit each would cost
    /// hundreds of fsyncs on a voice bundle).
    private func persist(_ tick: TransferTick, validatorKey: String?) {
        pendingValidators += tick.validators.map {
            FileRecord(path: validatorKey ?? $0.name, size: $0.size, sha256: nil, etag: $0.etag, lastModified: $0.lastModified)
        }
        let now = monotonicSeconds()
        let reservationDue = now - lastPersisted >= 2
        guard reservationDue || tick.reason != .scheduled else { return }
        guard reservationDue || !pendingValidators.isEmpty else { return }
        let batch = pendingValidators
        pendingValidators = []
        let stillNeeded = reservationDue ? engine.storageStillNeeded(model, present: tick.presentBytes).required : nil
        if reservationDue { lastPersisted = now }
        try? records.write { ctx in
            if let stillNeeded { try ctx.reserve(id, bytes: stillNeeded, pid: ProcessEnvironment.processID) }
            for file in batch { try ctx.upsertPartialFile(id, file) }
        }
    }

    private func map(_ failure: FileFailure, request: FileRequest) -> LocalModelError {
        .init(failure, modelId: id, request: request) { [engine, model] in
            let kept = engine.partialBytes(model)
            return (kept, model.downloadBytes - kept)
        }
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
        var rate = 0.0
        if let first = rateWindow.first, now - first.time > 0.2 {
            rate = max(0, Double(present - first.bytes) / (now - first.time))
        }
        onEvent(.progress(bytes: present, total: total, fraction: fraction, bytesPerSecond: rate))
    }

    private func emitFinalProgress() {
        let total = model.downloadBytes
        var average = 0.0
        if let first = firstReading, monotonicSeconds() - first.time > 0.05 {
            average = Double(total - first.bytes) / (monotonicSeconds() - first.time)
        }
        onEvent(.progress(bytes: total, total: total, fraction: 1.0, bytesPerSecond: max(0, average)))
    }
}

/// The unpacking thread's answer, waited for by the download thread.
private final class Unpacking: @unchecked Sendable {
    // @unchecked: `result` is written once and read after, both under `lock`.
    private let lock = Threads.Lock()
    private var result: Result<ArchiveExtractor.Result, UnpackError>?

    func finish(_ value: Result<ArchiveExtractor.Result, UnpackError>) {
        lock.withLock {
            result = value
            lock.broadcast()
        }
    }

    func wait() -> Result<ArchiveExtractor.Result, UnpackError> {
        lock.withLock {
            while result == nil { lock.wait() }
            return result ?? .failure(.abandoned("no answer"))
        }
    }
}
