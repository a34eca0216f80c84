import FoundationEssentials

/// What `add` is asked to do.
public struct HubAddRequest: Sendable, Equatable {
    /// The repository and the revision to pin.
    public var reference: HubReference
    /// The catalog id; nil for `UserCatalog.defaultId(for:)` (`hf-ORG-REPO`).
    public var id: String?
    /// The name `list` shows; nil for `ORG/REPO`.
    public var displayName: String?
    /// Which of the repository's files the entry takes.
    public var selection: HubFileSelection
    /// Whether `autoChoice` may pick it (false unless asked).
    public var autoEligible: Bool
    /// Replace an entry added before under the same id.
    public var force: Bool

    /// A request; only `reference` is needed, the rest has the defaults `add` documents.
    public init(reference: HubReference, id: String? = nil, displayName: String? = nil,
                selection: HubFileSelection = HubFileSelection(), autoEligible: Bool = false, force: Bool = false) {
        self.reference = reference
        self.id = id
        self.displayName = displayName
        self.selection = selection
        self.autoEligible = autoEligible
        self.force = force
    }
}

/// One file of the entry `add` wrote, and where its SHA-256 came from.
public struct AddedFile: Sendable, Equatable {
    /// Where a file's SHA-256 came from.
    public enum HashSource: String, Sendable {
        /// The Hub's `lfs.sha256` (or, read from the cache, the LFS blob's name).
        case lfs
        /// Fetched (or read from the cache) and hashed by `add`.
        case hashed
        /// None known: the file is checked by its size only (small files past the 16 MiB
        /// `add` hashes).
        case sizeOnly
    }
    /// Its path in the repository and in the install folder.
    public var path: String
    /// Its size in bytes, as the Hub lists it.
    public var size: Int64
    /// Its SHA-256, when one is known (`hashSource`).
    public var sha256: String?
    /// Where `sha256` came from.
    public var hashSource: HashSource
}

/// A file of the repository `add` left out, and why.
public struct SkippedFile: Sendable, Equatable {
    /// Its path in the repository.
    public var path: String
    /// Why it was left out (a never-taken kind, an `--exclude` glob, …).
    public var reason: String

    /// A skipped file and the reason.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// What `add` did.
public struct HubAddResult: Sendable, Equatable {
    /// The entry written to the store's catalog (`origin == .user`).
    public var model: CatalogModel
    /// The repository and the revision asked for.
    public var reference: HubReference
    /// The commit the revision was pinned to.
    public var commit: String
    /// The memory estimate behind the entry's `requiredMb`.
    public var estimate: MemoryEstimate
    /// The files the entry lists.
    public var files: [AddedFile]
    /// The repository's files left out, and why.
    public var skipped: [SkippedFile]
    /// The safetensors files whose headers were read.
    public var safetensors: [String]
    /// An entry of the same id was replaced (`force`).
    public var replaced: Bool
    /// `STORE/user-catalog.json`.
    public var userCatalogPath: String
    /// Where the repository was read: the Hub's URL, or the snapshot folder in the Hugging
    /// Face cache (offline).
    public var readFrom: String
    /// The repository was read from the Hugging Face cache, with no connection (offline).
    public var fromCache: Bool
}

/// What `removeUserModel` did.
public struct UserModelRemoval: Sendable, Equatable {
    /// The id of the entry removed from the store's catalog.
    public var modelId: String
    /// Its installed files, partial data and record (`delete`).
    public var deleted: DeleteResult
}

extension LocalModelEngine {
    /// Small files kept in Git are fetched and hashed up to this many bytes in all; past it
    /// they are checked by size only.
    package static let addHashBudget: Int64 = 16 << 20
    /// The Hub's own address, when `HF_ENDPOINT` names no mirror.
    package static let hubOrigin = "https://huggingface.co"

    /// Adds a Hugging Face Hub repository to the store's own catalog, knowing its memory
    /// need before a byte of its weights moves:
    /// 1. the revision is pinned to its commit by the Hub's model information (the token
    ///    rules of `"auth": "huggingface"`; 401/403 `authRequired`, 404
    ///    `hubRepositoryNotFound`);
    /// 2. the files are chosen (`HubFileSelection`); no safetensors file left is `noSafetensors`;
    /// 3. each file's SHA-256 is its LFS hash, or small files kept in Git are fetched and
    ///    hashed (`addHashBudget` in all; past it, size only);
    /// 4. every safetensors header is read with two range requests (`bytes=0-7`, then the N
    ///    header bytes) and config.json gives the KV cache: `MemoryEstimate`;
    /// 5. the entry (`hf-ORG-REPO` unless an id is given; kind `llm`; one `files` source at
    ///    `ENDPOINT/ORG/REPO/resolve/COMMIT/` with `"auth": "huggingface"`) is written
    ///    atomically to `STORE/user-catalog.json`, and joins `catalog` at once.
    /// With the network off (`options.policy.offlineBy`), the repository is read from a
    /// complete snapshot in the Hugging Face cache instead, without any connection.
    /// Nothing is written unless every step succeeded, and only that one file then.
    /// - Throws: `LocalModelError`: `invalidAddRequest`, `idTaken`, `hubRepositoryNotFound`,
    ///   `authRequired`, `noSafetensors`, `modelFileInvalid`, `hubAnswerInvalid`,
    ///   `hubOffline`, `temporary`, `cancelled`, …
    public func addHubModel(_ request: HubAddRequest, options: DownloadOptions = DownloadOptions(),
                            cancellation: CancellationFlag = CancellationFlag()) throws(LocalModelError) -> HubAddResult {
        let ref = request.reference
        // A store's catalog that cannot be read is never replaced: said before any request.
        if let problem = userCatalog.withLock({ $0.problem }) {
            throw .invalidCatalog(CatalogError(source: UserCatalog.path(in: layout),
                                               issues: [CatalogIssue(path: "$", message: problem + "; it was left as it is")]))
        }
        let id = request.id ?? UserCatalog.defaultId(for: ref)
        try checkNewId(id, given: request.id != nil, force: request.force)
        let displayName = request.displayName ?? ref.repository
        if displayName.utf8.count > 200 || CatalogValidator.hasControlByte(displayName) || CatalogValidator.isBlank(displayName) {
            throw .invalidAddRequest(what: "--name '\(displayName.prefix(80))'", problem: "a name has 1 to 200 characters, not all blank, and no control character")
        }
        let endpoint: String
        if let hub = options.policy.hubEndpoint {
            if let problem = hub.problem { throw .transfer(.hubEndpoint(value: hub.url, problem: problem), modelId: ref.repository) }
            endpoint = hub.url
        } else {
            endpoint = Self.hubOrigin
        }
        let reader: any HubRepositoryReader
        if let offline = options.policy.offlineBy {
            reader = try CachedSnapshotReader(reference: ref, hub: localCopies.huggingFaceHub, offlineBy: offline)
        } else {
            reader = try HubOriginReader(reference: ref, endpoint: endpoint, policy: options.policy, cancellation: cancellation)
        }
        let listing = try reader.listing()

        // The files taken.
        var taken: [HubFile] = []
        var skipped: [SkippedFile] = []
        for file in listing.files {
            let decision = request.selection.decide(file.path)
            guard decision.taken else {
                skipped.append(SkippedFile(path: file.path, reason: decision.reason ?? "left out"))
                continue
            }
            if file.size == 0 {
                skipped.append(SkippedFile(path: file.path, reason: "empty (a catalog file has at least one byte)"))
                continue
            }
            if let problem = CatalogRules.pathProblem(file.path) ?? (CatalogValidator.hasControlByte(file.path) ? "holds a control character" : nil) {
                throw .hubAnswerInvalid(repository: ref.repository, url: reader.place, problem: "the file name \(file.path.prefix(200)) cannot be a path in the store: \(problem)")
            }
            taken.append(file)
        }
        let safetensors = taken.filter { $0.path.hasSuffix(".safetensors") }
        guard !safetensors.isEmpty else {
            throw .noSafetensors(repository: ref.repository, revision: listing.commit, taken: taken.map(\.path),
                                 skipped: skipped.map { "\($0.path) (\($0.reason))" })
        }

        // The weights, from the headers alone.
        var weights: Int64 = 0
        for file in safetensors {
            if cancellation.isCancelled { throw .cancelled(modelId: ref.repository, keptBytes: 0) }
            let header = try readHeader(file, from: reader, repository: ref.repository)
            let (sum, overflow) = weights.addingReportingOverflow(header.dataBytes)
            guard !overflow else { throw .modelFileInvalid(repository: ref.repository, file: file.path, problem: "the weights add up beyond 64 bits") }
            weights = sum
        }

        // The hashes: LFS files have theirs; small files kept in Git are fetched and hashed.
        var hashes: [String: (sha256: String?, source: AddedFile.HashSource)] = [:]
        var fetched: [String: [UInt8]] = [:]
        var budget = Self.addHashBudget
        for file in taken {
            if let sha = file.lfsSHA256 { hashes[file.path] = (sha, .lfs) }
        }
        for file in taken.filter({ $0.lfsSHA256 == nil }).sorted(by: { ($0.size, $0.path) < ($1.size, $1.path) }) {
            guard file.size <= budget else {
                hashes[file.path] = (nil, .sizeOnly)
                continue
            }
            if cancellation.isCancelled { throw .cancelled(modelId: ref.repository, keptBytes: 0) }
            let bytes = try reader.bytes(of: file, range: nil)
            guard Int64(bytes.count) == file.size else {
                throw .hubAnswerInvalid(repository: ref.repository, url: reader.place, problem: "\(file.path): \(bytes.count) bytes, listed as \(file.size)")
            }
            budget -= file.size
            fetched[file.path] = bytes
            do {
                hashes[file.path] = (try SHA256Hasher.hash(bytes), .hashed)
            } catch {
                throw .system(SystemError(message: "SHA-256 of \(file.path): \(error)"), modelId: ref.repository)
            }
        }

        // The KV cache, from config.json (read even when it is not taken).
        var shape: KVCacheShape?
        var note: String?
        if let config = listing.files.first(where: { $0.path == "config.json" }) {
            let bytes: [UInt8]
            if let known = fetched["config.json"] {
                bytes = known
            } else if config.size <= Self.addHashBudget {
                bytes = try reader.bytes(of: config, range: nil)
            } else {
                bytes = []
                note = "config.json is larger than \(Self.addHashBudget >> 20) MiB and was not read"
            }
            if !bytes.isEmpty {
                do {
                    (shape, note) = try KVCacheShape.read(config: bytes)
                } catch {
                    throw .modelFileInvalid(repository: ref.repository, file: "config.json", problem: error.reason)
                }
            }
        } else {
            note = "the repository has no config.json"
        }
        let estimate: MemoryEstimate
        do {
            estimate = try MemoryEstimate(weightsBytes: weights, kvCache: shape, kvCacheNote: note.map { "no KV-cache allowance: \($0)" })
        } catch {
            throw .modelFileInvalid(repository: ref.repository, file: "config.json", problem: "the KV cache it describes is larger than any memory")
        }
        guard estimate.requiredMb <= 1_048_576 else {
            throw .modelFileInvalid(repository: ref.repository, file: safetensors[0].path,
                                    problem: "the estimate, \(estimate.requiredMb) MiB, is beyond the 1 TiB a catalog's requiredMb may say")
        }

        // The entry.
        let base = ref.resolveBase(endpoint: endpoint, commit: listing.commit)
        let source = ModelSource.files(baseURL: base)
        let files = taken.map { CatalogFile(path: $0.path, size: $0.size, sha256: hashes[$0.path]?.sha256 ?? nil) }
        let model = CatalogModel(id: id, kind: .llm, displayName: displayName, requiredMb: estimate.requiredMb,
                                 autoEligible: request.autoEligible, revision: listing.commit, files: files, sources: [source],
                                 sourceAuth: [source: .huggingface], origin: .user)
        if cancellation.isCancelled { throw .cancelled(modelId: ref.repository, keptBytes: 0) }
        let replaced = try writeUserEntry(model, force: request.force)
        return HubAddResult(
            model: model, reference: ref, commit: listing.commit, estimate: estimate,
            files: taken.map { AddedFile(path: $0.path, size: $0.size, sha256: hashes[$0.path]?.sha256 ?? nil,
                                         hashSource: hashes[$0.path]?.source ?? .sizeOnly) },
            skipped: skipped, safetensors: safetensors.map(\.path), replaced: replaced,
            userCatalogPath: UserCatalog.path(in: layout), readFrom: reader.place, fromCache: reader is CachedSnapshotReader)
    }

    /// A safetensors file's header, read with two ranges: `bytes=0-7` (the length N), then
    /// `bytes=8-(N+7)`.
    private func readHeader(_ file: HubFile, from reader: any HubRepositoryReader, repository: String) throws(LocalModelError) -> SafetensorsHeader {
        guard file.size >= 8 + 2 else {
            throw .modelFileInvalid(repository: repository, file: file.path, problem: "\(file.size) bytes are too few for a safetensors file")
        }
        do {
            let length = try SafetensorsHeader.headerLength(try reader.bytes(of: file, range: 0...7), fileSize: file.size)
            let header = try reader.bytes(of: file, range: 8...(7 + length))
            return try SafetensorsHeader.parse(header, fileSize: file.size)
        } catch let problem as ReadProblem {
            throw .modelFileInvalid(repository: repository, file: file.path, problem: problem.reason)
        } catch {
            throw .wrap(error, modelId: repository)
        }
    }

    /// Refuses an id that cannot be a folder of the store, that the catalog in use or the
    /// built-in one has, or that was added before (unless `force`).
    private func checkNewId(_ id: String, given: Bool, force: Bool) throws(LocalModelError) {
        let what = given ? "--id '\(id.prefix(80))'" : "the id '\(id.prefix(80))' made from the repository's name"
        if let problem = CatalogRules.idProblem(id) {
            throw .invalidAddRequest(what: what, problem: problem + (given ? "" : "; choose one with --id"))
        }
        if id.utf8.count > UserCatalog.maxIdLength {
            throw .invalidAddRequest(what: what, problem: "longer than \(UserCatalog.maxIdLength) characters; choose a shorter one with --id")
        }
        if givenCatalog(has: id) {
            throw .idTaken(id: id, by: "a model of the catalog in use (version \(catalog.catalogVersion)); an added model never replaces one")
        }
        if CatalogLoader().bundled().model(id: id) != nil {
            throw .idTaken(id: id, by: "a model of the built-in catalog; an added model never replaces one")
        }
        if !force, let existing = userCatalog.withLock({ $0.models.first { $0.id == id } }) {
            throw .idTaken(id: id, by: "a model you added (\(existing.displayName)\(existing.revision.map { " at \($0.prefix(12))" } ?? ""))")
        }
    }

    /// Whether the catalog in use (not the store's own) has `id`.
    func givenCatalog(has id: String) -> Bool {
        catalog.model(id: id).map { $0.origin != .user } ?? false
    }

    /// Writes `model` into `STORE/user-catalog.json` under its lock, replacing an entry of
    /// the same id only when `force`; returns whether one was replaced. The file is checked
    /// by the catalog's own loader before it is written, and written atomically (P13, P15).
    private func writeUserEntry(_ model: CatalogModel, force: Bool) throws(LocalModelError) -> Bool {
        try changeUserCatalog { models throws(LocalModelError) in
            if let index = models.firstIndex(where: { $0.id == model.id }) {
                guard force else {
                    throw .idTaken(id: model.id, by: "a model you added (\(models[index].displayName))")
                }
                models[index] = model
                return true
            }
            models.append(model)
            return false
        }
    }

    /// Reads the store's catalog under its lock, lets `change` edit its models, and writes it
    /// back (atomically, validated first). A file that fails validation is never replaced:
    /// what a person wrote there is theirs to fix.
    func changeUserCatalog<T>(_ change: (inout [CatalogModel]) throws(LocalModelError) -> T) throws(LocalModelError) -> T {
        let path = UserCatalog.path(in: layout)
        do {
            try FileIO.createDirectory(layout.root)
            try layout.createDirectory(layout.locksRoot)
        } catch {
            throw .system(error, modelId: nil)
        }
        let lock = FileLock(path: layout.locksRoot + "/@user-catalog.lock")
        do { try lock.lock() } catch { throw .system(error, modelId: nil) }
        defer { lock.unlock() }
        let current = UserCatalog.read(at: path)
        if let problem = current.problem {
            throw .invalidCatalog(CatalogError(source: path, issues: [CatalogIssue(path: "$", message: problem + "; it was left as it is")]))
        }
        var models = current.models
        let answer = try change(&models)
        let bytes = UserCatalog.document(models, generatedAt: CivilTime.iso8601(SystemClock.wallSeconds()) ?? "2026-01-01T00:00:00Z")
        do {
            _ = try CatalogLoader().decode(bytes, source: path)
        } catch {
            throw .invalidCatalog(error)
        }
        do {
            try FileIO.writeFileAtomically(bytes, toPath: path, below: layout.root)
        } catch {
            throw .system(error, modelId: nil)
        }
        userCatalog.withLock { $0 = (models.map { var m = $0; m.origin = .user; return m }, nil) }
        rebuildCatalog()
        return answer
    }

    /// Drops a model added with `addHubModel` (or `glasses-local add`): its installed
    /// files, partial data and record first (`delete`, refused with `busy` while a download
    /// of it runs), then its entry in `STORE/user-catalog.json`.
    /// - Throws: `notUserModel` for a model of the catalog in use or the built-in one,
    ///   `unknownModel` for an id neither has, `busy`, …
    public func removeUserModel(id: String) throws(LocalModelError) -> UserModelRemoval {
        guard userCatalog.withLock({ $0.models.contains { $0.id == id } }) else {
            if givenCatalog(has: id) || CatalogLoader().bundled().model(id: id) != nil { throw .notUserModel(id: id) }
            throw .unknownModel(id)
        }
        let deleted: DeleteResult
        if givenCatalog(has: id) {
            // The catalog's model of the same id is the one in use: its files are not the
            // added entry's to delete.
            deleted = DeleteResult(modelId: id, existed: false, freedBytes: 0)
        } else {
            deleted = try delete(modelId: id)
        }
        try changeUserCatalog { models throws(LocalModelError) in models.removeAll { $0.id == id } }
        return UserModelRemoval(modelId: id, deleted: deleted)
    }

    /// The models added to this store (`origin == .user`), as the store's catalog holds them.
    public var userModels: [CatalogModel] { userCatalog.withLock { $0.models } }
}

extension UserCatalog {
    /// The id `add` gives a repository when none is asked for: `hf-ORG-REPO`, lowercased,
    /// every character outside `[a-z0-9._-]` written as `-`.
    package static func defaultId(for reference: HubReference) -> String {
        var id = ""
        for scalar in ("hf-" + reference.organization + "-" + reference.name).unicodeScalars {
            let v = scalar.value
            switch v {
            case 0x41...0x5A: id.unicodeScalars.append(Unicode.Scalar(v + 0x20) ?? "-")
            case 0x61...0x7A, 0x30...0x39, 0x2E, 0x5F, 0x2D: id.unicodeScalars.append(scalar)
            default: id += "-"
            }
        }
        return id
    }
}
