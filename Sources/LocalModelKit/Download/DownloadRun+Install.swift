import FoundationEssentials

extension DownloadRun {
    // MARK: Install (P1)

    /// Trees of at most this many files are made durable file by file (`FileIO.syncFiles`),
    /// larger ones by one `syncfs`.
    static let filesSyncedOneByOne = 64

    /// Verified tree → `.staging/<id>` → final folder, then one transaction.
    /// The one way anything becomes installed: a source's fetched tree, and a bundle placed
    /// in the install folder by hand (`adoptPlaced`, whose tree is the final folder itself).
    /// What the record says comes from `tree`: nothing is read back from the records.
    func install(_ tree: FetchedTree, finalPath: String) throws(LocalModelError) -> String {
        let source = tree.path
        onEvent(.phase(.install))
        let staging = layout.stagingPath(id: id)
        let old = layout.stagingRoot + "/" + id + ".replaced"
        do {
            if source != staging {
                try layout.remove(staging)
                try layout.rename(source, to: staging)
            }
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
            // Every byte on disk before the rename: a few files (and their folders) are
            // fsynced one by one, a big file's bytes mostly written back as they arrived;
            // hundreds by one filesystem sync, one flush instead of hundreds.
            if model.files.count <= Self.filesSyncedOneByOne {
                try FileIO.syncFiles(model.files.map(\.path), in: staging, below: layout.root)
            } else {
                try FileIO.syncFilesystem(staging)
            }
            try layout.remove(old)
            try FileIO.syncDirectory(layout.stagingRoot)
            let parent = FileIO.parent(of: finalPath)
            try layout.createDirectory(parent)
            // The switch is recorded before anything moves (P15): from here a crash or a
            // power cut is finished by start-up repair when this tree is in place, and
            // undone (the older install restored) when it is not.
            let identity = try FileIO.status(staging)?.identity
            try recorder.switching(tree, relativePath: StoreLayout.relativeInstallPath(id: id, kind: model.kind), identity: identity)
            TestHooks.point("install")
            // An older install stays usable until the new one is in place.
            if FileIO.exists(finalPath) { try layout.rename(finalPath, to: old) }
            TestHooks.point("aside")
            try layout.rename(staging, to: finalPath)
            // Both folders the renames changed, durable before the records say installed.
            try FileIO.syncDirectory(parent)
            if parent != layout.stagingRoot { try FileIO.syncDirectory(layout.stagingRoot) }
        } catch let error as LocalModelError {
            throw error
        } catch { throw io(error) }
        TestHooks.point("after-rename")

        try recorder.installed(tree, at: finalPath, relativePath: StoreLayout.relativeInstallPath(id: id, kind: model.kind))
        TestHooks.point("after-commit")
        // Leftovers after the commit; a crash here is cleaned by the next open or gc.
        _ = try? layout.remove(old)
        _ = try? layout.remove(layout.partialArchivePath(id: id))
        _ = try? layout.remove(layout.partialPath(id: id))
        return finalPath
    }
}
