import Foundation

/// One problem found in a catalog, at a JSON path such as `models[3].files[0].sha256`.
public struct CatalogIssue: Sendable, Equatable, CustomStringConvertible {
    /// `$` is the document itself.
    public var path: String
    public var message: String
    public var description: String { "\(path): \(message)" }

    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
}

/// A catalog that cannot be used, with every problem found.
public struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file or URL the catalog came from.
    public var source: String
    public var issues: [CatalogIssue]

    public var description: String {
        let count = issues.count == 1 ? "1 problem" : "\(issues.count) problems"
        var text = "catalog \(source) is invalid (\(count)):"
        for issue in issues { text += "\n  \(issue)" }
        text += "\nFix the catalog (see Catalog/catalog.schema.json) or pass a valid one with --catalog."
        return text
    }
}

/// Decodes and validates catalogs. Every rule of the DESIGN is checked and every
/// violation reported, never only the first; no input makes it crash.
public struct CatalogLoader: Sendable {
    /// The largest catalog file read (P3: a catalog is read up to a fixed cap).
    public static let maxCatalogBytes = 16 << 20
    /// The largest file or archive size accepted: 1 TiB.
    public static let maxFileSize: Int64 = 1 << 40
    /// The most files one model may have.
    public static let maxFilesPerModel = 100_000
    /// The newest catalog schema this build understands.
    public static let supportedSchemaVersion = 1
    /// Model ids that would collide with the store's own entries.
    public static let reservedIds: Set<String> = ["voices", "records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm"]

    public init() {}

    /// Reads and validates a catalog file.
    /// - Throws: `CatalogError` naming the file and listing every problem.
    public func load(contentsOf path: String) throws(CatalogError) -> Catalog {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readFile(atPath: path, limit: Self.maxCatalogBytes)
        } catch {
            throw CatalogError(source: path, issues: [CatalogIssue(path: "$", message: "\(error.message)")])
        }
        return try decode(bytes, source: path)
    }

    /// Validates catalog bytes; `source` names them in errors.
    public func decode(_ bytes: [UInt8], source: String) throws(CatalogError) -> Catalog {
        if bytes.count > Self.maxCatalogBytes {
            throw CatalogError(source: source, issues: [CatalogIssue(path: "$", message: "larger than the \(Self.maxCatalogBytes >> 20) MiB limit for a catalog")])
        }
        let root: JSONValue
        do {
            root = try JSONParser().parse(bytes)
        } catch {
            throw CatalogError(source: source, issues: [CatalogIssue(path: "$", message: "not valid JSON: \(error)")])
        }
        var validator = Validator()
        let catalog = validator.catalog(root)
        if let catalog, validator.issues.isEmpty { return catalog }
        throw CatalogError(source: source, issues: validator.issues)
    }
}

// MARK: - Validation

private struct Validator {
    var issues: [CatalogIssue] = []

    mutating func report(_ path: String, _ message: String) {
        issues.append(CatalogIssue(path: path, message: message))
    }

    /// An object's members with lookup by key. Catalog objects have a handful of keys, so a
    /// linear scan beats hashing (this runs for every file entry at start-up).
    struct Fields {
        let members: [(key: String, value: JSONValue)]
        subscript(key: String) -> JSONValue? {
            for member in members where member.key == key { return member.value }
            return nil
        }
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
        for member in members where !required.contains(member.key) && !optional.contains(member.key) {
            report(join(path(), member.key), "unknown key (allowed: \(required.appending(optional).joined(separator: ", ")))")
        }
        return dict
    }

    func join(_ path: String, _ key: String) -> String {
        path == "$" ? key : "\(path).\(key)"
    }

    mutating func string(_ value: JSONValue?, at path: @autoclosure () -> String, maxLength: Int = 1024) -> String? {
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
        if Self.hasControlByte(s) {
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
        return s.trimmingCharacters(in: .whitespaces).isEmpty
    }

    static func hasControlByte(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { bytes in bytes.contains { $0 < 0x20 || $0 == 0x7F } }
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
        guard let s = string(value, at: path(), maxLength: 4096) else { return nil }
        guard CatalogRules.isSHA256(s) else {
            report(path(), "not 64 lowercase hex characters (a SHA-256)")
            return nil
        }
        return .some(s)
    }

    mutating func url(_ value: JSONValue?, at path: @autoclosure () -> String, directory: Bool) -> String? {
        guard let s = string(value, at: path(), maxLength: 4096) else { return nil }
        if let problem = CatalogRules.urlProblem(s) {
            report(path(), problem)
            return nil
        }
        if directory && !s.hasSuffix("/") {
            report(path(), "must end with '/' (file paths are appended to it)")
            return nil
        }
        return s
    }

    // MARK: The document

    mutating func catalog(_ root: JSONValue) -> Catalog? {
        guard let top = object(root, at: "$", required: ["schemaVersion", "catalogVersion", "generatedAt", "models"]) else { return nil }
        let schema = integer(top["schemaVersion"], at: "schemaVersion", in: 1...Int64(Int32.max))
        if let schema, schema > CatalogLoader.supportedSchemaVersion {
            report("schemaVersion", "\(schema) is newer than this glasses-local understands (\(CatalogLoader.supportedSchemaVersion)); update glasses-local")
        }
        let version = integer(top["catalogVersion"], at: "catalogVersion", in: 1...Int64(Int32.max))
        let generatedAt = string(top["generatedAt"], at: "generatedAt", maxLength: 64)
        if let generatedAt, !CatalogRules.isTimestamp(generatedAt) {
            report("generatedAt", "not an RFC 3339 UTC time like 2026-11-30T00:00:00Z")
        }
        var models: [CatalogModel] = []
        var firstIndexOfId: [String: Int] = [:]
        if let items = array(top["models"], at: "models", nonEmpty: false, maxCount: 10_000) {
            for (n, item) in items.enumerated() {
                let path = "models[\(n)]"
                // Duplicates are found from the id alone, so they are reported even when
                // the first model has other problems.
                var duplicate = false
                if case .string(let id)? = item["id"], CatalogRules.idProblem(id) == nil {
                    if firstIndexOfId[id] != nil {
                        duplicate = true
                    } else {
                        firstIndexOfId[id] = n
                    }
                }
                let model = model(item, at: path)
                if duplicate, case .string(let id)? = item["id"] {
                    report("\(path).id", "duplicate id \"\(id)\" (also models[\(firstIndexOfId[id] ?? 0)])")
                } else if let model {
                    models.append(model)
                }
            }
        }
        guard let schema, let version, let generatedAt else { return nil }
        return Catalog(schemaVersion: Int(schema), catalogVersion: Int(version), generatedAt: generatedAt, models: models)
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
        if let items = array(m["sources"], at: "\(path()).sources", nonEmpty: true, maxCount: 16) {
            for (n, item) in items.enumerated() {
                if let source = source(item, at: "\(path()).sources[\(n)]", files: files) { sources.append(source) }
            }
        }
        guard issues.count == before, let id, let kind, let displayName, let requiredMb, let autoEligible, let files else { return nil }
        return CatalogModel(id: id, kind: kind, displayName: displayName, requiredMb: Int(requiredMb),
                            autoEligible: autoEligible, revision: revision, files: files, sources: sources)
    }

    mutating func files(_ value: JSONValue?, at path: @autoclosure () -> String) -> [CatalogFile]? {
        guard let items = array(value, at: path(), nonEmpty: true, maxCount: CatalogLoader.maxFilesPerModel) else { return nil }
        let before = issues.count
        var files: [CatalogFile] = []
        files.reserveCapacity(items.count)
        // Index of each path by its case-folded form: catches exact duplicates and paths that
        // differ only in letter case with one hash per file.
        var folded: [String: (index: Int, path: String)] = [:]
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
            guard let s = object(value, at: path(), required: ["type", "baseURL"]) else { return nil }
            guard let base = url(s["baseURL"], at: "\(path()).baseURL", directory: true) else { return nil }
            return .files(baseURL: base)
        case "archive":
            guard let s = object(value, at: path(), required: ["type", "url", "format", "size", "sha256"], optional: ["stripComponents"]) else { return nil }
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
    fileprivate func appending(_ other: [String]) -> [String] { self + other }
}

/// The individual rules, shared by the loader and `catalog hash`.
public enum CatalogRules {
    public static func isSHA256(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { b in b.count == 64 && b.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) } }
    }

    /// Why `id` is not a safe model id (a folder name in the store), or nil.
    public static func idProblem(_ id: String) -> String? {
        let bytes = Array(id.utf8)
        guard let first = bytes.first else { return "must not be empty" }
        func lowerAlnum(_ b: UInt8) -> Bool { (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) }
        guard lowerAlnum(first) else {
            return "\"\(id)\" is not a safe folder name: it must start with a lowercase letter or digit"
        }
        guard bytes.allSatisfy({ lowerAlnum($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }) else {
            return "\"\(id)\" is not a safe folder name: use lowercase letters, digits, '.', '_' and '-' only"
        }
        if CatalogLoader.reservedIds.contains(id) { return "\"\(id)\" is reserved by the store layout" }
        return nil
    }

    /// Why `path` is not a safe relative file path, or nil.
    public static func pathProblem(_ path: String) -> String? {
        // One pass over the UTF-8 bytes (this runs for every file of every model at start-up).
        let bytes = path.utf8
        if bytes.isEmpty { return "must not be empty" }
        if bytes.first == UInt8(ascii: "/") { return "\"\(path)\" is an absolute path; paths are relative to the model folder" }
        var dots = 0
        var length = 0
        var problem: String?
        func endSegment() -> String? {
            if length == 0 { return "\"\(path)\" contains an empty segment ('//' or a trailing '/')" }
            if dots == length && length == 2 { return "\"\(path)\" contains '..' (it would escape the model folder)" }
            if dots == length && length == 1 { return "\"\(path)\" contains a '.' segment" }
            if length > 255 { return "a segment of \"\(path)\" is longer than 255 bytes" }
            return nil
        }
        for byte in bytes {
            if byte == UInt8(ascii: "\\") { return "\"\(path)\" contains a backslash; use '/' between folders" }
            if byte == UInt8(ascii: "/") {
                if let p = endSegment() { problem = problem ?? p }
                dots = 0
                length = 0
            } else {
                if byte == UInt8(ascii: ".") { dots += 1 }
                length += 1
            }
        }
        if let p = endSegment() { problem = problem ?? p }
        return problem
    }

    /// ASCII lowercase, with a fast path for the common all-lowercase ASCII path.
    static func foldedCase(_ s: String) -> String {
        var hasUpper = false
        for b in s.utf8 {
            if b >= 0x80 { return s.lowercased() }
            if b >= 0x41 && b <= 0x5A { hasUpper = true }
        }
        return hasUpper ? s.lowercased() : s
    }

    /// Why `url` may not be fetched, or nil: https only, plain http only to loopback.
    public static func urlProblem(_ url: String) -> String? {
        // Over the UTF-8 bytes: every delimiter here is ASCII, and this runs for every
        // source of every model at start-up.
        let b = Array(url.utf8)
        func hasSchemePrefix(_ scheme: StaticString) -> Bool {
            let n = scheme.utf8CodeUnitCount
            guard b.count >= n else { return false }
            return scheme.withUTF8Buffer { p in (0..<n).allSatisfy { i in b[i] | 0x20 == p[i] | 0x20 } }
        }
        let start: Int
        let secure: Bool
        if hasSchemePrefix("https://") {
            start = 8; secure = true
        } else if hasSchemePrefix("http://") {
            start = 7; secure = false
        } else {
            return "\"\(url.prefix(80))\" is not an https URL"
        }
        // In UTF-8 a scalar <= 0x20 or 0x7F is exactly such a byte.
        if b.contains(where: { $0 <= 0x20 || $0 == 0x7F }) {
            return "contains spaces or control characters; percent-encode them"
        }
        var end = start
        while end < b.count, b[end] != UInt8(ascii: "/"), b[end] != UInt8(ascii: "?"), b[end] != UInt8(ascii: "#") { end += 1 }
        let authority = b[start..<end]
        if authority.contains(UInt8(ascii: "@")) { return "must not carry credentials (user@host)" }
        guard let host = hostOf(authority), !host.isEmpty else { return "\"\(url.prefix(80))\" has no host" }
        if !secure && !isLoopback(host) {
            return "\"\(url.prefix(80))\" is plain http; only https is allowed (http only to 127.0.0.1/localhost)"
        }
        return nil
    }

    /// The lowercased host of an authority (`host[:port]` or `[v6]:port`), or nil.
    static func hostOf(_ authority: ArraySlice<UInt8>) -> String? {
        func lowered(_ bytes: ArraySlice<UInt8>) -> String {
            // Non-ASCII hosts (IDNs) are lowercased by Unicode's rules.
            if bytes.contains(where: { $0 >= 0x80 }) { return String(decoding: bytes, as: UTF8.self).lowercased() }
            return String(decoding: bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            // After the bracket only the end or ":port" may follow ("[::1].evil" is not loopback).
            let rest = authority[(close + 1)...]
            guard rest.isEmpty || (rest.first == UInt8(ascii: ":") && rest.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }) else {
                return lowered(authority)   // not a bracketed IP literal: never loopback
            }
            return lowered(authority[...close])
        }
        return lowered(authority.prefix { $0 != UInt8(ascii: ":") })
    }

    /// Loopback hosts: `localhost`, `127.0.0.0/8`, `[::1]`.
    public static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, optionally with fractional seconds.
    public static func isTimestamp(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard b.count >= 20, b.last == UInt8(ascii: "Z") else { return false }
        let digitsAt = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
        func digit(_ i: Int) -> Bool { b[i] >= 0x30 && b[i] <= 0x39 }
        guard digitsAt.allSatisfy(digit), b[4] == 0x2D, b[7] == 0x2D, b[10] == UInt8(ascii: "T"), b[13] == 0x3A, b[16] == 0x3A else { return false }
        if b.count > 20 {
            guard b[19] == UInt8(ascii: "."), b.count > 21, (20..<(b.count - 1)).allSatisfy(digit) else { return false }
        }
        func number(_ i: Int, _ n: Int) -> Int { (i..<(i + n)).reduce(0) { $0 * 10 + Int(b[$1] - 0x30) } }
        let year = number(0, 4), month = number(5, 2), day = number(8, 2)
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), (1...days[month - 1]).contains(day) else { return false }
        // Seconds up to 60 for a leap second.
        return number(11, 2) <= 23 && number(14, 2) <= 59 && number(17, 2) <= 60
    }
}

extension CatalogLoader {
    /// The catalog shipped with this build (`Catalog/catalog.json`, embedded at build time).
    /// The catalog built into this binary: values generated from Catalog/catalog.json after
    /// validation (Scripts/embed-catalog), so nothing is parsed at start-up.
    public func bundled() -> Catalog {
        BundledCatalog.catalog
    }
}
