/// One problem found in a catalog, at a JSON path such as `models[3].files[0].sha256`.
public struct CatalogIssue: Sendable, Equatable, CustomStringConvertible {
    /// `$` is the document itself.
    public var path: String
    /// What is wrong there ("not 64 lowercase hex characters (a SHA-256)").
    public var message: String
    /// `path: message`.
    public var description: String { "\(path): \(message)" }

    /// An issue at `path`.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }
}

/// A catalog that cannot be used, with every problem found.
package struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file or URL the catalog came from.
    package var source: String
    /// Every problem found, in document order.
    package var issues: [CatalogIssue]

    /// The source, every issue on a line of its own, and what to do.
    package var description: String {
        let count = issues.count == 1 ? "1 problem" : "\(issues.count) problems"
        var text = "catalog \(source) is invalid (\(count)):"
        for issue in issues { text += "\n  \(issue)" }
        text += "\nFix the catalog (see Catalog/catalog.schema.json) or pass a valid one with --catalog."
        return text
    }
}
