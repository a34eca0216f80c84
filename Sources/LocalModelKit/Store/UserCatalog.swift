/// The store's own catalog, `STORE/user-catalog.json`: the models a user added
/// (`glasses-local add`, `LocalModelEngine.addHubModel`), in the catalog's schema, unsigned,
/// written atomically. Its entries join the catalog in use beside the signed (or built-in)
/// one's, which they never change: an id that catalog has is refused at `add`, and should a
/// later signed catalog bring the same id, its model is the one used (and a warning says so).
/// A file that fails validation is named in a warning and ignored; the signed catalog keeps
/// working.
package enum UserCatalog {
    /// The file's name in the store folder.
    package static let fileName = "user-catalog.json"

    /// Where a store keeps it.
    package static func path(in layout: StoreLayout) -> String { layout.root + "/" + fileName }

    /// The models of the file at `path`, each marked `origin == .user`, and the problem that
    /// made it unusable (nil when it is absent or valid). Read as any named file is (P13:
    /// non-blocking, a regular file only, up to the catalog cap).
    static func read(at path: String) -> (models: [CatalogModel], problem: String?) {
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readFile(atPath: path, limit: CatalogLoader.maxCatalogBytes)
        } catch {
            if error.isNotFound { return ([], nil) }
            return ([], "\(path) cannot be read (\(error.message)); the models added to this store are not listed until it can")
        }
        do {
            var catalog = try CatalogLoader().decode(bytes, source: path)
            // Marked in place: the array taken out of the catalog is this frame's alone, where
            // a `map` copied every model and then freed the originals.
            var models = catalog.models
            catalog.models = []
            for n in models.indices { models[n].origin = .user }
            return (models, nil)
        } catch {
            let first = error.issues.first.map { "\($0.path): \($0.message)" } ?? "invalid"
            let more = error.issues.count > 1 ? " (and \(error.issues.count - 1) more problem\(error.issues.count == 2 ? "" : "s"))" : ""
            return ([], "\(path) is not a valid catalog (\(first)\(more)); the models added to this store are ignored until it is fixed or removed (the signed catalog keeps working; 'glasses-local catalog validate \(path)' lists every problem)")
        }
    }

    /// The file's text for `models`: a catalog document (`catalogVersion` 1; the version of
    /// a user catalog means nothing, it is never signed or compared).
    static func document(_ models: [CatalogModel], generatedAt: String) -> [UInt8] {
        let doc: JSONValue = .object([
            ("schemaVersion", 1), ("catalogVersion", 1), ("generatedAt", .string(generatedAt)),
            ("models", .array(models.map(json))),
        ])
        return Array((doc.serialized(pretty: true) + "\n").utf8)
    }

    /// A model as the catalog's JSON writes it.
    static func json(_ m: CatalogModel) -> JSONValue {
        var fields: [(key: String, value: JSONValue)] = [
            ("id", .string(m.id)), ("kind", .string(m.kind.rawValue)), ("displayName", .string(m.displayName)),
            ("requiredMb", JSONValue(m.requiredMb)), ("autoEligible", .bool(m.autoEligible)),
        ]
        if let revision = m.revision { fields.append(("revision", .string(revision))) }
        fields.append(("files", .array(m.files.map { ["path": .string($0.path), "size": .int($0.size), "sha256": JSONValue($0.sha256)] })))
        fields.append(("sources", .array(m.sources.map { source in
            let auth: [(key: String, value: JSONValue)] = m.sourceAuth[source].map { [("auth", .string($0.rawValue))] } ?? []
            switch source {
            case .files(let base): return .object([("type", "files"), ("baseURL", .string(base))] + auth)
            case .archive(let a):
                return .object([("type", "archive"), ("url", .string(a.url)), ("format", .string(a.format.rawValue)),
                                ("size", .int(a.size)), ("sha256", .string(a.sha256)), ("stripComponents", JSONValue(a.stripComponents))] + auth)
            }
        })))
        return .object(fields)
    }

    /// The longest id: what a catalog's loader accepts.
    package static let maxIdLength = 64
}

