/// The public keys trusted to sign catalogs: `shipped` (generated from `Catalog/keys/` by
/// `Scripts/embed-catalog`; a test checks they are the same text). Only public halves live in the repository; the publisher keeps
/// the private key. `EXTENTOS_CATALOG_KEYS` names a folder of more trusted `*.pub` keys.
public enum TrustedCatalogKeys {
    /// The shipped keys and those in `environment["EXTENTOS_CATALOG_KEYS"]` (every `*.pub`
    /// file in that folder holding an Ed25519 public key).
    public static func all(environment: [String: String]) -> [(name: String, pem: String)] {
        var keys = shipped
        if let dir = environment["EXTENTOS_CATALOG_KEYS"], !dir.isEmpty {
            for file in ((try? FileIO.listDirectory(dir)) ?? []) where file.hasSuffix(".pub") {
                if let bytes = try? FileIO.readFile(atPath: dir + "/" + file, limit: 16 << 10) {
                    let pem = String(decoding: bytes, as: UTF8.self)
                    if Ed25519.isPublicKey(pem) { keys.append((String(file.dropLast(4)), pem)) }
                }
            }
        }
        return keys
    }
}
