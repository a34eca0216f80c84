/// One thing start-up repaired, said so a person understands it.
public struct RepairAction: Sendable, Equatable, CustomStringConvertible {
    /// The model repaired; nil for the store itself (a stray entry, a lock file).
    public var modelId: String?
    /// What was done ("moved an unrecorded folder to .partial").
    public var what: String
    /// `<id>: <what>`, or `<what>`.
    public var description: String { modelId.map { "\($0): \(what)" } ?? what }
}

/// Brings a store back to "every model is installed or absent" after a crash (P1).
///
/// Runs when a store opens. Each model is repaired only under its own lock, so a
/// download in progress in another process is never touched. Nothing already
/// downloaded is thrown away when it can serve as a resume base: an unrecorded tree
/// goes back to `.partial/<id>` where the next download re-hashes it instead of
/// fetching it again (P2: it is never trusted without that).
struct StoreRepair {
    let layout: StoreLayout
    let catalog: Catalog
    let records: Records
    /// An older catalog stands in for the store's own (damaged or removed): the repairs that
    /// judge leftovers by the catalog (staging trees, unrecorded folders) wait for the real one.
    var catalogIsStandIn = false

    func run() throws -> [RepairAction] {
        var actions: [RepairAction] = []
        // One snapshot for the lock-free first look. Every model that looks wrong is checked
        // again under its lock before anything is changed; a healthy store (the start-up
        // case) takes no lock at all.
        var (installs, allFiles, reservations, switches) = try records.read { ctx in
            (try ctx.installs(), try ctx.allFiles(), try ctx.reservations(), try ctx.switches())
        }
        // Switches a crash or a power cut interrupted (P15), first: each is finished or undone
        // by what is on disk, and the look below starts from the state that leaves.
        if !switches.isEmpty {
            for change in switches {
                guard let lock = try layout.tryModelLock(change.modelId, ifPermitted: true) else { continue }
                defer { lock.unlock() }
                // Re-read under the lock: the process that wrote it may have finished meanwhile.
                guard let current = try records.read({ try $0.switchRecord(change.modelId) }) else { continue }
                actions.append(try settle(current))
            }
            (installs, allFiles, reservations, switches) = try records.read { ctx in
                (try ctx.installs(), try ctx.allFiles(), try ctx.reservations(), try ctx.switches())
            }
        }
        let byId = Dictionary(installs.map { ($0.modelId, $0) }, uniquingKeysWith: { a, _ in a })

        // Reservations of downloads whose process is gone (its lock is free).
        // Taking the lock (not just probing it) closes the window in which a download
        // starting right now could lose its fresh reservation.
        for reservation in reservations {
            guard let lock = try layout.tryModelLock(reservation.modelId, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            let what = "released \(reservation.bytes) bytes of space reserved by process \(reservation.pid), which is gone"
            try records.write { ctx in
                try ctx.release(reservation.modelId)
                try ctx.append(.repaired, modelId: reservation.modelId, detail: what)
            }
            actions.append(RepairAction(modelId: reservation.modelId, what: what))
        }

        // An update that died between moving the old install aside and putting the new one
        // in place: the old install goes back (it was verified when it was installed).
        // `.staging` listed once rather than an lstat per installed model (nil: it could not be
        // listed, and each is looked at).
        let staged = try? Set(FileIO.listDirectory(layout.stagingRoot))
        for record in installs where record.state == .installed {
            if let staged, !staged.contains(record.modelId + ".replaced") { continue }
            let aside = layout.stagingRoot + "/" + record.modelId + ".replaced"
            let folder = layout.folder(of: record)
            guard FileIO.isDirectory(aside), !FileIO.exists(folder) else { continue }
            guard let lock = try layout.tryModelLock(record.modelId, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            try layout.rename(aside, to: folder)
            try durable(FileIO.parent(of: folder), layout.stagingRoot)
            try records.append(.repaired, modelId: record.modelId, detail: "interrupted update: previous install restored")
            actions.append(RepairAction(modelId: record.modelId, what: "an interrupted update was rolled back; the previous install is in place again"))
        }

        // The installed folders the look below opened as real folders: the link check at the
        // end need not look at them again.
        var realFolders = Set<String>()
        for record in installs where looksBroken(record, files: allFiles[record.modelId] ?? [], realFolders: &realFolders) {
            guard let lock = try layout.tryModelLock(record.modelId, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            // Re-read under the lock: another process may have finished meanwhile.
            guard let current = try records.install(record.modelId) else { continue }
            switch current.state {
            case .installed:
                let folder = layout.folder(of: current)
                if !FileIO.isDirectory(folder) {
                    try forget(current.modelId, because: "the record said installed but \(folder) is missing; record removed — download it again")
                    actions.append(RepairAction(modelId: current.modelId, what: "installed folder \(folder) was missing; record removed"))
                    continue
                }
                let files = try records.files(current.modelId)
                let sizes = FileIO.regularFileSizes(files.map(\.path), in: folder) ?? files.map { _ in nil }
                let broken = zip(files, sizes).filter { $0.size != $1 }.map(\.0)
                if !broken.isEmpty {
                    let kept = try salvage(folder, modelId: current.modelId)
                    try forget(current.modelId, because: "\(broken.count) file(s) missing or with the wrong size (first: \(broken[0].path))")
                    actions.append(RepairAction(modelId: current.modelId,
                        what: "\(broken.count) installed file(s) missing or resized (first: \(broken[0].path)); install record removed, "
                            + (kept ? "the rest kept in .partial to be re-verified by the next download" : "folder removed")))
                }
            case .partial:
                let hasData = FileIO.exists(layout.partialPath(id: current.modelId)) || FileIO.exists(layout.partialArchivePath(id: current.modelId))
                if !hasData {
                    try forget(current.modelId, because: "partial download record without partial data")
                    actions.append(RepairAction(modelId: current.modelId, what: "partial download record had no data left; record removed"))
                }
            }
        }

        // Links planted where partial data, staging trees or install folders belong are
        // removed, never followed or moved (P11).
        var linkCandidates: [(path: String, owner: String)] = []
        for root in [layout.partialRoot, layout.stagingRoot] {
            for name in try FileIO.listDirectory(root) {
                linkCandidates.append((root + "/" + name, StoreLayout.modelId(fromLeftover: name)))
            }
        }
        // Only a name that is there can be a link: the folders that hold install folders are
        // listed once, rather than an lstat for each of a big catalog's models at every open.
        let names = (llm: try? Set(FileIO.listDirectory(layout.root)), voice: try? Set(FileIO.listDirectory(layout.voicesRoot)))
        // By index, reading the two fields: a copy of each model would be a reference count per field.
        for n in catalog.models.indices {
            let id = catalog.models[n].id, kind = catalog.models[n].kind
            if let present = kind == .voice ? names.voice : names.llm, !present.contains(id) { continue }
            let path = layout.installPath(id: id, kind: kind)
            if realFolders.contains(path) { continue }
            linkCandidates.append((path, id))
        }
        for (path, owner) in linkCandidates {
            guard let found = try FileIO.status(path), found.kind != .directory, found.kind != .regular else { continue }
            guard let lock = try layout.tryModelLock(owner, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            try layout.remove(path)
            try durable(FileIO.parent(of: path))
            let attributed = catalog.model(id: owner) != nil || byId[owner] != nil ? owner : nil
            let what = "removed the symbolic link (or special file) \(path) planted in the store; links inside the store are never followed or moved"
            try records.append(.repaired, modelId: attributed, detail: what)
            actions.append(RepairAction(modelId: attributed, what: what))
        }

        // Staging trees: an install that died between verifying and committing.
        if catalogIsStandIn { return actions }
        for name in try FileIO.listDirectory(layout.stagingRoot) {
            let path = layout.stagingRoot + "/" + name
            let owner = StoreLayout.modelId(fromLeftover: name)
            // Every entry belongs to a model (`<id>`, `<id>.replaced`, `<id>.deleting`) and is
            // touched only under that model's lock: an update in progress keeps its rollback copy.
            guard let lock = try layout.tryModelLock(owner, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            let isTree = name == owner && (catalog.model(id: name) != nil || byId[name] != nil) && FileIO.isDirectory(path)
            if !isTree {
                if name.hasSuffix(".replaced"), let record = try records.install(owner), record.state == .installed,
                   !FileIO.exists(layout.folder(of: record)) {
                    continue  // restored above when its lock was free; leave it for the next open
                }
                let freed = try layout.remove(path)
                try durable(layout.stagingRoot)
                let what = "removed leftover staging entry \(name) (\(freed) bytes)"
                let attributed = catalog.model(id: owner) != nil || byId[owner] != nil ? owner : nil
                try records.append(.repaired, modelId: attributed, detail: what)
                actions.append(RepairAction(modelId: attributed, what: what))
                continue
            }
            let modelId = owner
            if try records.install(modelId)?.state == .installed {
                let freed = try layout.remove(path)
                try durable(layout.stagingRoot)
                let what = "removed a leftover staging copy (\(freed) bytes); the installed model is intact"
                try records.append(.repaired, modelId: modelId, detail: what)
                actions.append(RepairAction(modelId: modelId, what: what))
            } else if try salvage(path, modelId: modelId) {
                try records.append(.repaired, modelId: modelId, detail: "unfinished install moved back to .partial for re-verification")
                actions.append(RepairAction(modelId: modelId, what: "unfinished install moved back to .partial; the next download re-verifies it instead of fetching it again"))
            } else {
                let freed = try layout.remove(path)
                try durable(layout.stagingRoot)
                let what = "removed an unfinished install from staging (\(freed) bytes)"
                try records.append(.repaired, modelId: modelId, detail: what)
                actions.append(RepairAction(modelId: modelId, what: what))
            }
        }

        // Final folders with no installed record: a crash after the rename, before the commit.
        // A voice's folder is where an app may place its bundle by hand (the upstream SDK's
        // `modelDirectory`): left in place, for `adoptPlacedBundle` to check and adopt (a
        // crash leftover there is a verified tree, adopted the same way).
        for n in catalog.models.indices where !catalog.models[n].kind.acceptsPlacedBundle {
            // (Listed above: a folder made since is another process's, under its lock.)
            if let present = names.llm, !present.contains(catalog.models[n].id) { continue }
            let model = catalog.models[n]
            let folder = layout.installPath(id: model.id, kind: model.kind)
            guard byId[model.id]?.state != .installed, FileIO.isDirectory(folder) else { continue }
            guard let lock = try layout.tryModelLock(model.id, ifPermitted: true) else { continue }
            defer { lock.unlock() }
            if try records.install(model.id)?.state == .installed { continue }
            // Partial data already there (records lost, then a download started again): keep
            // whichever tree holds more of the model's bytes, never discard the larger one.
            let partial = layout.partialPath(id: model.id)
            if FileIO.isDirectory(partial), usefulBytes(of: model, in: folder) > usefulBytes(of: model, in: partial) {
                let freed = try layout.remove(partial)
                try durable(layout.partialRoot)
                try records.append(.repaired, modelId: model.id,
                                   detail: "removed partial data (\(freed) bytes) that held less of the model than the unrecorded folder \(folder)")
            }
            if try salvage(folder, modelId: model.id) {
                try records.append(.repaired, modelId: model.id, detail: "unrecorded folder moved to .partial for re-verification")
                actions.append(RepairAction(modelId: model.id, what: "folder \(folder) had no install record; moved to .partial, the next download re-verifies it"))
            } else {
                let freed = try layout.remove(folder)
                try durable(FileIO.parent(of: folder))
                try records.append(.repaired, modelId: model.id, detail: "unrecorded folder removed")
                actions.append(RepairAction(modelId: model.id, what: "folder \(folder) had no install record; removed (\(freed) bytes)"))
            }
        }
        return actions
    }

    /// The lock-free first look: an installed record whose folder or files are missing or
    /// resized, or a partial record without partial data. An installed folder opened as a
    /// real folder (not a link) goes into `realFolders`.
    private func looksBroken(_ record: InstallRecord, files: [FileRecord], realFolders: inout Set<String>) -> Bool {
        switch record.state {
        case .installed:
            let folder = layout.folder(of: record)
            guard let sizes = FileIO.regularFileSizes(files.map(\.path), in: folder) else { return true }
            realFolders.insert(folder)
            return zip(files, sizes).contains { $0.size != $1 }
        case .partial:
            return !FileIO.exists(layout.partialPath(id: record.modelId)) && !FileIO.exists(layout.partialArchivePath(id: record.modelId))
        }
    }

    /// How many of `model`'s bytes the tree at `folder` holds: each catalog file that is a
    /// regular file there counts up to its declared size (partial files count what they have).
    private func usefulBytes(of model: CatalogModel, in folder: String) -> Int64 {
        guard let sizes = FileIO.regularFileSizes(model.files.map(\.path), in: folder) else { return 0 }
        return zip(model.files, sizes).reduce(Int64(0)) { sum, pair in sum + min(pair.1 ?? 0, pair.0.size) }
    }

    /// Moves a tree to `.partial/<id>` when no partial data is there yet. Returns whether it
    /// did. Links and special files in the tree are removed first (and recorded): they are
    /// never carried into partial data, where a download would write through them (P11).
    private func salvage(_ path: String, modelId: String) throws -> Bool {
        let partial = layout.partialPath(id: modelId)
        guard !FileIO.exists(partial) else { return false }
        let links = try layout.removeLinks(in: path)
        if !links.isEmpty {
            try records.append(.repaired, modelId: modelId,
                               detail: "removed \(links.count) symbolic link(s) or special file(s) planted in \(path) (first: \(links[0])); links inside the store are never followed or moved")
        }
        try layout.rename(path, to: partial)
        try durable(FileIO.parent(of: path), layout.partialRoot)
        return true
    }

    /// fsyncs the folders a repair changed, before the records say it is done (P15): a second
    /// power cut never undoes a repair the history reports.
    private func durable(_ folders: String...) throws {
        try FileIO.syncFolders(folders, below: layout.root)
    }

    /// Finishes or undoes a switch an interruption left (P15), under the model's lock.
    /// - An install whose verified tree is in the model's folder (its device and inode) is
    ///   finished: the records commit what the switch recorded.
    /// - Otherwise it is undone: an older install moved aside goes back, and the verified
    ///   tree goes to `.partial`, where the next download re-verifies it instead of fetching it.
    /// - A delete is finished: its folder and data are removed.
    private func settle(_ change: SwitchRecord) throws -> RepairAction {
        let id = change.modelId
        let folder = layout.folder(of: change.install)
        let aside = layout.stagingRoot + "/" + id + ".replaced"
        switch change.action {
        case .delete:
            let freed = try layout.removeModelData(id, folder: folder)
            let what = "finished an interrupted delete (\(freed) bytes freed)"
            try records.write { ctx in
                try ctx.dropSwitch(id)
                try ctx.clearPartialFiles(id)
                try ctx.release(id)
                try ctx.append(.deleted, modelId: id, detail: what)
            }
            return RepairAction(modelId: id, what: what)
        case .install:
            let inPlace = try FileIO.status(folder).map { $0.kind == .directory && $0.identity == change.tree } ?? false
            if inPlace {
                // The rename is observed; make it durable before the records rely on it.
                try durable(FileIO.parent(of: folder), layout.stagingRoot)
                let what = "finished an interrupted install: the verified tree was already in place; recorded as installed"
                try records.write { ctx in
                    try ctx.commitSwitch(id)
                    try ctx.clearPartialFiles(id)
                    try ctx.release(id)
                    try ctx.append(.repaired, modelId: id, detail: what)
                }
                _ = try layout.remove(aside)
                try durable(layout.stagingRoot)
                return RepairAction(modelId: id, what: what)
            }
            var what = "rolled back an interrupted install"
            if !FileIO.exists(folder), FileIO.isDirectory(aside) {
                try layout.rename(aside, to: folder)
                what += "; the previous install is in place again"
            }
            let staging = layout.stagingPath(id: id)
            if try FileIO.status(staging).map({ $0.identity == change.tree }) == true, try salvage(staging, modelId: id) {
                what += "; its verified files are in .partial for the next download to re-verify"
            }
            try durable(FileIO.parent(of: folder), layout.stagingRoot)
            try records.write { ctx in
                try ctx.dropSwitch(id)
                try ctx.append(.repaired, modelId: id, detail: what)
            }
            return RepairAction(modelId: id, what: what)
        }
    }

    private func forget(_ modelId: String, because reason: String) throws {
        try records.write { ctx in
            try ctx.deleteInstall(modelId)
            try ctx.append(.repaired, modelId: modelId, detail: reason)
        }
    }
}
