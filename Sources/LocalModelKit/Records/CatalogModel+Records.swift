extension CatalogModel {
    /// Whether the recorded files of an install are exactly this model's files: the same
    /// paths and sizes, and the same SHA-256 wherever the catalog gives one.
    package func matches(recorded: [FileRecord]) -> Bool {
        guard recorded.count == files.count else { return false }
        let byPath = Dictionary(recorded.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        return files.allSatisfy { f in
            guard let r = byPath[f.path], r.size == f.size else { return false }
            return f.sha256 == nil || r.verifiedSha256 == f.sha256
        }
    }
}
