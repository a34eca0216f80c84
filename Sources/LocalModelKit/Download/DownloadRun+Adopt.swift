/// No byte fetched twice: a file whose SHA-256 an installed model already holds (another
/// model, or the installed version of this one) is hard-linked into the partial data
/// instead of downloaded; copied where the filesystem cannot link. The transfer then finds
/// it complete and verifies it from disk like any resume base, and a shared (linked) file
/// is never written: `FileJob.restartFromZero` gives it a fresh name first.
extension DownloadRun {
    /// Adopts what the store already holds, and says so: an `.adopted` event and a history
    /// row. The transfer that follows finds the adopted files complete on disk and verifies
    /// them like any resume base, so it needs no list of them; the list returned only
    /// counts them apart from downloaded files in the end's report (`usedLocalCopies`).
    /// Best effort: a file that cannot be adopted is simply downloaded.
    /// - Returns: the files linked (or copied) from installs.
    @discardableResult
    func adoptStoredCopies() -> [String] {
        let hashed = model.files.filter { $0.sha256 != nil }
        guard !hashed.isEmpty else { return [] }
        // SHA-256 and size → an installed copy (its folder and path inside it), as the
        // download's one records read found them.
        let holders = recorder.prior.holders.mapValues { (folder: layout.folder(of: $0.install), path: $0.path) }
        guard !holders.isEmpty else { return [] }
        let partialRoot = layout.partialPath(id: id)
        var adopted: [String] = []
        var bytes: Int64 = 0
        for file in hashed {
            guard let sha = file.sha256, let holder = holders[FileRecord.heldKey(sha256: sha, size: file.size)] else { continue }
            let target = partialRoot + "/" + file.path
            // Partial data already there is this download's own resume base.
            guard !FileIO.exists(target) else { continue }
            // The copy must be a regular file of its size, reached without any link (P11).
            var checked = Set<String>()
            guard FileIO.regularFileSize(holder.path, in: holder.folder, checked: &checked) == file.size else { continue }
            do {
                // Both ends inside the store, neither reached through a link (P11); the
                // target's folders are made on the way.
                _ = try FileIO.linkOrCopy(holder.folder + "/" + holder.path, within: layout.root, to: target, below: layout.root)
            } catch {
                _ = try? layout.remove(target)
                continue
            }
            adopted.append(file.path)
            bytes += file.size
        }
        if !adopted.isEmpty {
            onEvent(.adopted(files: adopted, bytes: bytes))
            try? recorder.note(.started, "\(adopted.count) file(s), \(bytes) bytes, already in the store: linked, not downloaded (first: \(adopted[0]))")
        }
        return adopted
    }

    /// Links (or copies) the files the Hugging Face cache holds for this model (looked up
    /// once by `downloadBlocking`, `huggingFaceCopies`) into the partial data, so the transfer
    /// finds them complete and verifies them from disk like any resume base: nothing is
    /// fetched for a file that matches, and a damaged one is discarded (the store's name
    /// only: the cache's file is never written) and fetched. Off with
    /// `EXTENTOS_NO_HF_CACHE=1`. Best effort, like `adoptStoredCopies`.
    /// - Returns: what was linked, for `usedLocalCopies` once the transfer verified it.
    func adoptHuggingFaceCopies() -> CacheAdoption? {
        guard let copies = huggingFaceCopies, let foundIn = copies.foundIn else { return nil }
        let partialRoot = layout.partialPath(id: id)
        var adoption = CacheAdoption(files: [], copied: [], place: copies.place, foundIn: foundIn)
        var bytes: Int64 = 0
        var checked = Set<String>()
        for file in model.files {
            guard let source = copies.files[file.path] else { continue }
            // Complete partial data is this download's own (adopted already, or fetched);
            // it came from the cache when it is the cache's file (an interrupted run linked it).
            if FileIO.regularFileSize(file.path, in: partialRoot, checked: &checked) == file.size {
                guard let here = (try? FileIO.status(partialRoot + "/" + file.path)) ?? nil,
                      let there = (try? FileIO.status(source)) ?? nil, here.identity == there.identity else { continue }
            } else {
                do {
                    let outcome = try FileIO.linkOrCopy(source, within: FileIO.parent(of: source), to: partialRoot + "/" + file.path,
                                                        below: layout.root)
                    if outcome == .copied { adoption.copied.insert(file.path) }
                } catch {
                    continue
                }
            }
            adoption.files.append(file.path)
            bytes += file.size
        }
        guard !adoption.files.isEmpty else { return nil }
        onEvent(.foundLocally(files: adoption.files, bytes: bytes, total: model.files.count, place: copies.place.description))
        try? recorder.note(.started, "\(adoption.files.count) of \(model.files.count) file(s), \(bytes) bytes, found in \(foundIn): linked, to be verified, not downloaded")
        return adoption
    }

    /// What came from the cache, once the transfer verified it: a file the transfer
    /// restarted was refused (its bytes did not match) and downloaded instead.
    /// - Parameter fromStore: the files `adoptStoredCopies` linked (neither from the cache
    ///   nor downloaded, unless refused too).
    func usedLocalCopies(_ adoption: CacheAdoption, fromStore: [String]) -> LocalCopyUse {
        let restarted = restartedFiles
        let used = adoption.files.filter { !restarted.contains($0) }
        let sizes = Dictionary(model.files.map { ($0.path, $0.size) }, uniquingKeysWith: { a, _ in a })
        let linkedFromStore = fromStore.filter { !restarted.contains($0) }.count
        return LocalCopyUse(files: used, bytes: used.reduce(0) { $0 + (sizes[$1] ?? 0) },
                            copied: used.filter(adoption.copied.contains).count,
                            refused: adoption.files.filter(restarted.contains),
                            downloaded: max(0, model.files.count - used.count - linkedFromStore),
                            total: model.files.count, place: adoption.place.name, foundIn: adoption.foundIn)
    }
}

extension LocalModelEngine {
    /// What the Hugging Face cache holds of `model`, for a download to link before it
    /// fetches; nil when downloads do not look there (`EXTENTOS_NO_HF_CACHE=1`, no cache
    /// folder known) or the cache holds none of it.
    func huggingFaceCopies(of model: CatalogModel) -> LocalCopies? {
        guard localCopies.adoptOnDownload, let hub = localCopies.huggingFaceHub else { return nil }
        let copies = LocalCopies(model, in: .huggingFaceCache(hub: hub))
        return copies.files.isEmpty ? nil : copies
    }
}

extension CatalogModel {
    /// The source order for a download, given copies of the model's files found outside the
    /// store. A per-file source moves ahead of a preferred archive when, with those copies
    /// linked, it leaves fewer bytes to fetch than the archive does (partial data counted on
    /// both sides): a voice whose every file is in the Hugging Face cache installs with no
    /// network at all, and one the cache holds most of fetches only the rest, file by file.
    /// Otherwise the catalog's order stands (a few small files found do not outweigh an
    /// archive smaller than the rest). The archive stays the fallback either way.
    func preferringFiles(given copies: LocalCopies, layout: StoreLayout) -> CatalogModel {
        guard let preferred = preferredDelivery, preferred.source.kind != .files,
              let index = sources.firstIndex(where: { $0.kind == .files }) else { return self }
        let preferredLeft = preferred.downloadBytes - preferred.bytesPresent(in: layout, partials: nil, held: { [] })
        let partial = layout.partialPath(id: id)
        var checked = Set<String>()
        var filesLeft: Int64 = 0
        for file in files where copies.files[file.path] == nil {
            filesLeft += file.size - min(FileIO.regularFileSize(file.path, in: partial, checked: &checked) ?? 0, file.size)
        }
        guard filesLeft < preferredLeft else { return self }
        var copy = self
        copy.sources.insert(copy.sources.remove(at: index), at: 0)
        return copy
    }
}
