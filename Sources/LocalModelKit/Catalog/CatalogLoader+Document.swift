/// The catalog document's rules: the top level, each model, its files and its sources.
extension CatalogValidator {
    // MARK: The document

    mutating func catalog(_ root: JSONValue) -> Catalog? {
        guard let top = object(root, at: "$", required: ["schemaVersion", "catalogVersion", "generatedAt", "models"],
                              optional: ["expiresAt", "nextKey"]) else { return nil }
        let schema = integer(top["schemaVersion"], at: "schemaVersion", in: 1...Int64(Int32.max))
        if let schema, schema > CatalogLoader.supportedSchemaVersion {
            report("schemaVersion", "\(schema) is newer than this glasses-local understands (\(CatalogLoader.supportedSchemaVersion)); update glasses-local")
        }
        let version = integer(top["catalogVersion"], at: "catalogVersion", in: 1...Int64(Int32.max))
        let generatedAt = string(top["generatedAt"], at: "generatedAt", maxLength: 64)
        if let generatedAt, !CatalogRules.isTimestamp(generatedAt) {
            report("generatedAt", "not an RFC 3339 UTC time like 2026-11-30T00:00:00Z")
        }
        var expiresAt: String?
        if top["expiresAt"] != nil {
            expiresAt = string(top["expiresAt"], at: "expiresAt", maxLength: 64)
            if let expires = expiresAt {
                if let end = CatalogRules.epochSeconds(expires) {
                    if let generatedAt, let start = CatalogRules.epochSeconds(generatedAt), end <= start {
                        report("expiresAt", "\(expires) is not after generatedAt \(generatedAt)")
                    }
                } else {
                    report("expiresAt", "not an RFC 3339 UTC time like 2027-03-01T00:00:00Z")
                }
            }
        }
        var nextKey: CatalogKey?
        if let value = top["nextKey"], let key = object(value, at: "nextKey", required: ["name", "publicKey"]) {
            let name = string(key["name"], at: "nextKey.name", maxLength: 64)
            if let name, name.isEmpty || !name.utf8.allSatisfy({ CatalogRules.isKeyNameByte($0) }) {
                report("nextKey.name", "not a key name (letters, digits, '.', '_' and '-')")
            }
            let pem = string(key["publicKey"], at: "nextKey.publicKey", maxLength: 4096, allowingNewlines: true)
            if let pem, !Ed25519.isPublicKey(pem) {
                report("nextKey.publicKey", "not an Ed25519 public key in PEM (SubjectPublicKeyInfo)")
            }
            if let name, let pem { nextKey = CatalogKey(name: name, publicKey: pem) }
        }
        var models: [CatalogModel] = []
        var firstIndexOfId: [String: Int] = [:]
        if let items = array(top["models"], at: "models", nonEmpty: false, maxCount: 10_000) {
            // Duplicates are found from the id alone, so they are reported even when the
            // first model has other problems.
            var duplicate = [Bool](repeating: false, count: items.count)
            for (n, item) in items.enumerated() {
                if case .string(let id)? = item["id"], CatalogRules.idProblem(id) == nil {
                    if firstIndexOfId[id] != nil {
                        duplicate[n] = true
                    } else {
                        firstIndexOfId[id] = n
                    }
                }
            }
            // Each model's result goes to its slot and is moved from there into `models`:
            // no model is copied on the way (a copy is a reference count per field). A big
            // catalog's models were checked while the parser read on (`StreamedModelCheck`).
            let slots: [CheckedModels], size: Int
            var own: CheckedModels?
            if let streamed, let done = streamed.results(count: items.count) {
                (slots, size) = (done, StreamedModelCheck.chunkSize)
            } else {
                let checked = CheckedModels(count: items.count)
                Self.checkModels(items, into: checked)
                (slots, size) = ([checked], max(1, items.count))
                own = checked
            }
            defer { own?.free() }
            models = [CatalogModel](unsafeUninitializedCapacity: items.count) { buffer, initialized in
                initialized = 0
                for n in 0..<items.count {
                    let checked = slots[n / size], k = n % size
                    if !checked.issues[k].isEmpty { issues += checked.issues[k] }
                    if duplicate[n], case .string(let id)? = items[n]["id"] {
                        report("models[\(n)].id", "duplicate id \"\(id)\" (also models[\(firstIndexOfId[id] ?? 0)])")
                    } else if let model = checked.models.moveElement(from: k) {
                        buffer.initializeElement(at: initialized, to: model)
                        initialized += 1
                        checked.models.initializeElement(at: k, to: nil)
                    } else {
                        checked.models.initializeElement(at: k, to: nil)
                    }
                }
            }
        }
        guard let schema, let version, let generatedAt else { return nil }
        return Catalog(schemaVersion: Int(schema), catalogVersion: Int(version), generatedAt: generatedAt,
                       expiresAt: expiresAt, nextKey: nextKey, models: models)
    }

    /// Where `checkModels` puts each model's result: the model (or nil) and its issues, by
    /// the model's index.
    struct CheckedModels: @unchecked Sendable {
        // @unchecked: two threads write disjoint halves of the slots (`checkModels`), and the
        // slots are read only after the helper's half is done, under its lock.
        let models: UnsafeMutableBufferPointer<CatalogModel?>
        let issues: UnsafeMutableBufferPointer<[CatalogIssue]>

        init(count: Int) {
            models = .allocate(capacity: count)
            models.initialize(repeating: nil)
            issues = .allocate(capacity: count)
            issues.initialize(repeating: [])
        }

        func free() {
            models.deinitialize()
            models.deallocate()
            issues.deinitialize()
            issues.deallocate()
        }
    }

    /// Each model checked on its own (no model's check depends on another's), in order: the
    /// model, or nil, and its issues, into its slot of `results`. Many models are checked on
    /// two threads, each half in order: the results are the same, a 5,000-model catalog
    /// loads sooner.
    static func checkModels(_ items: [JSONValue], into results: CheckedModels) {
        @Sendable func check(_ range: Range<Int>) {
            for n in range {
                var validator = CatalogValidator()
                results.models[n] = validator.model(items[n], at: "models[\(n)]")
                results.issues[n] = validator.issues
            }
        }
        guard items.count >= 1000 else { return check(0..<items.count) }
        final class SecondHalf: @unchecked Sendable {
            // @unchecked: `done` is written once by the helper and read after, both under `lock`.
            let lock = Threads.Lock()
            var done = false
        }
        let half = items.count / 2
        let second = SecondHalf()
        let started = Threads.tryStart(name: "gl-catalog-check", stackSize: 512 << 10) {
            check(half..<items.count)
            second.lock.withLock {
                second.done = true
                second.lock.broadcast()
            }
        }
        guard started else { return check(0..<items.count) }
        check(0..<half)
        second.lock.lock()
        while !second.done { second.lock.wait() }
        second.lock.unlock()
    }

    mutating func model(_ value: JSONValue, at path: @autoclosure () -> String) -> CatalogModel? {
        guard let m = object(value, at: path(),
                             required: ["id", "kind", "displayName", "requiredMb", "autoEligible", "files", "sources"],
                             optional: ["revision"]) else { return nil }
        let before = issues.count
        var id = string(m["id"], at: "\(path()).id", maxLength: 64)
        if let candidate = id, let problem = CatalogRules.idProblem(candidate) {
            report("\(path()).id", problem)
            id = nil
        }
        var kind: ModelKind?
        if let k = string(m["kind"], at: "\(path()).kind", maxLength: 64) {
            kind = ModelKind(rawValue: k)
            if kind == nil {
                report("\(path()).kind", "unknown kind \"\(k)\" (known: \(ModelKind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
        }
        let displayName = string(m["displayName"], at: "\(path()).displayName", maxLength: 200)
        if let name = displayName, Self.isBlank(name) {
            report("\(path()).displayName", "must not be empty")
        }
        let requiredMb = integer(m["requiredMb"], at: "\(path()).requiredMb", in: 1...1_048_576, unit: " MB")
        let autoEligible = bool(m["autoEligible"], at: "\(path()).autoEligible")
        if autoEligible == true, let kind, kind != .llm {
            report("\(path()).autoEligible", "only llm models can be auto-eligible")
        }
        let revision = m["revision"].flatMap { string($0, at: "\(path()).revision", maxLength: 128) }
        if revision?.isEmpty == true { report("\(path()).revision", "must not be empty (leave the key out when there is no revision)") }
        let files = self.files(m["files"], at: "\(path()).files")
        var sources: [ModelSource] = []
        var sourceAuth: [ModelSource: SourceAuth] = [:]
        if let items = array(m["sources"], at: "\(path()).sources", nonEmpty: true, maxCount: 16) {
            for (n, item) in items.enumerated() {
                let auth = self.auth(item["auth"], at: "\(path()).sources[\(n)].auth")
                if let source = source(item, at: "\(path()).sources[\(n)]", files: files) {
                    sources.append(source)
                    if let auth { sourceAuth[source] = auth }
                }
            }
        }
        guard issues.count == before, let id, let kind, let displayName, let requiredMb, let autoEligible, let files else { return nil }
        return CatalogModel(id: id, kind: kind, displayName: displayName, requiredMb: Int(requiredMb),
                            autoEligible: autoEligible, revision: revision, files: files, sources: sources, sourceAuth: sourceAuth)
    }

    /// A source's optional `"auth"`: the credential it asks for (`SourceAuth`).
    mutating func auth(_ value: JSONValue?, at path: @autoclosure () -> String) -> SourceAuth? {
        guard let value, let name = string(value, at: path(), maxLength: 32) else { return nil }
        guard let auth = SourceAuth(rawValue: name) else {
            report(path(), "unknown credential \"\(name)\" (known: \(SourceAuth.allCases.map(\.rawValue).joined(separator: ", ")))")
            return nil
        }
        return auth
    }

    mutating func files(_ value: JSONValue?, at path: @autoclosure () -> String) -> [CatalogFile]? {
        guard let items = array(value, at: path(), nonEmpty: true, maxCount: CatalogLoader.maxFilesPerModel) else { return nil }
        let before = issues.count
        var files: [CatalogFile] = []
        files.reserveCapacity(items.count)
        // Index of each path by its case-folded form: catches exact duplicates and paths that
        // differ only in letter case with one hash per file.
        var folded: [String: (index: Int, path: String)] = [:]
        folded.reserveCapacity(items.count)
        var total: Int64 = 0
        let base = path()   // once per model; per-file paths are built only to report a problem
        for (n, item) in items.enumerated() {
            let at = { "\(base)[\(n)]" }
            guard let f = object(item, at: at(), required: ["path", "size", "sha256"]) else { continue }
            var filePath = string(f["path"], at: "\(at()).path", maxLength: 1024)
            if let p = filePath, let problem = CatalogRules.pathProblem(p) {
                report("\(at()).path", problem)
                filePath = nil
            }
            let size = integer(f["size"], at: "\(at()).size", in: 1...CatalogLoader.maxFileSize, unit: " bytes")
            let hash = sha256(f["sha256"], at: "\(at()).sha256", allowNull: true)
            if let p = filePath {
                let lower = CatalogRules.foldedCase(p)
                if let first = folded[lower] {
                    if first.path != p {
                        report("\(at()).path", "\"\(p)\" differs only in letter case from \(path())[\(first.index)] (breaks on case-insensitive filesystems)")
                    } else {
                        report("\(at()).path", "duplicate path \"\(p)\" (also \(path())[\(first.index)])")
                    }
                    continue
                }
                folded[lower] = (n, p)
            }
            if let p = filePath, let size, let hash {
                total += size
                files.append(CatalogFile(path: p, size: size, sha256: hash))
            }
        }
        // A file cannot also be a folder of another file ("a" and "a/b").
        // (Compared case-folded, as a case-insensitive filesystem would.)
        for file in files {
            let utf8 = file.path.utf8
            var end = utf8.endIndex
            while let slash = utf8[..<end].lastIndex(of: UInt8(ascii: "/")) {
                end = slash
                let prefix = String(file.path[..<slash])
                if let n = folded[CatalogRules.foldedCase(prefix)]?.index {
                    report("\(path())[\(n)].path", "\"\(prefix)\" is a file but \"\(file.path)\" needs it to be a folder")
                }
            }
        }
        if total > CatalogLoader.maxFileSize {
            report(path(), "the files add up to \(total) bytes, more than the 1 TiB limit")
        }
        return issues.count == before ? files : nil
    }

    mutating func source(_ value: JSONValue, at path: @autoclosure () -> String, files: [CatalogFile]?) -> ModelSource? {
        guard case .object = value else {
            report(path(), "expected an object, found \(value.typeName)")
            return nil
        }
        guard let type = string(value["type"], at: "\(path()).type", maxLength: 32) else {
            if value["type"] == nil { report("\(path()).type", "missing (\"files\" or \"archive\")") }
            return nil
        }
        switch type {
        case "files":
            guard let s = object(value, at: path(), required: ["type", "baseURL"], optional: ["auth"]) else { return nil }
            guard let base = url(s["baseURL"], at: "\(path()).baseURL", directory: true) else { return nil }
            return .files(baseURL: base)
        case "archive":
            guard let s = object(value, at: path(), required: ["type", "url", "format", "size", "sha256"], optional: ["stripComponents", "auth"]) else { return nil }
            let before = issues.count
            let url = self.url(s["url"], at: "\(path()).url", directory: false)
            var format: ArchiveFormat?
            if let f = string(s["format"], at: "\(path()).format", maxLength: 32) {
                format = ArchiveFormat(rawValue: f)
                if format == nil {
                    report("\(path()).format", "unknown format \"\(f)\" (known: \(ArchiveFormat.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
            }
            let size = integer(s["size"], at: "\(path()).size", in: 1...CatalogLoader.maxFileSize, unit: " bytes")
            let hash = sha256(s["sha256"], at: "\(path()).sha256", allowNull: false)
            let strip = s["stripComponents"].map { integer($0, at: "\(path()).stripComponents", in: 0...16) } ?? 0
            guard issues.count == before, let url, let format, let size, let hash = hash ?? nil, let strip else { return nil }
            return .archive(ArchiveSource(url: url, format: format, size: size, sha256: hash, stripComponents: Int(strip)))
        default:
            report("\(path()).type", "unknown source type \"\(type)\" (known: files, archive)")
            return nil
        }
    }
}

extension Array where Element == String {
    func appending(_ other: [String]) -> [String] { self + other }
}
