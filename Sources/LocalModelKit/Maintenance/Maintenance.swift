import FoundationEssentials

/// What `delete` removed.
public struct DeleteResult: Sendable, Equatable {
    /// The model asked about.
    public var modelId: String
    /// False when there was nothing to delete (no record, no files, no partial data).
    public var existed: Bool
    /// Bytes the filesystem got back (files another model still links are not counted).
    public var freedBytes: Int64
}

/// What `verify` found.
public struct VerifyReport: Sendable, Equatable {
    /// One file that did not check out.
    public struct Problem: Sendable, Equatable {
        /// The file's catalog path.
        public var path: String
        /// "missing", "size 12 instead of 34", or "SHA-256 … instead of …".
        public var detail: String
    }
    /// The model verified.
    public var modelId: String
    /// How many files were read and checked.
    public var filesChecked: Int
    /// Files with no hash to compare (neither catalog nor install-time): size-checked only.
    public var sizeOnly: Int
    /// The files that did not check out.
    public var problems: [Problem]
    /// Files fetched again by `--repair`.
    public var repaired: [String]
    /// Set when the files were read without the model's lock, and why (a store this user
    /// may read but not write, with no lock file yet): a download running at the same
    /// time could change the answer.
    public var readWithoutLock: String? = nil
    /// True when nothing was wrong, or everything wrong was repaired.
    public var ok: Bool { problems.count == repaired.count }
}

/// What `gc` removed.
public struct GCReport: Sendable, Equatable {
    /// Each leftover removed, with its bytes.
    public var removed: [(path: String, bytes: Int64)]
    /// Their bytes in all.
    public var freedBytes: Int64 { removed.reduce(0) { $0 + $1.bytes } }

    /// The same entries removed, in the same order.
    public static func == (a: GCReport, b: GCReport) -> Bool {
        a.removed.map(\.path) == b.removed.map(\.path) && a.removed.map(\.bytes) == b.removed.map(\.bytes)
    }
}

extension LocalModelEngine {
    /// Runs `body` holding model `id`'s lock: download, delete, verify --repair. Another
    /// process holding it is `busy` (exit 7).
    func withModelLock<T>(_ id: String, _ body: () throws(LocalModelError) -> T) throws(LocalModelError) -> T {
        let held: FileLock?
        do { held = try layout.tryModelLock(id) } catch { throw .system(error, modelId: id) }
        guard let lock = held else { throw .busy(modelId: id) }
        defer { lock.unlock() }
        return try body()
    }

    /// For reads that must not see a download change the files under them: a shared lock
    /// (taken read-only where this user may not write the lock file). On a store this user
    /// cannot write and whose lock file does not exist yet, the read goes ahead without
    /// it; `body` is told why, so the answer can say so.
    func withModelReadLock<T>(_ id: String, _ body: (_ withoutLockBecause: String?) throws(LocalModelError) -> T) throws(LocalModelError) -> T {
        let lock = FileLock(path: layout.lockPath(id: id))
        do {
            guard try lock.tryLock(exclusive: false) else { throw LocalModelError.busy(modelId: id) }
        } catch let error as LocalModelError {
            throw error
        } catch let error as SystemError where error.isPermissionDenied || error.isNotFound {
            return try body("the store is not writable by this user and \(lock.path) cannot be created (\(error.message))")
        } catch {
            throw .wrap(error, modelId: id)
        }
        defer { lock.unlock() }
        return try body(nil)
    }

    /// Removes a model's files, partial data and record. Refuses while any process holds
    /// the model's lock (a download in progress).
    ///
    /// A model with nothing on disk answers `existed: false` without writing anything: no
    /// lock file is made, and a store that was never written is not created to say so.
    public func delete(modelId id: String) throws(LocalModelError) -> DeleteResult {
        if !FileIO.exists(layout.recordsPath) {
            // No records: nothing is installed. Only a folder an app placed (a seeded voice)
            // or stray partial data can be there; without either, there is nothing to do.
            guard let model = catalog.model(id: id) else { throw .unknownModel(id) }
            guard modelDataExists(id, folder: layout.installPath(id: id, kind: model.kind)) else {
                return DeleteResult(modelId: id, existed: false, freedBytes: 0)
            }
        }
        let records: Records
        records = try open().records
        let record: InstallRecord?
        do { record = try records.install(id) } catch { throw .wrap(error, modelId: id) }
        // Known once the store is open: a model installed from a catalog now missing, too.
        let model = catalog.model(id: id)
        guard model != nil || record != nil else { throw .unknownModel(id) }
        let kind = model?.kind ?? record?.kind ?? .llm
        if record == nil && !modelDataExists(id, folder: layout.installPath(id: id, kind: kind)) {
            return DeleteResult(modelId: id, existed: false, freedBytes: 0)
        }
        return try withModelLock(id) { () throws(LocalModelError) -> DeleteResult in
            let finalPath = record.map(layout.folder(of:)) ?? layout.installPath(id: id, kind: kind)
            let existed = record != nil || modelDataExists(id, folder: finalPath)
            guard existed else { return DeleteResult(modelId: id, existed: false, freedBytes: 0) }
            var freed: Int64 = 0
            do {
                // The records say "not installed" before any file goes (P15): no moment shows
                // an installed model without its bytes, and the switch lets start-up repair
                // finish a delete a crash or a power cut interrupted. On a full disk the
                // records cannot grow until room exists: then the files go first (freeing the
                // room), and a crash in between leaves a record whose folder is gone, which
                // start-up repair removes.
                TestHooks.point("records-write")
                var intentRecorded = true
                do {
                    try records.write { ctx in
                        try ctx.deleteInstall(id)
                        try ctx.clearPartialFiles(id)
                        try ctx.release(id)
                        try ctx.beginSwitch(SwitchRecord(
                            modelId: id, action: .delete, tree: nil,
                            install: InstallRecord(modelId: id, kind: kind, state: .installed, catalogVersion: record?.catalogVersion ?? 0,
                                                   path: record?.path ?? StoreLayout.relativeInstallPath(id: id, kind: kind),
                                                   totalBytes: 0, createdAt: ctx.now, updatedAt: ctx.now),
                            files: []))
                    }
                } catch RecordsError.diskFull {
                    intentRecorded = false
                }
                TestHooks.point("delete-recorded")
                freed = try layout.removeModelData(id, folder: finalPath)
                try records.write { ctx in
                    if !intentRecorded {
                        try ctx.deleteInstall(id)
                        try ctx.clearPartialFiles(id)
                        try ctx.release(id)
                    }
                    try ctx.dropSwitch(id)
                    try ctx.append(.deleted, modelId: id, detail: "deleted \(finalPath), \(freed) bytes freed")
                }
            } catch {
                throw .wrap(error, modelId: id)
            }
            return DeleteResult(modelId: id, existed: existed, freedBytes: freed)
        }
    }

    /// Whether anything of model `id` is on disk: its install folder, partial data or staging tree.
    private func modelDataExists(_ id: String, folder: String) -> Bool {
        [folder, layout.partialPath(id: id), layout.partialArchivePath(id: id), layout.stagingPath(id: id)].contains(where: FileIO.exists)
    }

    /// Re-hashes an installed model's files against the catalog's hash, else the hash
    /// computed at install. With `repair`, fetches only the bad files again.
    public func verify(modelId id: String, repair: Bool = false, options: DownloadOptions = DownloadOptions(),
                       cancellation: CancellationFlag = CancellationFlag(),
                       onEvent: @escaping (DownloadEvent) -> Void = { _ in }) throws(LocalModelError) -> VerifyReport {
        let model = try knownModel(id)
        // A voice bundle placed in its folder is checked and adopted first; one that cannot
        // be (busy, mismatched) leaves the answer to the install records, as always.
        _ = try? adoptPlacedBundle(modelId: id)
        let records: Records
        records = try open().records
        if repair { try requireStoreCatalog() }
        // Reading takes a shared lock; repairing writes, so it takes the model's own.
        func locked(_ body: (String?) throws(LocalModelError) -> VerifyReport) throws(LocalModelError) -> VerifyReport {
            if repair { return try withModelLock(id) { () throws(LocalModelError) in try body(nil) } }
            return try withModelReadLock(id, body)
        }
        return try locked { withoutLock throws(LocalModelError) -> VerifyReport in
            let record: InstallRecord?
            let recorded: [FileRecord]
            do {
                record = try records.install(id)
                recorded = try records.files(id)
            } catch { throw .wrap(error, modelId: id) }
            guard let record, record.state == .installed else { throw .notInstalled(modelId: id) }
            let folder = layout.folder(of: record)
            let installTimeHash = Dictionary(recorded.map { ($0.path, $0.verifiedSha256) }, uniquingKeysWith: { a, _ in a })
            var problems: [VerifyReport.Problem] = []
            var sizeOnly = 0
            var checked = Set<String>()
            // A catalog update that changed this model: the installed version is checked
            // against what was recorded when it was installed, until the new one replaces it.
            let updatePending = !model.matches(recorded: recorded)
            let expectedFiles = updatePending
                ? recorded.map { CatalogFile(path: $0.path, size: $0.size, sha256: $0.verifiedSha256) }
                : model.files
            for file in expectedFiles {
                if cancellation.isCancelled { throw .cancelled(modelId: id, keptBytes: 0) }
                let path = folder + "/" + file.path
                guard let size = FileIO.regularFileSize(file.path, in: folder, checked: &checked) else {
                    let planted = (try? FileIO.status(path)).map { $0.kind != .regular } ?? false
                    problems.append(.init(path: file.path, detail: planted ? "not a regular file (a link or special file; never followed)" : "missing"))
                    continue
                }
                guard size == file.size else {
                    problems.append(.init(path: file.path, detail: "size \(size) instead of \(file.size)"))
                    continue
                }
                guard let expected = file.sha256 ?? installTimeHash[file.path] ?? nil else {
                    sizeOnly += 1
                    continue
                }
                do {
                    let actual = try SHA256Hasher.hashFile(atPath: path).sha256
                    if actual != expected {
                        problems.append(.init(path: file.path, detail: "SHA-256 \(actual) instead of \(expected)"))
                    }
                } catch {
                    problems.append(.init(path: file.path, detail: "unreadable: \(error)"))
                }
            }
            var repaired: [String] = []
            if repair && !problems.isEmpty && !updatePending {
                repaired = try refetch(model, files: problems.map(\.path), into: folder, records: records,
                                       options: options, cancellation: cancellation, onEvent: onEvent)
            }
            let detail = problems.isEmpty ? "all \(expectedFiles.count) files match" + (updatePending ? " (the installed version; an update is available)" : "")
                : "\(problems.count) bad file(s), first \(problems[0].path): \(problems[0].detail)" + (repaired.isEmpty ? "" : "; \(repaired.count) re-fetched")
            // The result is part of the store's history: a full disk fails the command (exit 3,
            // saying what to free) rather than dropping it without a word. A store this user
            // may only read keeps no history of its readers.
            TestHooks.point("records-write")
            do {
                try records.append(.verified, modelId: id, detail: detail)
            } catch RecordsError.readOnly {
            } catch {
                throw .wrap(error, modelId: id)
            }
            return VerifyReport(modelId: id, filesChecked: expectedFiles.count, sizeOnly: sizeOnly, problems: problems, repaired: repaired,
                                readWithoutLock: withoutLock)
        }
    }

    /// Fetches some files of an installed model again (files source), verifies them, and
    /// swaps each into place with one rename.
    private func refetch(_ model: CatalogModel, files paths: [String], into folder: String, records: Records,
                         options: DownloadOptions, cancellation: CancellationFlag,
                         onEvent: @escaping (DownloadEvent) -> Void) throws(LocalModelError) -> [String] {
        let repairRoot = layout.partialPath(id: model.id) + ".repair"
        let options = try options.authorizing(model)
        let wantedPaths = Set(paths)
        let wanted = model.files.filter { wantedPaths.contains($0.path) }
        // The first source that can fetch single files makes the requests (--mirror or
        // HF_ENDPOINT applied).
        guard let requests = model.deliveries.lazy.compactMap({ [layout] in
            $0.requests(for: wanted, into: repairRoot, boundary: layout.root, rewrite: options.fetchURL)
        }).first else {
            throw .noSource(modelId: model.id, kind: .files)
        }
        do { try layout.remove(repairRoot) } catch { throw .wrap(error, modelId: model.id) }
        onEvent(.phase(.download))
        let session = TransferSession(options: options, cancellation: cancellation,
                                      allowPlainHTTPRedirects: requests.contains { CatalogRules.isPlainHTTP($0.url) },
                                      onEvent: { onEvent(DownloadEvent($0)) })
        let result: TransferResult
        do { result = try session.run(requests) } catch { throw .wrap(error, modelId: model.id) }
        var hashes: [String: String] = [:]
        for (request, outcome) in zip(requests, result.outcomes) {
            switch outcome {
            case .completed(let sha, _, _):
                hashes[request.name] = sha
            case .failed(let failure):
                _ = try? layout.remove(repairRoot)
                throw LocalModelError(failure, modelId: model.id, request: request) { (0, request.size) }
            }
        }
        let fixed = requests.map(\.name)
        do {
            // Each verified file's bytes are durable before it replaces the bad one (P15): a
            // power cut never leaves an empty or short file under an installed model.
            try FileIO.syncFiles(fixed, in: repairRoot, below: layout.root)
            for name in fixed {
                let target = folder + "/" + name
                // A link in the way (a planted one, the reason the file failed) is
                // removed, never followed; the verified file takes its place.
                if let found = try FileIO.status(target), found.kind != .regular { try layout.remove(target) }
                try layout.createDirectory(FileIO.parent(of: target))
                try layout.rename(repairRoot + "/" + name, to: target)
            }
            // The renames, durable before the record says so.
            try FileIO.syncFolders(fixed.map { FileIO.parent(of: folder + "/" + $0) }, below: layout.root)
        } catch { throw .wrap(error, modelId: model.id) }
        _ = try? layout.remove(repairRoot)
        do {
            try records.write { ctx in
                for var file in try ctx.read.files(model.id) where hashes[file.path] != nil {
                    file.verifiedSha256 = hashes[file.path]
                    try ctx.upsertFile(model.id, file)
                }
                try ctx.append(.repaired, modelId: model.id, detail: "re-fetched \(fixed.count) file(s): \(fixed.prefix(5).joined(separator: ", "))")
            }
        } catch { throw .wrap(error, modelId: model.id) }
        return fixed
    }

    /// Removes data nothing refers to: partial data of models the catalog no longer has,
    /// partial data of models already installed, and staging leftovers — each under its
    /// model's lock, so a download in progress is never touched — and the temporary files
    /// of atomic writes whose process died, once they are an hour old.
    public func gc() throws(LocalModelError) -> GCReport {
        do {
            let records = try open().records
            var removed: [(String, Int64)] = []
            for name in try FileIO.listDirectory(layout.partialRoot) {
                let id = StoreLayout.modelId(fromLeftover: name)
                let path = layout.partialRoot + "/" + name
                guard let lock = try layout.tryModelLock(id) else { continue }
                defer { lock.unlock() }
                let known = catalog.model(id: id) != nil
                let record = try records.install(id)
                // Partial data of the installed version is a leftover; of a newer catalog version it is an update's resume data.
                let installed = record?.state == .installed && record?.catalogVersion == catalog.catalogVersion
                let isRepair = name.hasSuffix(".repair")
                if !known || installed || isRepair {
                    removed.append((path, try layout.remove(path)))
                }
            }
            for name in try FileIO.listDirectory(layout.stagingRoot) {
                let id = StoreLayout.modelId(fromLeftover: name)
                guard let lock = try layout.tryModelLock(id) else { continue }
                defer { lock.unlock() }
                let path = layout.stagingRoot + "/" + name
                removed.append((path, try layout.remove(path)))
            }
            // What an atomic write left when its process died (a kill while a new store's
            // records were built, say): an hour old, so no write in progress is touched.
            let temporaries = layout.abandonedTemporaries(now: SystemClock.wallSeconds())
            for path in temporaries {
                removed.append((path, try layout.remove(path)))
            }
            // The removals are durable before the history reports them (P15).
            if !removed.isEmpty {
                try FileIO.syncFolders([layout.partialRoot, layout.stagingRoot] + Set(temporaries.map(FileIO.parent(of:))).sorted(), below: layout.root)
            }
            try records.write { ctx in
                for model in catalog.models where !FileIO.exists(layout.partialPath(id: model.id)) && !FileIO.exists(layout.partialArchivePath(id: model.id)) {
                    try ctx.clearPartialFiles(model.id)
                }
                if !removed.isEmpty {
                    try ctx.append(.repaired, modelId: nil, detail: "gc removed \(removed.count) item(s), \(removed.reduce(0) { $0 + $1.1 }) bytes")
                }
            }
            return GCReport(removed: removed.map { (path: $0.0, bytes: $0.1) })
        } catch {
            throw .wrap(error)
        }
    }
}
