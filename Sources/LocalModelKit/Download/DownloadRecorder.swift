import FoundationEssentials

/// The one writer of a download's state to the records. A download reads its model's
/// records once, when it starts (what earlier runs left: the install, its files, the
/// validators saved for `If-Range`; with the space others reserved and the files installs
/// hold), and from then on only writes, through this type, at its checkpoints:
/// the start (reservation, partial record), the transfer's ticks (validators, reservation),
/// the install's commit, or the failure. Nothing it wrote is read back.
final class DownloadRecorder {
    let records: Records
    let model: CatalogModel
    var id: String { model.id }
    /// What the records held when the download started.
    let prior: Prior
    /// What installing the model still needs on disk, given the bytes present.
    private let stillNeeded: (Int64) -> Int64
    private let catalogVersion: Int
    /// When the install record was first made (kept across updates of the model).
    private var createdAt: Double?
    /// When the reservation was last brought down to what is still missing.
    private var lastReservation = 0.0
    /// The bytes the records reserve now: a tick that would write the same writes nothing
    /// (the first tick comes right after `begin`, before the first request).
    private var reserved: Int64?
    /// Validators not yet written (see `checkpoint`).
    private var pending: [FileRecord] = []

    struct Prior {
        var install: InstallRecord?
        /// The files recorded for the install (empty when none).
        var files: [FileRecord]
        /// Validators an earlier run saved, by catalog path (`@archive` for an archive).
        var validators: [String: FileRecord]
        /// Space other downloads have reserved (for the space check).
        var reservedByOthers: Int64
        /// `sha256:size` of the files installed models hold (linked, never downloaded).
        var held: Set<String> { Set(holders.keys) }
        /// For each of those, the first installed copy: its install and its path inside it
        /// (what `adoptStoredCopies` links from, read here so a download reads once).
        var holders: [String: (install: InstallRecord, path: String)]
    }

    init(records: Records, model: CatalogModel, catalogVersion: Int,
         stillNeeded: @escaping (Int64) -> Int64) throws(LocalModelError) {
        self.records = records
        self.model = model
        self.catalogVersion = catalogVersion
        self.stillNeeded = stillNeeded
        let id = model.id
        do {
            prior = try records.read { ctx in
                let saved = try ctx.partialFiles(id)
                let allFiles = try ctx.allFiles()
                var holders: [String: (install: InstallRecord, path: String)] = [:]
                for install in try ctx.installs() where install.state == .installed {
                    for file in allFiles[install.modelId] ?? [] {
                        guard let sha = file.verifiedSha256 else { continue }
                        let key = FileRecord.heldKey(sha256: sha, size: file.size)
                        if holders[key] == nil { holders[key] = (install, file.path) }
                    }
                }
                return Prior(install: try ctx.install(id), files: try ctx.files(id),
                             validators: Dictionary(saved.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a }),
                             reservedByOthers: try ctx.reservedBytes(excluding: id), holders: holders)
            }
        } catch { throw .wrap(error, modelId: id) }
        createdAt = prior.install?.createdAt
    }

    // MARK: Checkpoints

    /// Before any byte moves: the space reserved (so other downloads' checks count it), a
    /// partial record unless an older version stays installed, and the history row.
    func begin(reserving bytes: Int64, present: Int64) throws(LocalModelError) {
        do {
            try records.write { ctx in
                try ctx.reserve(id, bytes: bytes, pid: ProcessEnvironment.processID)
                if createdAt == nil { createdAt = ctx.now }
                if prior.install?.state != .installed {
                    try ctx.upsert(InstallRecord(modelId: id, kind: model.kind, state: .partial, catalogVersion: catalogVersion,
                                                 path: nil, totalBytes: model.installedBytes, createdAt: createdAt ?? ctx.now,
                                                 updatedAt: ctx.now))
                }
                try ctx.append(present > 0 ? .resumed : .started, modelId: id,
                               detail: present > 0 ? "resuming with \(present) bytes on disk" : "downloading \(model.downloadBytes) bytes")
            }
        } catch { throw .wrap(error, modelId: id) }
        reserved = bytes
    }

    /// A history row for what the download did on the way (links removed, files adopted,
    /// a placed bundle refused).
    func note(_ kind: HistoryEvent.Kind, _ detail: String) throws(LocalModelError) {
        do { try records.append(kind, modelId: id, detail: detail) } catch { throw .wrap(error, modelId: id) }
    }

    /// A transfer's tick: validators for `If-Range`, and the reservation brought down to
    /// what is still missing (so other downloads' free-space checks neither double-count
    /// the bytes already written nor miss ours). Validators of files worth resuming are
    /// written before their first body byte; the rest, with the reservation, every 2 s and
    /// at the end (a commit each would cost hundreds of fsyncs on a voice bundle).
    /// - Parameter key: the name validators are saved under (nil: each file's own).
    func checkpoint(_ tick: TransferTick, key: String?) {
        pending += tick.validators.map {
            FileRecord(path: key ?? $0.name, size: $0.size, sha256: nil, etag: $0.etag, lastModified: $0.lastModified)
        }
        let now = monotonicSeconds()
        let reservationDue = now - lastReservation >= 2
        guard reservationDue || tick.reason != .scheduled else { return }
        guard reservationDue || !pending.isEmpty else { return }
        let batch = pending
        pending = []
        let reserve = reservationDue ? stillNeeded(tick.presentBytes) : nil
        if reservationDue { lastReservation = now }
        let changed = reserve.flatMap { $0 == reserved ? nil : $0 }
        guard changed != nil || !batch.isEmpty else { return }
        let written: Void? = try? records.write { ctx in
            if let changed { try ctx.reserve(id, bytes: changed, pid: ProcessEnvironment.processID) }
            for file in batch { try ctx.upsertPartialFile(id, file) }
        }
        if written != nil, let changed { reserved = changed }
    }

    /// The install record and file rows a verified tree becomes.
    private func rows(of tree: FetchedTree, relativePath: String, now: Double) -> (InstallRecord, [FileRecord]) {
        let record = InstallRecord(modelId: id, kind: model.kind, state: .installed, catalogVersion: catalogVersion,
                                   path: relativePath, totalBytes: model.installedBytes, createdAt: createdAt ?? now,
                                   updatedAt: now, installedAt: now, lastError: nil, source: tree.origin)
        let files = model.files.map { f in
            FileRecord(path: f.path, size: f.size, sha256: f.sha256, etag: tree.validators[f.path]?.etag,
                       lastModified: tree.validators[f.path]?.lastModified, bytesPresent: f.size, verifiedSha256: tree.hashes[f.path])
        }
        return (record, files)
    }

    /// Before the verified, durable tree is renamed into place: the switch, with the record
    /// it will commit and the tree's identity, so that a crash or a power cut anywhere in the
    /// renames is finished (the tree is in place) or undone by start-up repair (P15).
    func switching(_ tree: FetchedTree, relativePath: String, identity: FileIdentity?) throws(LocalModelError) {
        do {
            try records.write { ctx in
                let (record, files) = rows(of: tree, relativePath: relativePath, now: ctx.now)
                try ctx.beginSwitch(SwitchRecord(modelId: id, action: .install, tree: identity, install: record, files: files))
            }
        } catch { throw .wrap(error, modelId: id) }
    }

    /// The install's commit (P1): one transaction makes the model installed, with its files,
    /// their hashes and validators, ends the switch, and releases the reservation.
    /// - Parameter relativePath: the install folder, relative to the store.
    func installed(_ tree: FetchedTree, at finalPath: String, relativePath: String) throws(LocalModelError) {
        do {
            try records.write { ctx in
                let (record, files) = rows(of: tree, relativePath: relativePath, now: ctx.now)
                try ctx.upsert(record)
                try ctx.setFiles(id, files)
                try ctx.dropSwitch(id)
                try ctx.clearPartialFiles(id)
                try ctx.release(id)
                let extras = tree.skippedExtras
                let skipped = extras.isEmpty ? ""
                    : "; skipped \(extras.count) archive entr\(extras.count == 1 ? "y" : "ies") the catalog does not list: \(extras.prefix(5).joined(separator: ", "))"
                let local = tree.localCopies.map { "; " + $0.historyText } ?? ""
                try ctx.append(.completed, modelId: id, detail: "installed \(model.installedBytes) bytes in \(finalPath) from \(tree.origin)" + local + skipped)
            }
        } catch { throw .wrap(error, modelId: id) }
    }

    /// The download failed or was interrupted: the reservation released, the reason kept
    /// on the partial record, the history row (with the bytes kept, for an interruption).
    func failed(_ error: LocalModelError) {
        try? records.write { ctx in
            try ctx.release(id)
            if prior.install?.state != .installed {
                var record = InstallRecord(modelId: id, kind: model.kind, state: .partial, catalogVersion: catalogVersion, path: nil,
                                           totalBytes: model.installedBytes, createdAt: createdAt ?? ctx.now, updatedAt: ctx.now)
                record.lastError = error.description
                try ctx.upsert(record)
            }
            if case .cancelled(_, let kept) = error {
                try ctx.append(.failed, modelId: id, detail: "interrupted; \(kept) bytes kept")
            } else {
                try ctx.append(.failed, modelId: id, detail: error.description)
            }
        }
    }
}
