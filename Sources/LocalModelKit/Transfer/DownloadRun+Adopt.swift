/// No byte fetched twice: a file whose SHA-256 an installed model already holds (another
/// model, or the installed version of this one) is hard-linked into the partial data
/// instead of downloaded; copied where the filesystem cannot link. The transfer then finds
/// it complete and verifies it from disk like any resume base, and a shared (linked) file
/// is never written: `FileJob.restartFromZero` gives it a fresh name first.
extension DownloadRun {
    /// Adopts what the store already holds, and says so: an `.adopted` event and a history
    /// row. Nothing is returned: the transfer that follows finds the adopted files complete
    /// on disk and verifies them like any resume base, so it needs no list of them.
    /// Best effort: a file that cannot be adopted is simply downloaded.
    func adoptStoredCopies() {
        let hashed = model.files.filter { $0.sha256 != nil }
        guard !hashed.isEmpty,
              let (installs, allFiles) = try? records.read({ ctx in (try ctx.installs(), try ctx.allFiles()) }) else { return }
        // SHA-256 and size → an installed copy (its folder and path inside it).
        var holders: [String: (folder: String, path: String)] = [:]
        for install in installs where install.state == .installed {
            let folder = layout.folder(of: install)
            for file in allFiles[install.modelId] ?? [] {
                guard let sha = file.verifiedSha256 else { continue }
                let key = FileRecord.heldKey(sha256: sha, size: file.size)
                if holders[key] == nil { holders[key] = (folder, file.path) }
            }
        }
        guard !holders.isEmpty else { return }
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
    }

    /// Links (or copies) the files the Hugging Face cache holds for this model into the
    /// partial data, so the transfer finds them complete and verifies them from disk like
    /// any resume base: nothing is fetched for a file that matches, and a damaged one is
    /// discarded (the store's name only: the cache's blob is never written) and fetched.
    /// Off with `EXTENTOS_NO_HF_CACHE=1`. Best effort, like `adoptStoredCopies`.
    func adoptHuggingFaceCopies() {
        guard engine.localCopies.adoptOnDownload, let hub = engine.localCopies.huggingFaceHub else { return }
        let place = LocalCopyPlace.huggingFaceCache(hub: hub)
        let copies = LocalCopies(model, in: place)
        guard !copies.files.isEmpty else { return }
        let partialRoot = layout.partialPath(id: id)
        var found: [String] = []
        var bytes: Int64 = 0
        for file in model.files {
            guard let source = copies.files[file.path] else { continue }
            var checked = Set<String>()
            // Complete partial data is this download's own (adopted already, or fetched).
            if FileIO.regularFileSize(file.path, in: partialRoot, checked: &checked) == file.size { continue }
            do {
                _ = try FileIO.linkOrCopy(source, within: FileIO.parent(of: source), to: partialRoot + "/" + file.path, below: layout.root)
            } catch {
                continue
            }
            found.append(file.path)
            bytes += file.size
        }
        guard !found.isEmpty else { return }
        onEvent(.foundLocally(files: found, bytes: bytes, total: model.files.count, place: place.description))
        try? recorder.note(.started, "\(found.count) of \(model.files.count) file(s), \(bytes) bytes, found in \(copies.folder ?? place.description): linked, to be verified, not downloaded")
    }
}
