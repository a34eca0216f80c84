/// The public keys trusted to sign catalogs: `shipped` (generated from `Catalog/keys/` by
/// `Scripts/embed-catalog`; a test checks they are the same text). Only public halves live in the repository; the publisher keeps
/// the private key. `EXTENTOS_CATALOG_KEYS` names a folder of more trusted `*.pub` keys.
package enum TrustedCatalogKeys {
    /// The shipped keys and those in `environment["EXTENTOS_CATALOG_KEYS"]` (every `*.pub`
    /// file in that folder holding an Ed25519 public key).
    package static func all(environment: [String: String]) -> [(name: String, pem: String)] {
        load(environment: environment).keys
    }

    /// `all(environment:)`, and why each `*.pub` of `EXTENTOS_CATALOG_KEYS` that is not used
    /// was skipped (not a regular file, too large, unreadable, not an Ed25519 public key), for
    /// the warnings the command prints and for doctor. Nothing is waited on: a FIFO there is
    /// skipped, not opened for reading.
    package static func load(environment: [String: String]) -> (keys: [(name: String, pem: String)], skipped: [String]) {
        var keys = shipped
        var skipped: [String] = []
        guard let dir = environment["EXTENTOS_CATALOG_KEYS"], !dir.isEmpty else { return (keys, skipped) }
        let files: [String]
        do {
            files = try FileIO.listDirectory(dir)
        } catch {
            return (keys, ["EXTENTOS_CATALOG_KEYS: cannot list \(dir): \(error.message); no key from it is trusted"])
        }
        for file in files where file.hasSuffix(".pub") {
            let path = dir + "/" + file
            do {
                let pem = String(decoding: try FileIO.readFile(atPath: path, limit: maxKeyFileBytes), as: UTF8.self)
                if Ed25519.isPublicKey(pem) {
                    keys.append((String(file.dropLast(4)), pem))
                } else {
                    skipped.append("EXTENTOS_CATALOG_KEYS: \(path) holds no Ed25519 public key (PEM); skipped")
                }
            } catch {
                skipped.append("EXTENTOS_CATALOG_KEYS: \(error.message); skipped")
            }
        }
        return (keys, skipped)
    }

    /// The largest key file read (a PEM public key is about 113 bytes).
    package static let maxKeyFileBytes = 16 << 10
}
