import FoundationEssentials

/// The digest a store keeps of each catalog it accepts: the SHA-256 of the catalog's bytes
/// and of its signature's, so a stored copy that changed later is known to be damaged
/// (a flipped byte, a truncation, an edit), not merely signed by a key this process does
/// not trust (one that was trusted through `EXTENTOS_CATALOG_KEYS` when it was accepted).
package enum CatalogDigest {
    /// `<sha256 of the catalog>:<sha256 of the signature>`, or nil when libcrypto fails.
    package static func of(_ bytes: [UInt8], signature: [UInt8]) -> String? {
        guard let body = try? SHA256Hasher.hash(bytes), let sig = try? SHA256Hasher.hash(signature) else { return nil }
        return body + ":" + sig
    }
}

/// A stored catalog newer than the one in use that was not used, and why.
package struct UnusableStoredCatalog: Sendable, Equatable, CustomStringConvertible {
    /// Why it was not used.
    package enum Reason: Sendable, Equatable {
        /// Its bytes or its signature's differ from those accepted: damaged or tampered.
        /// Moved to `setAsideTo` (kept for inspection, never read again); nil when it could
        /// not be moved (a store read-only for this user, or a catalog update under way).
        case damaged(setAsideTo: String?)
        /// The very bytes that were accepted, but no key this process trusts signed them.
        case untrustedHere
        /// It fails its checks (`problem`) and the store kept no digest to tell damage from
        /// an untrusted key (accepted by an older build): left in place, not used.
        case failsCheck(problem: String)
    }

    /// The stored file (`STORE/.catalog/<version>.json`).
    package var path: String
    /// Its catalog version.
    package var version: Int
    /// Why it was not used.
    package var reason: Reason

    /// The file, its version, why, and what to do.
    package var description: String {
        switch reason {
        case .damaged(let moved?):
            return "\(path) (catalog version \(version)) no longer matches what was accepted (damaged or tampered); set aside as \(moved) and never read again"
        case .damaged(nil):
            return "\(path) (catalog version \(version)) no longer matches what was accepted (damaged or tampered); not used (it could not be set aside now)"
        case .untrustedHere:
            return "\(path) (catalog version \(version)) is signed by a key this process does not trust; not used (trust the key that signed it, e.g. through EXTENTOS_CATALOG_KEYS, as when it was accepted)"
        case .failsCheck(let problem):
            return "\(path) (catalog version \(version)) fails its check (\(problem)); not used"
        }
    }
}

/// What reading the store's accepted catalogs found.
package struct StoredCatalogRead: Sendable {
    /// The newest stored catalog that verifies, and its path.
    package var found: (catalog: Catalog, source: String)?
    /// Newer stored catalogs passed over, newest first.
    package var unusable: [UnusableStoredCatalog]
}

extension StoreLayout {
    /// Where damaged stored catalogs are moved: `.catalog/damaged/`.
    package var damagedCatalogRoot: String { catalogRoot + "/damaged" }

    /// The newest stored catalog that still verifies (signature by a trusted key, valid;
    /// an accepted catalog keeps serving after its `expiresAt`: expiry guards what is
    /// accepted, and a device offline past it must not lose its models), or nil.
    package func storedCatalog(keys given: [(name: String, pem: String)]) -> (catalog: Catalog, source: String)? {
        readStoredCatalogs(keys: given).found
    }

    /// Reads `.catalog/<version>.json` (+ `.sig`) newest first and returns the first that
    /// verifies. A newer one that does not is passed over; when the store's records say it
    /// was accepted with other bytes, it is damaged and, with `setAside`, moved to
    /// `.catalog/damaged/` under the catalog lock (so a `catalog update` writing the same
    /// name meanwhile is never the one moved), and the history says so. The version floor
    /// lives in the records, so removing or damaging files here never lowers it.
    package func readStoredCatalogs(keys given: [(name: String, pem: String)], setAside: Bool = true) -> StoredCatalogRead {
        // Never through a link (P11): a `.catalog` that is one holds no catalog of this store.
        guard (try? FileIO.status(catalogRoot))??.kind == .directory,
              let names = try? FileIO.listDirectory(catalogRoot), !names.isEmpty else { return StoredCatalogRead(found: nil, unusable: []) }
        let keys = trustedKeys(given)
        let versions = names.compactMap { name -> Int? in
            guard name.hasSuffix(".json") else { return nil }
            return Int(name.dropLast(5)).flatMap { $0 > 0 ? $0 : nil }
        }.sorted(by: >)
        var unusable: [UnusableStoredCatalog] = []
        // Opened only when a stored catalog fails (the common path reads no records here).
        var records: Records?
        for version in versions {
            let path = catalogRoot + "/\(version).json"
            let checked = check(path: path, version: version, keys: keys)
            if case .success(let catalog) = checked.result { return StoredCatalogRead(found: (catalog, path), unusable: unusable) }
            guard case .failure(let failure) = checked.result else { continue }
            let problem = failure.text
            if records == nil { records = try? Records(path: recordsPath, create: false) }
            guard let recorded = (try? records?.read { try $0.catalogDigest(version: version) }) ?? nil else {
                unusable.append(UnusableStoredCatalog(path: path, version: version, reason: .failsCheck(problem: problem)))
                continue
            }
            if checked.digest == recorded {
                unusable.append(UnusableStoredCatalog(path: path, version: version,
                                                      reason: checked.signed ? .failsCheck(problem: problem) : .untrustedHere))
                continue
            }
            let moved = setAside ? self.setAside(path: path, version: version, recorded: recorded, records: records) : nil
            unusable.append(UnusableStoredCatalog(path: path, version: version, reason: .damaged(setAsideTo: moved)))
        }
        return StoredCatalogRead(found: nil, unusable: unusable)
    }

    /// One stored catalog's check: the catalog, or why not; the digest of what is on disk;
    /// whether a trusted key signed it.
    private func check(path: String, version: Int, keys: [(name: String, pem: String)])
        -> (result: Result<Catalog, CheckProblem>, digest: String?, signed: Bool) {
        let bytes: [UInt8], sig: [UInt8]
        do {
            bytes = try FileIO.readFile(atPath: path, limit: Int(catalogUpdateCap))
            sig = try FileIO.readFile(atPath: path + ".sig", limit: 4096)
        } catch {
            return (.failure(CheckProblem(error.message)), nil, false)
        }
        let digest = CatalogDigest.of(bytes, signature: sig)
        guard CatalogSignature.signer(of: bytes, signatureText: sig, keys: keys) != nil else {
            return (.failure(CheckProblem("no trusted key signed it")), digest, false)
        }
        let catalog: Catalog
        do {
            catalog = try CatalogLoader().decode(bytes, source: path)
        } catch {
            return (.failure(CheckProblem("\(error)")), digest, true)
        }
        guard catalog.catalogVersion == version else {
            return (.failure(CheckProblem("it says catalogVersion \(catalog.catalogVersion)")), digest, true)
        }
        return (.success(catalog), digest, true)
    }

    private struct CheckProblem: Error {
        var text: String
        init(_ text: String) { self.text = text }
    }

    /// Moves a damaged stored catalog and its signature to `.catalog/damaged/`, when the
    /// catalog lock can be had at once and the file still differs from what was accepted.
    /// - Returns: where the catalog went, or nil when it was left in place.
    private func setAside(path: String, version: Int, recorded: String, records: Records?) -> String? {
        let lock = FileLock(path: locksRoot + "/@catalog.lock")
        guard (try? lock.tryLock()) == true else { return nil }
        defer { lock.unlock() }
        // Re-read under the lock: a `catalog update` may have put a genuine copy there.
        let bytes = (try? FileIO.readFile(atPath: path, limit: Int(catalogUpdateCap))) ?? []
        let sig = (try? FileIO.readFile(atPath: path + ".sig", limit: 4096)) ?? []
        guard CatalogDigest.of(bytes, signature: sig) != recorded else { return nil }
        let stamp = Int64(SystemClock.wallSeconds())
        let target = damagedCatalogRoot + "/\(version).json.\(stamp)"
        do {
            try createDirectory(damagedCatalogRoot)
            if FileIO.exists(path + ".sig") { try rename(path + ".sig", to: target + ".sig") }
            if FileIO.exists(path) { try rename(path, to: target) }
            // Durable before the history says so (P15).
            try FileIO.syncFolders([FileIO.parent(of: path), damagedCatalogRoot], below: root)
        } catch {
            return nil
        }
        try? records?.append(.catalog, modelId: nil,
                             detail: "set aside \(path) as \(target): it no longer matches catalog version \(version) as accepted (damaged or tampered); 'glasses-local catalog update' restores it")
        return target
    }

    /// The damaged catalogs set aside so far (`.catalog/damaged/`), for doctor.
    package func setAsideCatalogs() -> [String] {
        ((try? FileIO.listDirectory(damagedCatalogRoot)) ?? []).filter { !$0.hasSuffix(".sig") }.map { damagedCatalogRoot + "/" + $0 }
    }
}
