import FoundationEssentials

/// Decodes and validates catalogs. Every rule of Catalog/catalog.schema.json (and CatalogRules) is checked and every
/// violation reported, never only the first; no input makes it crash.
package struct CatalogLoader: Sendable {
    /// The largest catalog file read (P3: a catalog is read up to a fixed cap).
    package static let maxCatalogBytes = 16 << 20
    /// The largest file or archive size accepted: 1 TiB.
    package static let maxFileSize: Int64 = 1 << 40
    /// The most files one model may have.
    package static let maxFilesPerModel = 100_000
    /// The newest catalog schema this build understands.
    package static let supportedSchemaVersion = 1
    /// Model ids that would collide with the store's own entries.
    package static let reservedIds: Set<String> = ["voices", "records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm", "user-catalog.json" /* UserCatalog.fileName */]

    /// A loader; it holds no state.
    package init() {}

    /// Reads and validates a catalog file.
    /// - Throws: `CatalogError` naming the file and listing every problem.
    package func load(contentsOf path: String) throws(CatalogError) -> Catalog {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readNamedInput(path, limit: Self.maxCatalogBytes)
        } catch {
            throw CatalogError(source: path, issues: [CatalogIssue(path: "$", message: "\(error.message)")])
        }
        return try decode(bytes, source: path)
    }

    /// Validates catalog bytes; `source` names them in errors.
    package func decode(_ bytes: [UInt8], source: String) throws(CatalogError) -> Catalog {
        if bytes.count > Self.maxCatalogBytes {
            throw CatalogError(source: source, issues: [CatalogIssue(path: "$", message: "larger than the \(Self.maxCatalogBytes >> 20) MiB limit for a catalog")])
        }
        let root: JSONValue
        // A big catalog's models are checked on another core while the parser reads the rest
        // (the parse and the check each took a third of a 5,000-model catalog's load).
        let streamed = bytes.count >= 1 << 20 ? StreamedModelCheck() : nil
        do {
            root = try JSONParser().parse(bytes, elementsOf: streamed == nil ? nil : "models", to: streamed.map { check in { check.add($0) } })
        } catch {
            streamed?.abandon()
            throw CatalogError(source: source, issues: [CatalogIssue(path: "$", message: "not valid JSON: \(error)")])
        }
        streamed?.finish()
        var validator = CatalogValidator()
        validator.streamed = streamed
        let catalog = validator.catalog(root)
        // The document is done with. A big one is tens of thousands of small objects: they
        // are freed on another thread (a fifth of a 5,000-model catalog's load), not before
        // the catalog is handed back.
        if bytes.count >= 1 << 20 {
            // The helper takes the only reference out of a box and drops it: a closure that
            // captured the document would share it with this frame, whose copy is often
            // released last (the helper done first), and then the freeing ran here after all.
            // The models' elements the check kept are parts of it too: they go along, or the
            // last of them is released (and the models' trees freed) here, when the check ends.
            let box = DocumentBox(consume root, parts: streamed?.takeElements() ?? [])
            _ = Threads.tryStart(name: "gl-json-free", stackSize: 256 << 10) { box.drop() }
        }
        if let catalog, validator.issues.isEmpty { return catalog }
        throw CatalogError(source: source, issues: validator.issues)
    }
}

/// A parsed document handed to the thread that frees it.
private final class DocumentBox: @unchecked Sendable {
    // @unchecked: `document` is set in init and then touched by one thread only (the helper's
    // `drop`, or this box's deinit when no helper started).
    private var document: JSONValue?
    private var parts: [JSONValue]
    init(_ document: consuming JSONValue, parts: consuming [JSONValue]) {
        self.document = document
        self.parts = parts
    }
    func drop() {
        document = nil
        parts = []
    }
}

/// A big catalog's models checked while the parser is still reading the document: the parser
/// hands each element of `models` over as soon as it is read (`JSONParser.parse(_:elementsOf:to:)`),
/// a helper thread checks them in batches, and once the document is read this thread checks
/// what is left beside it. Each model's check depends on that model alone, and its result goes
/// to the model's own slot, so the catalog and its issues are the same, in the same order, as
/// when every model is checked after the parse.
final class StreamedModelCheck: @unchecked Sendable {
    // @unchecked: every `var` below is read and written under `lock`, but for `started` (the
    // parser's thread only). Slot n of `chunks` is written by the one thread that claimed n and
    // read by the validator only after `completed` counted it, under `lock`.
    private let lock = Threads.Lock()
    private var elements: [JSONValue] = []
    private var chunks: [CatalogValidator.CheckedModels] = []
    private var next = 0
    private var completed = 0
    private var parsed = false
    private var abandoned = false
    private var started = false
    /// Slots per chunk; chunks are added as elements arrive (the count is known only at the end).
    static let chunkSize = 64
    /// Models claimed at a time; divides `chunkSize`.
    private static let batch = 16
    /// The loader checks no model of a catalog with more (it reports the count): beyond one
    /// past it nothing is kept.
    private static let limit = 10_000

    deinit {
        for chunk in chunks { chunk.free() }
    }

    /// An element of `models`, from the parser, in order.
    func add(_ element: JSONValue) {
        lock.lock()
        if elements.count > Self.limit {
            lock.unlock()
            return
        }
        if elements.count % Self.chunkSize == 0 { chunks.append(CatalogValidator.CheckedModels(count: Self.chunkSize)) }
        elements.append(element)
        // The helper is woken for a whole batch, not for each model (a wake-up costs more
        // than checking a model).
        if elements.count - next == Self.batch { lock.broadcast() }
        lock.unlock()
        if !started {
            started = true
            // No thread: the models are checked in `finish` instead.
            _ = Threads.tryStart(name: "gl-catalog-check", stackSize: 512 << 10) { self.work(finishing: false) }
        }
    }

    /// The document is read: checks what is left beside the helper and waits for it.
    func finish() {
        lock.withLock {
            parsed = true
            lock.broadcast()
        }
        work(finishing: true)
    }

    /// The document is not JSON: nothing more is checked (the helper stops after its batch).
    func abandon() {
        lock.withLock {
            parsed = true
            abandoned = true
            lock.broadcast()
        }
    }

    /// The elements given to `add`, handed over and no longer kept here (the check is done).
    func takeElements() -> [JSONValue] {
        lock.withLock {
            let taken = elements
            elements = []
            return taken
        }
    }

    /// The slots, `chunkSize` a chunk, when every one of `count` models was checked here.
    func results(count: Int) -> [CatalogValidator.CheckedModels]? {
        lock.withLock { !abandoned && parsed && completed == count && elements.count == count ? chunks : nil }
    }

    /// Claims batches and checks them until none is left; the helper then ends, `finish`
    /// waits until the helper's last batch is done too.
    private func work(finishing: Bool) {
        lock.lock()
        while true {
            if abandoned { break }
            if next < elements.count && (parsed || elements.count - next >= Self.batch) {
                let start = next, end = min(elements.count, next + Self.batch)
                next = end
                // Copied out, not sliced: a slice would share the buffer, and the parser's next
                // append would then copy all of it. A batch lies within one chunk (batches
                // start at multiples of `batch`, which divides `chunkSize`).
                let items = Array(elements[start..<end]), chunk = chunks[start / Self.chunkSize]
                lock.unlock()
                for (n, item) in zip(start..<end, items) {
                    var validator = CatalogValidator()
                    let model = validator.model(item, at: "models[\(n)]")
                    chunk.models[n % Self.chunkSize] = model
                    chunk.issues[n % Self.chunkSize] = validator.issues
                }
                lock.lock()
                completed += end - start
                lock.broadcast()
                continue
            }
            if parsed && (!finishing || completed == elements.count) { break }
            lock.wait()
        }
        lock.unlock()
    }
}

// MARK: - Validation

/// The checks, each reporting every problem with its JSON path (the document-level rules
/// are in CatalogLoader+Document.swift).
struct CatalogValidator {
    var issues: [CatalogIssue] = []
    /// The models already checked while the document was parsed, if they were.
    var streamed: StreamedModelCheck?

    mutating func report(_ path: String, _ message: String) {
        issues.append(CatalogIssue(path: path, message: message))
    }

    /// An object's members with lookup by key. Catalog objects have a handful of keys, so a
    /// linear scan beats hashing (this runs for every file entry at start-up).
    struct Fields {
        let members: [(key: String, value: JSONValue)]
        subscript(key: String) -> JSONValue? {
            for member in members where CatalogValidator.sameKey(member.key, key) { return member.value }
            return nil
        }
    }

    /// `a == b` for object keys: most keys compared differ, and a length and a first byte
    /// tell that at once (a String comparison of two that differ takes its slow path).
    static func sameKey(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.utf8.first == b.utf8.first && a == b
    }

    /// Members of an object, reporting a type error, missing required keys and unknown keys.
    mutating func object(_ value: JSONValue, at path: @autoclosure () -> String, required: [String], optional: [String] = []) -> Fields? {
        guard case .object(let members) = value else {
            report(path(), "expected an object, found \(value.typeName)")
            return nil
        }
        let dict = Fields(members: members)
        for key in required where dict[key] == nil {
            let note: String
            if key == "sha256" {
                note = path().contains(".sources[") ? "missing (an archive needs its SHA-256)" : "missing (use null when the hash is unknown)"
            } else {
                note = "missing"
            }
            report(join(path(), key), note)
        }
        for member in members where !required.contains(where: { Self.sameKey($0, member.key) })
            && !optional.contains(where: { Self.sameKey($0, member.key) }) {
            report(join(path(), member.key), "unknown key (allowed: \(required.appending(optional).joined(separator: ", ")))")
        }
        return dict
    }

    func join(_ path: String, _ key: String) -> String {
        path == "$" ? key : "\(path).\(key)"
    }

    mutating func string(_ value: JSONValue?, at path: @autoclosure () -> String, maxLength: Int = 1024,
                         allowingNewlines: Bool = false) -> String? {
        guard let value else { return nil }
        guard case .string(let s) = value else {
            report(path(), "expected a string, found \(value.typeName)")
            return nil
        }
        if s.utf8.count > maxLength {
            report(path(), "longer than \(maxLength) bytes")
            return nil
        }
        // In UTF-8 every control character is a single byte below 0x20 (or 0x7F).
        if Self.hasControlByte(s, allowingNewlines: allowingNewlines) {
            report(path(), "contains a control character (NUL, newline, …)")
            return nil
        }
        return s
    }

    /// Empty or only spaces (Unicode's, as `CharacterSet.whitespaces`); a name starting with a
    /// visible ASCII character is answered without Foundation.
    static func isBlank(_ s: String) -> Bool {
        guard let first = s.utf8.first else { return true }
        if first > 0x20 && first < 0x80 { return false }
        return s.trimmingWhitespace().isEmpty
    }

    static func hasControlByte(_ s: String, allowingNewlines: Bool = false) -> Bool {
        func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            bytes.contains { ($0 < 0x20 && !(allowingNewlines && $0 == 0x0A)) || $0 == 0x7F }
        }
        // A native string's bytes are read in place (no copy to make them contiguous).
        if let found = s.utf8.withContiguousStorageIfAvailable(scan) { return found }
        var s = s
        return s.withUTF8(scan)
    }

    mutating func integer(_ value: JSONValue?, at path: @autoclosure () -> String, in range: ClosedRange<Int64>, unit: String = "") -> Int64? {
        guard let value else { return nil }
        switch value {
        case .int(let i):
            guard range.contains(i) else {
                if i < range.lowerBound {
                    report(path(), range.lowerBound == 1 ? "must be positive, found \(i)" : "must be at least \(range.lowerBound), found \(i)")
                } else {
                    report(path(), "\(i)\(unit) is larger than the limit of \(range.upperBound)\(unit)")
                }
                return nil
            }
            return i
        case .bigInteger(let text):
            report(path(), "number \(text.prefix(40)) is out of range (\(range.lowerBound)...\(range.upperBound))")
        case .double(let d):
            report(path(), "expected an integer, found \(d)")
        default:
            report(path(), "expected an integer, found \(value.typeName)")
        }
        return nil
    }

    mutating func bool(_ value: JSONValue?, at path: @autoclosure () -> String) -> Bool? {
        guard let value else { return nil }
        guard case .bool(let b) = value else {
            report(path(), "expected true or false, found \(value.typeName)")
            return nil
        }
        return b
    }

    mutating func array(_ value: JSONValue?, at path: @autoclosure () -> String, nonEmpty: Bool, maxCount: Int) -> [JSONValue]? {
        guard let value else { return nil }
        guard case .array(let items) = value else {
            report(path(), "expected an array, found \(value.typeName)")
            return nil
        }
        if nonEmpty && items.isEmpty {
            report(path(), "must not be empty")
            return nil
        }
        if items.count > maxCount {
            report(path(), "has \(items.count) entries, more than the limit of \(maxCount)")
            return nil
        }
        return items
    }

    /// A lowercase hex SHA-256; `allowNull` for file hashes that are not known.
    mutating func sha256(_ value: JSONValue?, at path: @autoclosure () -> String, allowNull: Bool) -> String?? {
        guard let value else { return nil }
        if case .null = value {
            if allowNull { return .some(nil) }
            report(path(), "must be a SHA-256 (64 lowercase hex characters), not null")
            return nil
        }
        // A valid hash (every file has one) is 64 hex digits: within the length limit, with
        // no control character; checked once, not three times.
        if case .string(let s) = value, CatalogRules.isSHA256(s) { return .some(s) }
        guard let s = string(value, at: path(), maxLength: 4096) else { return nil }
        guard CatalogRules.isSHA256(s) else {
            report(path(), "not 64 lowercase hex characters (a SHA-256)")
            return nil
        }
        return .some(s)
    }

    mutating func url(_ value: JSONValue?, at path: @autoclosure () -> String, directory: Bool) -> String? {
        guard let s = string(value, at: path(), maxLength: 4096) else { return nil }
        if let problem = CatalogRules.urlProblem(s) ?? CatalogRules.sourceURLPathProblem(s) {
            report(path(), problem)
            return nil
        }
        if directory && !s.hasSuffix("/") {
            report(path(), "must end with '/' (file paths are appended to it)")
            return nil
        }
        return s
    }
}

extension CatalogLoader {
    /// The catalog built into this binary: values generated from Catalog/catalog.json after
    /// validation (Scripts/embed-catalog), so nothing is parsed at start-up.
    package func bundled() -> Catalog {
        BundledCatalog.catalog
    }
}
