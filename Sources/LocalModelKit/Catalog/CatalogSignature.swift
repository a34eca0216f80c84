import FoundationEssentials

/// Signed catalog updates (TUF's lessons, kept small): a catalog is accepted only when its
/// detached Ed25519 signature verifies against a trusted key, its `catalogVersion` is higher
/// than any the store has used (lower is a rollback, recorded and refused; equal is nothing
/// to do), its `expiresAt` has not passed (a frozen mirror), and it validates. Accepted
/// catalogs live in the store as `.catalog/<version>.json` + `.sig` and are re-verified
/// whenever they are read; the built-in catalog is the floor.
package enum CatalogSignature {
    /// The trusted key (by name) that signed `message`, or nil. `signatureText` is the
    /// `.sig` file's text: the base64 of a 64-byte Ed25519 signature.
    package static func signer(of message: [UInt8], signatureText: [UInt8],
                              keys: [(name: String, pem: String)]) -> String? {
        guard let signature = Base64.decode(String(decoding: signatureText, as: UTF8.self)), signature.count == 64 else {
            return nil
        }
        return keys.first { Ed25519.verify(message, signature: signature, publicPEM: $0.pem) }?.name
    }

    /// The catalog in `bytes`, when a trusted key signed it, it validates and has not
    /// expired; else the typed reason. `source` names it in messages.
    package static func accept(_ bytes: [UInt8], signatureText: [UInt8], source: String, signaturePath: String,
                              keys: [(name: String, pem: String)], now: Int64) throws(LocalModelError) -> (Catalog, signer: String) {
        guard let signer = signer(of: bytes, signatureText: signatureText, keys: keys) else {
            throw .catalogSignatureInvalid(source: source, signature: signaturePath, keys: keys.map(\.name))
        }
        let catalog: Catalog
        do {
            catalog = try CatalogLoader().decode(bytes, source: source)
        } catch {
            throw .invalidCatalog(error)
        }
        if catalog.isExpired(now: now), let expiresAt = catalog.expiresAt {
            throw .catalogExpired(source: source, expiresAt: expiresAt)
        }
        return (catalog, signer)
    }
}
