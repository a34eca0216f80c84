/// Where a catalog model comes from.
public enum ModelOrigin: String, Sendable, Hashable {
    /// The signed catalog in use, or the built-in one.
    case catalog
    /// The store's own catalog: a model a user added (`UserCatalog`).
    case user
}
