/// Where `add` reads a Hub repository at a revision: the Hub itself (its model-information
/// API, then single files and ranges over the network), or, with the network off, a
/// complete snapshot of it in the Hugging Face cache. Both answer the same three questions,
/// so the rest of `add` (the selection, the hashes, the estimate) is one code path.
protocol HubRepositoryReader {
    /// Where the repository is read, for messages: the Hub's URL or the snapshot folder.
    var place: String { get }
    /// The commit the revision resolves to and the files it holds.
    func listing() throws(LocalModelError) -> HubRepositoryFiles
    /// The bytes of `file`: all of them (at most `file.size`), or `range`.
    func bytes(of file: HubFile, range: ClosedRange<Int64>?) throws(LocalModelError) -> [UInt8]
}

/// The Hub, over the network: `GET ENDPOINT/api/models/ORG/REPO/revision/REV?blobs=true`,
/// then each file at `ENDPOINT/ORG/REPO/resolve/COMMIT/PATH` (the Hub redirects an LFS file
/// to its CDN; a range goes along on every hop). The Hugging Face token goes to the
/// endpoint's origin only, as for a catalog source marked `"auth": "huggingface"`.
final class HubOriginReader: HubRepositoryReader {
    let reference: HubReference
    let endpoint: String
    private let fetcher: MemoryFetcher
    /// The commit, once `listing` has read it.
    private var commit: String?

    var place: String { endpoint }

    init(reference: HubReference, endpoint: String, policy: TransferPolicy, cancellation: CancellationFlag) throws(LocalModelError) {
        self.reference = reference
        self.endpoint = endpoint
        var policy = policy
        policy.credentials.bearerOrigins = Set([URLOrigin.of(endpoint)].compactMap { $0 })
        do {
            fetcher = try MemoryFetcher(policy: policy, cancellation: cancellation,
                                        allowPlainHTTPRedirects: CatalogRules.isPlainHTTP(endpoint))
        } catch {
            throw .transfer(error, modelId: reference.repository)
        }
    }

    /// The model information is a few hundred bytes a file; 64 MiB covers the largest
    /// repository a catalog could hold (100,000 files).
    static let listingCap = 64 << 20

    func listing() throws(LocalModelError) -> HubRepositoryFiles {
        let url = reference.modelInfoURL(endpoint: endpoint)
        let request = MemoryRequest(name: "the model information", url: url, cap: Self.listingCap)
        let bytes: [UInt8]
        do {
            bytes = try fetcher.fetch(request)
        } catch {
            if case .httpStatus(404, let answered, _) = error.failure {
                throw .hubRepositoryNotFound(repository: reference.repository, revision: reference.revision, url: answered,
                                             hubCode: error.hubErrorCode)
            }
            throw failure(error, request)
        }
        do {
            let files = try HubRepositoryFiles.parse(bytes)
            commit = files.commit
            return files
        } catch {
            throw .hubAnswerInvalid(repository: reference.repository, url: url, problem: "the model information is \(error.reason)")
        }
    }

    func bytes(of file: HubFile, range: ClosedRange<Int64>?) throws(LocalModelError) -> [UInt8] {
        let base = reference.resolveBase(endpoint: endpoint, commit: commit ?? reference.revision)
        let cap = range.map { Int(clamping: $0.upperBound - $0.lowerBound + 1) } ?? Int(clamping: file.size)
        let request = MemoryRequest(name: file.path, url: base + ModelURL.percentEncode(file.path), cap: cap, range: range,
                                    fileSize: file.size)
        do {
            return try fetcher.fetch(request)
        } catch {
            throw failure(error, request)
        }
    }

    /// A fetch's failure as the engine reports it, for this repository.
    private func failure(_ error: MemoryFetchFailure, _ request: MemoryRequest) -> LocalModelError {
        let repo = reference.repository
        if error.badAnswer {
            let problem: String
            switch error.failure {
            case .refused(let reason, _): problem = "\(request.name): \(reason)"
            case .tooLong(let declared): problem = "\(request.name): more than the \(declared) bytes expected"
            case let .sizeMismatch(declared, served): problem = "\(request.name): \(served) bytes, the model information lists \(declared)"
            default: problem = "\(request.name): an answer that cannot be used"
            }
            return .hubAnswerInvalid(repository: repo, url: request.url, problem: problem)
        }
        switch error.failure {
        case let .httpStatus(status, url, requested):
            return .httpStatus(modelId: repo, file: request.name, url: url, status: status, redirectedFrom: url == requested ? nil : requested)
        case let .authRequired(status, url, sent):
            return .authRequired(modelId: repo, file: request.name, url: url, status: status, sent: sent)
        case let .retriesExhausted(cause, url):
            return .temporary(modelId: repo, file: request.name, url: url, cause: cause)
        case let .retryAfterTooLong(seconds, url):
            return .temporary(modelId: repo, file: request.name, url: url,
                              cause: "the server asks to retry after \(seconds == .max ? "an unbounded time" : "\(seconds) s"), longer than this run waits")
        case let .refused(reason, url):
            return .refused(modelId: repo, url: url, reason: reason)
        case .tooLong(let declared):
            return .hubAnswerInvalid(repository: repo, url: request.url, problem: "\(request.name): more than the \(declared) bytes expected")
        case let .sizeMismatch(declared, served):
            return .hubAnswerInvalid(repository: repo, url: request.url, problem: "\(request.name): \(served) bytes, the model information lists \(declared)")
        case .hashMismatch:
            return .hubAnswerInvalid(repository: repo, url: request.url, problem: "\(request.name): other bytes than listed")
        case .noSpace(let path):
            return .system(SystemError(message: "no space left writing \(path)"), modelId: repo)
        case .system(let error):
            return .system(error, modelId: repo)
        case .cancelled:
            return .cancelled(modelId: repo, keptBytes: 0)
        }
    }
}

/// A snapshot of the repository in the Hugging Face cache (`models--ORG--REPO/snapshots/
/// COMMIT/`, the commit named by the revision itself or by `refs/REV`), read without any
/// connection: every file of the snapshot, each a link into `blobs/` that must resolve to a
/// regular file (a link to a missing blob means an incomplete snapshot), sizes from the
/// files, an LFS file's SHA-256 from its blob's name (the Hub client names it so), and
/// every shard a `*.safetensors.index.json` names present.
final class CachedSnapshotReader: HubRepositoryReader {
    let reference: HubReference
    /// The snapshot folder.
    let folder: String
    private let files: HubRepositoryFiles
    /// Path in the repository → the file it resolves to.
    private let resolved: [String: String]

    var place: String { folder }

    /// - Throws: `hubOffline` saying what the cache lacks: the repository, the revision, a
    ///   file of the snapshot.
    init(reference: HubReference, hub: String?, offlineBy: String) throws(LocalModelError) {
        self.reference = reference
        func lacking(_ problem: String) -> LocalModelError {
            .hubOffline(repository: reference.repository, revision: reference.revision, by: offlineBy, cache: hub, problem: problem)
        }
        guard let hub else { throw lacking("is not known (no HOME; set HF_HUB_CACHE or HF_HOME)") }
        let repoFolder = HuggingFaceCache.repositoryFolder(hub: hub, repo: reference.repository)
        guard FileIO.isDirectory(repoFolder) else { throw lacking("has no copy of it (no \(repoFolder))") }
        var commit: String?
        if HubRepositoryFiles.isCommit(reference.revision), FileIO.isDirectory(repoFolder + "/snapshots/" + reference.revision) {
            commit = reference.revision
        } else if let bytes = try? FileIO.readFile(atPath: repoFolder + "/refs/" + reference.revision, limit: 256) {
            let named = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
            guard HubRepositoryFiles.isCommit(named) else {
                throw lacking("has refs/\(reference.revision), but it names no commit")
            }
            commit = named
        }
        guard let commit else {
            throw lacking("has no snapshot of that revision (neither snapshots/\(reference.revision) nor refs/\(reference.revision) in \(repoFolder))")
        }
        let snapshot = repoFolder + "/snapshots/" + commit
        guard FileIO.isDirectory(snapshot) else { throw lacking("names commit \(commit) in refs/\(reference.revision), but has no snapshots/\(commit)") }
        folder = snapshot
        let walked: (files: [String], others: [String])
        do { walked = try FileIO.walkFiles(snapshot) } catch { throw lacking("cannot be read: \(error.message)") }
        var list: [HubFile] = []
        var resolved: [String: String] = [:]
        for path in (walked.files + walked.others).sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            guard let target = FileIO.resolvingLinks(snapshot + "/" + path), let size = FileIO.regularFileSize(target) else {
                throw lacking("holds an incomplete snapshot: \(snapshot)/\(path) does not lead to a file (its blob is missing)")
            }
            let blob = FileIO.lastComponent(of: target)
            list.append(HubFile(path: path, size: size, lfsSHA256: HuggingFaceCache.isSHA256Name(blob) ? blob : nil))
            resolved[path] = target
        }
        guard !list.isEmpty else { throw lacking("has an empty snapshot \(snapshot)") }
        // A sharded checkpoint's index names every shard: each must be there.
        for file in list where file.path.hasSuffix(".safetensors.index.json") {
            guard let target = resolved[file.path], let bytes = try? FileIO.readFile(atPath: target, limit: 64 << 20),
                  let index = try? JSONParser().parse(bytes), case .object(let map)? = index["weight_map"] else { continue }
            let folderOfIndex = FileIO.parent(of: file.path)
            for (_, value) in map {
                guard case .string(let shard) = value else { continue }
                let path = folderOfIndex.isEmpty || folderOfIndex == "." ? shard : folderOfIndex + "/" + shard
                if resolved[path] == nil {
                    throw lacking("holds an incomplete snapshot: \(file.path) names \(shard), which \(snapshot) lacks")
                }
            }
        }
        self.files = HubRepositoryFiles(commit: commit, files: list)
        self.resolved = resolved
    }

    func listing() throws(LocalModelError) -> HubRepositoryFiles { files }

    func bytes(of file: HubFile, range: ClosedRange<Int64>?) throws(LocalModelError) -> [UInt8] {
        guard let target = resolved[file.path] else {
            throw .hubOffline(repository: reference.repository, revision: reference.revision, by: "", cache: folder,
                              problem: "has no \(file.path)")
        }
        do {
            let handle = try FileIO.openForReading(target)
            defer { handle.close() }
            let start = range?.lowerBound ?? 0
            let count = range.map { $0.upperBound - $0.lowerBound + 1 } ?? file.size
            guard start >= 0, count >= 0, start + count <= file.size, count <= Int64(Int32.max) else {
                throw SystemError(message: "\(target): bytes \(start)+\(count) lie beyond its \(file.size)")
            }
            var out = [UInt8](repeating: 0, count: Int(count))
            var done = 0
            while done < out.count {
                let n = try out.withUnsafeMutableBytes { buffer throws(SystemError) in
                    try handle.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: start + Int64(done))
                }
                if n == 0 { throw SystemError(message: "\(target) ended after \(done) of \(count) bytes") }
                done += n
            }
            return out
        } catch {
            throw .wrap(error, modelId: reference.repository)
        }
    }
}
