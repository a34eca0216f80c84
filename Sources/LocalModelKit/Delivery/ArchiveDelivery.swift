/// A model fetched as one release archive: resumed as one file, verified as a whole by its
/// SHA-256, and unpacked while its bytes arrive (`ArchiveFeed`). The unpacked tree counts
/// only once the archive's hash matched; a stream that restarts under the extractor is
/// unpacked again from the verified file.
struct ArchiveDelivery: SourceDelivery {
    let source: ModelSource
    let model: CatalogModel
    let archive: ArchiveSource

    var downloadBytes: Int64 { archive.size }
    /// The archive is unpacked beside itself: the whole tree needs room while it exists.
    var buildRoom: Int64 { model.installedBytes }
    var vouchesForUnhashedFiles: Bool { true }

    func bytesPresent(in layout: StoreLayout, partials: Set<String>?, held: () -> Set<String>) -> Int64 {
        if partials?.contains(model.id + "@archive") == false { return 0 }
        return min(FileIO.regularFileSize(layout.partialArchivePath(id: model.id)) ?? 0, archive.size)
    }

    /// The name the archive's validators are saved under in the records.
    static let validatorKey = "@archive"

    func fetch(in run: any DeliveryRun) throws(LocalModelError) -> FetchedTree {
        let id = model.id
        run.onEvent(.phase(.download))
        let url = run.rewrite(archive.url)
        let saved = run.savedValidators[Self.validatorKey]
        let request = FileRequest(name: FileIO.lastComponent(of: archive.url), url: url, partialPath: run.layout.partialArchivePath(id: id),
                                  boundary: run.layout.root, size: archive.size, sha256: archive.sha256, etag: saved?.etag,
                                  lastModified: saved?.lastModified)
        let staging = run.layout.stagingPath(id: id)
        do {
            try run.layout.remove(staging)
            try run.layout.createDirectory(staging)
        } catch { throw run.io(error) }

        // A resume's kept bytes are on disk before the unpacking has read any: they widen the
        // lead, or the request would wait until the unpacking had read them all.
        let kept = min(FileIO.regularFileSize(request.partialPath) ?? 0, archive.size)
        let feed = ArchiveFeed(path: request.partialPath, lead: ArchiveFeed.defaultLead + kept)
        let unpacking = Unpacking()
        let (archive, files, flag) = (archive, model.files, run.cancellation)
        Threads.start(name: "gl-unpack") {
            unpacking.finish(Swift.Result { () throws(UnpackError) in
                try ArchiveExtractor.extract(feed: feed, format: archive.format, stripComponents: archive.stripComponents,
                                             into: staging, files: files, isCancelled: { flag.isCancelled })
            })
        }
        let result: TransferResult
        do {
            result = try run.transfer([request], plainHTTP: CatalogRules.isPlainHTTP(url), validatorKey: Self.validatorKey, readers: [0: feed])
        } catch {
            feed.abandon("the transfer could not run")
            _ = unpacking.wait()
            _ = try? run.layout.remove(staging)
            throw error
        }
        if case .failed(let failure) = result.outcomes[0] {
            feed.abandon("the download did not finish")
            _ = unpacking.wait()
            _ = try? run.layout.remove(staging)
            throw run.failure(failure, request: request, result: result, downloadBytes: downloadBytes)
        }
        // Every byte is on disk and matched the catalog's SHA-256.
        feed.finish(at: archive.size)
        run.onEvent(.phase(.verify))
        run.onEvent(.phase(.unpack))
        TestHooks.point("unpack")
        var unpacked = unpacking.wait()
        if case .failure(.abandoned) = unpacked {
            do {
                try run.layout.remove(staging)
                try run.layout.createDirectory(staging)
            } catch { throw run.io(error) }
            unpacked = Swift.Result { () throws(UnpackError) in
                try ArchiveExtractor.extract(archivePath: request.partialPath, format: archive.format,
                                             stripComponents: archive.stripComponents, into: staging, files: files,
                                             isCancelled: { flag.isCancelled })
            }
        }
        switch unpacked {
        case .success(let extracted):
            if !extracted.skipped.isEmpty { run.onEvent(.skippedExtras(entries: extracted.skipped)) }
            return FetchedTree(path: staging, hashes: extracted.hashes, skippedExtras: extracted.skipped, origin: source.recordText)
        case .failure(let error):
            _ = try? run.layout.remove(staging)
            switch error {
            case .cancelled: throw .cancelled(modelId: id, keptBytes: archive.size)
            case .noSpace(let path):
                throw .diskFull(modelId: id, file: path, neededMb: Int((model.installedBytes + (1 << 20) - 1) >> 20), keptBytes: archive.size)
            case .system(let error): throw .system(error, modelId: id)
            default:
                // The archive matched its catalog hash, so the catalog itself is wrong or hostile.
                throw .unsafeArchive(modelId: id, url: url, problem: error.description)
            }
        }
    }
}

/// The transfer drives the feed directly: each write moves it on, a restart gives it up.
extension ArchiveFeed: PartialFileReader {
    func written(upTo bytes: Int64) { advance(to: bytes) }
    func restarted(reason: String) { abandon(reason) }
}

/// The unpacking thread's answer, waited for by the download thread.
private final class Unpacking: @unchecked Sendable {
    // @unchecked: `result` is written once and read after, both under `lock`.
    private let lock = Threads.Lock()
    private var result: Result<ArchiveExtractor.Result, UnpackError>?

    func finish(_ value: Result<ArchiveExtractor.Result, UnpackError>) {
        lock.withLock {
            result = value
            lock.broadcast()
        }
    }

    func wait() -> Result<ArchiveExtractor.Result, UnpackError> {
        lock.withLock {
            while result == nil { lock.wait() }
            return result ?? .failure(.abandoned("no answer"))
        }
    }
}
