import FoundationEssentials

extension DownloadRun {
    // MARK: Install (P1)

    /// Verified tree at `source` → `.staging/<id>` → final folder, then one transaction.
    /// The one way anything becomes installed: a download's tree, and a bundle placed in the
    /// install folder by hand (`adoptPlaced`, whose `source` is the final folder itself).
    /// - Parameter origin: where the tree came from, for the record and the history (a
    ///   source's `recordText`, or the placed bundle's folder).
    func install(from source: String, hashes: [String: String], finalPath: String, origin: String) throws(LocalModelError) -> String {
        onEvent(.phase(.install))
        let staging = layout.stagingPath(id: id)
        let old = layout.stagingRoot + "/" + id + ".replaced"
        do {
            if source != staging {
                try layout.remove(staging)
                try layout.rename(source, to: staging)
            }
            // Every byte on disk before the rename (small files were not fsynced one by one).
            try FileIO.syncFilesystem(staging)
            // Only files the current catalog names are installed (P7): a partial folder may
            // hold leftovers of an older catalog version.
            let listed = Set(model.files.map(\.path))
            let walked = try FileIO.walkFiles(staging)
            for extra in walked.files where !listed.contains(extra) { try layout.remove(staging + "/" + extra) }
            for other in walked.others { try layout.remove(staging + "/" + other) }
            // Installed means every catalog file is a regular file of its size in the tree
            // (P1): whatever happened on the way, a hole is never recorded as installed.
            var checked = Set<String>()
            if let bad = model.files.first(where: { FileIO.regularFileSize($0.path, in: staging, checked: &checked) != $0.size }) {
                throw LocalModelError.incompleteInstall(modelId: id, file: bad.path, size: bad.size)
            }
            try FileIO.syncDirectory(layout.stagingRoot)
            TestHooks.point("install")
            let parent = FileIO.parent(of: finalPath)
            try layout.createDirectory(parent)
            // An older install stays usable until the new one is in place.
            if FileIO.exists(finalPath) {
                try layout.remove(old)
                try layout.rename(finalPath, to: old)
            }
            try layout.rename(staging, to: finalPath)
            try FileIO.syncDirectory(parent)
        } catch let error as LocalModelError {
            throw error
        } catch { throw io(error) }
        TestHooks.point("after-rename")

        let partialFiles = (try? records.read { try $0.partialFiles(id) }) ?? []
        let validators = Dictionary(partialFiles.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        do {
            try records.write { ctx in
                let existing = try ctx.read.install(id)
                try ctx.upsert(InstallRecord(modelId: id, kind: model.kind, state: .installed, catalogVersion: engine.catalog.catalogVersion,
                                             path: StoreLayout.relativeInstallPath(id: id, kind: model.kind), totalBytes: model.installedBytes, createdAt: existing?.createdAt ?? ctx.now,
                                             updatedAt: ctx.now, installedAt: ctx.now, lastError: nil, source: origin))
                try ctx.setFiles(id, model.files.map { f in
                    FileRecord(path: f.path, size: f.size, sha256: f.sha256, etag: validators[f.path]?.etag,
                               lastModified: validators[f.path]?.lastModified, bytesPresent: f.size, verifiedSha256: hashes[f.path])
                })
                try ctx.clearPartialFiles(id)
                try ctx.release(id)
                let extras = skippedExtras.isEmpty ? ""
                    : "; skipped \(skippedExtras.count) archive entr\(skippedExtras.count == 1 ? "y" : "ies") the catalog does not list: \(skippedExtras.prefix(5).joined(separator: ", "))"
                try ctx.append(.completed, modelId: id, detail: "installed \(model.installedBytes) bytes in \(finalPath) from \(origin)" + extras)
            }
        } catch { throw io(error) }
        TestHooks.point("after-commit")
        // Leftovers after the commit; a crash here is cleaned by the next open or gc.
        _ = try? layout.remove(old)
        _ = try? layout.remove(layout.partialArchivePath(id: id))
        _ = try? layout.remove(layout.partialPath(id: id))
        return finalPath
    }
}
