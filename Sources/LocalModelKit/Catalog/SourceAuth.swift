/// The credential a catalog source asks for (`"auth"` on a source in the catalog).
package enum SourceAuth: String, Sendable, CaseIterable {
    /// A Hugging Face access token (`HuggingFaceToken`), sent as `Authorization: Bearer` to
    /// the source's own scheme, host and port only.
    case huggingface
}
