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
}
