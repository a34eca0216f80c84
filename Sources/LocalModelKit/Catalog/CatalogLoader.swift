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
        do {
            root = try JSONParser().parse(bytes)
        } catch {
            throw CatalogError(source: source, issues: [CatalogIssue(path: "$", message: "not valid JSON: \(error)")])
        }
        var validator = CatalogValidator()
        let catalog = validator.catalog(root)
        // The document is done with. A big one is tens of thousands of small objects: they
        // are freed on another thread (a fifth of a 5,000-model catalog's load), not before
        // the catalog is handed back.
        if bytes.count >= 1 << 20 {
            // The helper takes the only reference out of a box and drops it: a closure that
            // captured the document would share it with this frame, whose copy is often
            // released last (the helper done first), and then the freeing ran here after all.
            let box = DocumentBox(consume root)
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
    init(_ document: consuming JSONValue) { self.document = document }
    func drop() { document = nil }
}

// MARK: - Validation

/// The checks, each reporting every problem with its JSON path (the document-level rules
/// are in CatalogLoader+Document.swift).
struct CatalogValidator {
    var issues: [CatalogIssue] = []

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
