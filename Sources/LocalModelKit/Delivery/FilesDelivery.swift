/// A model fetched file by file from `baseURL` + each file's percent-encoded path: every
/// file resumes on its own, files an installed model already holds are linked instead of
/// downloaded, and each file can be fetched again alone (a repair).
struct FilesDelivery: SourceDelivery {
    let source: ModelSource
    let model: CatalogModel
    /// Ends with `/`.
    let baseURL: String

    var downloadBytes: Int64 { model.installedBytes }
    var buildRoom: Int64 { 0 }
    var vouchesForUnhashedFiles: Bool { false }
    /// The base URL's path: a mirror serving `DIR` at its root serves these URLs.
    var mirrorFolder: String? { ModelURL.path(of: baseURL) }
    /// `…/ORG/REPO/resolve/REV/`, whatever the host.
    var huggingFaceRepository: (repo: String, revision: String)? { HuggingFaceCache.repository(ofBaseURL: baseURL) }

    /// Bytes in the partial folder, and files another install holds with the same SHA-256
    /// (linked, not downloaded: see `DeliveryRun.adoptStoredCopies`).
    func bytesPresent(in layout: StoreLayout, partials: Set<String>?, held: () -> Set<String>) -> Int64 {
        let dir = layout.partialPath(id: model.id)
        let inPartial = partials?.contains(model.id) != false && FileIO.isDirectory(dir)
        let held = model.files.contains { $0.sha256 != nil } ? held() : []
        guard inPartial || !held.isEmpty else { return 0 }
        var checked = Set<String>()
        return model.files.reduce(0) { sum, file in
            let partial = inPartial ? min(FileIO.regularFileSize(file.path, in: dir, checked: &checked) ?? 0, file.size) : 0
            if partial < file.size, let sha = file.sha256, held.contains(FileRecord.heldKey(sha256: sha, size: file.size)) { return sum + file.size }
            return sum + partial
        }
    }

    func requests(for files: [CatalogFile], into root: String, boundary: String, rewrite: (String) -> String) -> [FileRequest]? {
        let base = rewrite(baseURL)
        return files.map { request(for: $0, base: base, root: root, boundary: boundary, saved: nil) }
    }

    private func request(for file: CatalogFile, base: String, root: String, boundary: String, saved: FileRecord?) -> FileRequest {
        FileRequest(name: file.path, url: base + ModelURL.percentEncode(file.path), partialPath: root + "/" + file.path,
                    boundary: boundary, size: file.size, sha256: file.sha256, etag: saved?.etag, lastModified: saved?.lastModified)
    }

    /// Links what the store already holds and what the Hugging Face cache holds, fetches the
    /// rest into the partial folder; the tree is the partial folder, every file's hash
    /// computed on the way.
    func fetch(in run: any DeliveryRun) throws(LocalModelError) -> FetchedTree {
        run.onEvent(.phase(.download))
        let saved = run.savedValidators
        let root = run.layout.partialPath(id: model.id)
        let fromStore = run.adoptStoredCopies()
        let fromCache = run.adoptHuggingFaceCopies()
        let base = run.rewrite(baseURL)
        let requests = model.files.map { request(for: $0, base: base, root: root, boundary: run.layout.root, saved: saved[$0.path]) }
        let result = try run.transfer(requests, plainHTTP: CatalogRules.isPlainHTTP(base))
        var tree = FetchedTree(path: root, hashes: [:], origin: source.recordText)
        for (request, outcome) in zip(requests, result.outcomes) {
            switch outcome {
            case let .completed(sha, etag, lastModified):
                tree.hashes[request.name] = sha
                tree.validators[request.name] = FileValidators(name: request.name, size: request.size, etag: etag, lastModified: lastModified)
            case .failed(let failure):
                throw run.failure(failure, request: request, result: result, downloadBytes: downloadBytes)
            }
        }
        if let fromCache {
            let used = run.usedLocalCopies(fromCache, fromStore: fromStore)
            tree.localCopies = used
            // Every file from there: the record says so, rather than naming a URL never used.
            if used.files.count == model.files.count { tree.origin = "\(used.place) (\(used.foundIn))" }
        }
        run.onEvent(.phase(.verify))
        return tree
    }
}
