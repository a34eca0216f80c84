import FoundationEssentials

/// What `import` did with one file of the model.
public struct ImportedFile: Sendable, Equatable {
    /// What happened to the file (its raw value is the `--json` `outcome`).
    public enum Outcome: String, Sendable {
        /// Hard-linked from the place into the store, and verified.
        case linked
        /// Copied (the filesystem could not link), and verified.
        case copied
        /// Already in the store's partial data, and verified.
        case present
        /// Not found in the place (or not a file of the catalog's size): a download fetches it.
        case missing
        /// Found, but its bytes are not the catalog's: refused (the place keeps its copy).
        case mismatch
    }
    /// The file's catalog path.
    public var path: String
    /// What happened to it.
    public var outcome: Outcome
    /// Why a file was refused or missed (its size or SHA-256, an unreadable file); for a file
    /// found in the Hugging Face cache other than under its path in the snapshot, how it
    /// was found (by its SHA-256 in `blobs/`, unchanged in another snapshot).
    public var detail: String?
}

/// What `import` did with a model.
public struct ImportReport: Sendable, Equatable {
    /// The model imported.
    public var modelId: String
    /// Where the files were looked for (`LocalCopyPlace.description`).
    public var place: String
    /// The folder they were looked up in: the folder; in the cache, the snapshot of the
    /// revision the model's source names, else the repository's folder when files were
    /// found in it by their SHA-256 (`ImportedFile.detail` says how); nil when the place
    /// has no copy of the model.
    public var folder: String?
    /// Every catalog file, with what happened to it.
    public var files: [ImportedFile]
    /// The model is installed now (or already was).
    public var installed: Bool
    /// It was installed before the import, with exactly these files: nothing was done.
    public var alreadyInstalled: Bool
    /// The installed folder, when the model is installed.
    public var path: String?

    /// The files still to be downloaded (missing or refused).
    public var outstanding: [ImportedFile] { files.filter { $0.outcome == .missing || $0.outcome == .mismatch } }
}

extension LocalModelEngine {
    /// Makes a model installed from copies of its files already on this machine: `place`
    /// is a folder holding them under their catalog paths, or the Hugging Face cache. Each
    /// file found is hard-linked into the store where the filesystem allows, else copied;
    /// the place is never modified. Every file is then checked in the store, by SHA-256
    /// where the catalog gives one and by size where it does not (as a bundle placed in
    /// its install folder is), and the model is installed when all of them are good.
    /// Otherwise the good ones stay as partial data, so a later `download` fetches only
    /// the files the report lists as missing or refused. No network is used.
    public func importModel(_ id: String, from place: LocalCopyPlace) throws(LocalModelError) -> ImportReport {
        guard let model = catalog.model(id: id) else { throw .unknownModel(id) }
        let records = try open().records
        try requireStoreCatalog()
        return try withModelLock(id) { () throws(LocalModelError) -> ImportReport in
            try DownloadRun(engine: self, model: model, records: records, options: DownloadOptions(),
                            cancellation: CancellationFlag(), onEvent: { _ in }).importCopies(from: place)
        }
    }
}

extension DownloadRun {
    func importCopies(from place: LocalCopyPlace) throws(LocalModelError) -> ImportReport {
        let finalPath = layout.installPath(id: id, kind: model.kind)
        try removePlantedLinks(finalPath: finalPath)
        let copies = LocalCopies(model, in: place)
        var report = ImportReport(modelId: id, place: place.description, folder: copies.folder, files: [], installed: false,
                                  alreadyInstalled: false, path: nil)
        if isInstalledAsIs(finalPath) {
            report.files = model.files.map { ImportedFile(path: $0.path, outcome: .present) }
            (report.installed, report.alreadyInstalled, report.path) = (true, true, finalPath)
            return report
        }
        let partialRoot = layout.partialPath(id: id)
        var outcomes: [String: ImportedFile] = [:]
        var toCheck: [CatalogFile] = []
        try requireRoomForCopies(copies)
        for file in model.files {
            let target = partialRoot + "/" + file.path
            guard let source = copies.files[file.path] else {
                // Complete partial data of an earlier run counts, once checked below.
                var checked = Set<String>()
                if FileIO.regularFileSize(file.path, in: partialRoot, checked: &checked) == file.size {
                    outcomes[file.path] = ImportedFile(path: file.path, outcome: .present)
                    toCheck.append(file)
                } else {
                    outcomes[file.path] = ImportedFile(path: file.path, outcome: .missing,
                                                       detail: copies.folder == nil ? "no copy of the model there" : "not there, or not of size \(file.size)")
                }
                continue
            }
            do {
                // The source side is the file the place's links lead to; the store side is
                // reached without following any link (P11).
                let outcome = try FileIO.linkOrCopy(source, within: FileIO.parent(of: source), to: target, below: layout.root)
                outcomes[file.path] = ImportedFile(path: file.path, outcome: outcome == .copied ? .copied : .linked,
                                                   detail: copies.detail(file.path))
                toCheck.append(file)
            } catch {
                if case .source(let problem) = error {
                    outcomes[file.path] = ImportedFile(path: file.path, outcome: .missing, detail: "unreadable: \(problem.message)")
                    continue
                }
                throw .system(error.systemError, modelId: id)
            }
        }
        // The bytes that will be installed are the ones checked: those now in the store.
        let checked = try checkLocalFiles(toCheck, in: partialRoot, stopAtFirstProblem: false)
        for (path, problem) in checked.problems {
            outcomes[path] = ImportedFile(path: path, outcome: .mismatch, detail: problem)
            // Only the store's name goes: a link's other name (the place's copy) is untouched.
            do { try layout.remove(partialRoot + "/" + path) } catch { throw io(error) }
        }
        report.files = model.files.compactMap { outcomes[$0.path] }
        let outstanding = report.outstanding
        guard outstanding.isEmpty else {
            let found = model.files.count - outstanding.count
            try recorder.note(.imported, "import from \(place.description): \(found) of \(model.files.count) file(s) verified and kept as partial data; \(outstanding.count) still to download (first: \(outstanding[0].path))")
            return report
        }
        let tree = FetchedTree(path: partialRoot, hashes: checked.hashes, origin: "import from \(copies.foundIn ?? place.description)")
        report.path = try install(tree, finalPath: finalPath)
        report.installed = true
        return report
    }

    /// Before anything is copied: the files that cannot be hard-linked (on another
    /// filesystem than the store, or another user's) take room of their own; refused with
    /// `insufficientStorage` (exit 3) when that room, with the margin, is not free (counting
    /// other downloads' reservations), rather than filling the disk mid-way.
    func requireRoomForCopies(_ copies: LocalCopies) throws(LocalModelError) {
        guard let store = try? FileIO.status(layout.root) else { return }
        var toCopy: Int64 = 0
        for file in model.files {
            guard let source = copies.files[file.path], let status = try? FileIO.statusFollowingLinks(source) else { continue }
            if status.identity.device != store.identity.device || !status.ownedByThisUser { toCopy += file.size }
        }
        guard toCopy > 0 else { return }
        let space: FilesystemSpace
        do { space = try engine.probe.space(at: layout.root) } catch { throw io(error) }
        let needed = toCopy + StorageMargin.bytes(forInstalledBytes: model.installedBytes)
        let available = space.availableBytes - recorder.prior.reservedByOthers
        if needed > available {
            throw .insufficientStorage(modelId: id, requiredMb: Int((needed + (1 << 20) - 1) >> 20), availableMb: Int(max(0, available) >> 20))
        }
    }

    /// Checks files outside any transfer against the catalog: SHA-256 where the catalog
    /// gives one, size always. The one check of files that were not downloaded: an import,
    /// and a bundle placed in its install folder (`adoptPlaced`).
    /// - Returns: each good file's SHA-256, and each bad file's problem.
    func checkLocalFiles(_ files: [CatalogFile], in root: String,
                         stopAtFirstProblem: Bool) throws(LocalModelError) -> (hashes: [String: String], problems: [String: String]) {
        var hashes: [String: String] = [:]
        var problems: [String: String] = [:]
        for file in files {
            if cancellation.isCancelled { throw .cancelled(modelId: id, keptBytes: 0) }
            do {
                let (actual, size) = try SHA256Hasher.hashFile(atPath: root + "/" + file.path)
                if size != file.size {
                    problems[file.path] = "size \(size) instead of \(file.size)"
                } else if let expected = file.sha256, actual != expected {
                    problems[file.path] = "SHA-256 \(actual) instead of \(expected)"
                } else {
                    hashes[file.path] = actual
                }
            } catch {
                problems[file.path] = "unreadable: \(LocalModelError.wrap(error, modelId: id).description)"
            }
            if stopAtFirstProblem && !problems.isEmpty { break }
        }
        return (hashes, problems)
    }
}
