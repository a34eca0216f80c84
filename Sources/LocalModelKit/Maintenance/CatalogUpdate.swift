import FoundationEssentials

/// What `updateCatalog` did.
public enum CatalogUpdateOutcome: Sendable, Equatable {
    /// A newer catalog was accepted and stored; `signer` is the key that signed it.
    case accepted(version: Int, previous: Int, signer: String)
    /// The offered catalog has the version already in use.
    case upToDate(version: Int)
}

/// What `updateCatalog` did, and the catalog in use after it.
public struct CatalogUpdateResult: Sendable {
    /// Accepted, or already up to date.
    public var outcome: CatalogUpdateOutcome
    /// The accepted catalog; when up to date, the catalog of that version.
    public var catalog: Catalog
}

/// The largest catalog an update reads, unless the caller gives another cap.
public let catalogUpdateCap: Int64 = 1 << 20

extension StoreLayout {
    /// The trusted keys given plus the rotated keys this store accepted.
    package func trustedKeys(_ keys: [(name: String, pem: String)]) -> [(name: String, pem: String)] {
        var all = keys
        for file in ((try? FileIO.listDirectory(rotatedKeysRoot)) ?? []).sorted() where file.hasSuffix(".pub") {
            if let bytes = try? FileIO.readFile(atPath: rotatedKeysRoot + "/" + file, limit: TrustedCatalogKeys.maxKeyFileBytes) {
                let pem = String(decoding: bytes, as: UTF8.self)
                if Ed25519.isPublicKey(pem) && !all.contains(where: { $0.pem == pem }) { all.append((String(file.dropLast(4)), pem)) }
            }
        }
        return all
    }
}

extension LocalModelEngine {
    /// Fetches the catalog at `url` and its signature at `url + ".sig"` through the transfer
    /// engine (at most `cap` bytes each), and accepts it by the rules above. The stored
    /// catalog changes only on acceptance; a refused rollback is recorded in the history.
    public func updateCatalog(from url: String, keys given: [(name: String, pem: String)], cap: Int64 = catalogUpdateCap,
                              options: DownloadOptions = DownloadOptions(), cancellation: CancellationFlag = CancellationFlag(),
                              now: Int64? = nil) throws(LocalModelError) -> CatalogUpdateResult {
        let now = now ?? Int64(SystemClock.wallSeconds())
        let records = try open().records
        let keys = layout.trustedKeys(given)
        let lock = FileLock(path: layout.locksRoot + "/@catalog.lock")
        let work = layout.partialRoot + "/@catalog"
        let sigURL = url + ".sig"
        let requests = [
            FileRequest(name: "catalog.json", url: url, partialPath: work + "/catalog.json", boundary: layout.root,
                        size: cap, sha256: nil, sizeIsLimit: true),
            FileRequest(name: "catalog.json.sig", url: sigURL, partialPath: work + "/catalog.json.sig", boundary: layout.root,
                        size: 4096, sha256: nil, sizeIsLimit: true),
        ]
        do {
            try lock.lock()
            defer { lock.unlock() }
            _ = try layout.remove(work)
            defer { _ = try? layout.remove(work) }
            let session = TransferSession(policy: options.policy, cancellation: cancellation,
                                          allowPlainHTTPRedirects: CatalogRules.isPlainHTTP(url),
                                          onEvent: { _ in }, onTick: { _ in })
            let outcomes = try session.run(requests).outcomes
            for (request, outcome) in zip(requests, outcomes) {
                guard case .failed(let failure) = outcome else { continue }
                if case .tooLong = failure { throw LocalModelError.catalogTooLarge(url: request.url, cap: request.size) }
                throw LocalModelError(failure, modelId: "the catalog update", request: request) { (0, 0) }
            }
            let bytes = try FileIO.readFile(atPath: requests[0].partialPath, limit: Int(cap))
            let sig = try FileIO.readFile(atPath: requests[1].partialPath, limit: 4096)
            let (catalog, signer) = try CatalogSignature.accept(bytes, signatureText: sig, source: url, signaturePath: sigURL,
                                                                 keys: keys, now: now)
            let recorded = max(try records.read { try $0.highestCatalogVersion() }, self.catalog.catalogVersion)
            if catalog.catalogVersion < recorded {
                try records.append(.catalog, modelId: nil,
                                   detail: "refused catalog version \(catalog.catalogVersion) from \(url): lower than version \(recorded) in use (rollback)")
                throw LocalModelError.catalogRollback(offered: catalog.catalogVersion, recorded: recorded, store: layout.root)
            }
            // The same version is nothing to do, unless the store's copy of it was damaged or
            // removed (an older catalog stands in): then this genuine copy restores it.
            if catalog.catalogVersion == recorded && self.catalog.catalogVersion == recorded {
                return CatalogUpdateResult(outcome: .upToDate(version: recorded), catalog: self.catalog)
            }
            // The signature first, then the catalog: a reader sees a catalog only once its
            // signature is beside it. Both are re-verified whenever they are read.
            try layout.createDirectory(layout.catalogRoot)
            if let next = catalog.nextKey {
                // Trusted from now on: the catalog naming it was signed by a trusted key.
                try layout.createDirectory(layout.rotatedKeysRoot)
                try FileIO.writeFileAtomically(Array(next.publicKey.utf8), toPath: layout.rotatedKeysRoot + "/\(next.name).pub",
                                               below: layout.root)
            }
            let target = layout.catalogRoot + "/\(catalog.catalogVersion).json"
            // Both files' bytes durable before they take their names, and the names before
            // the records raise the version (P15): after a power cut the records never name
            // a version whose stored files are empty.
            try FileIO.syncFiles(["catalog.json", "catalog.json.sig"], in: work, below: layout.root)
            try layout.rename(requests[1].partialPath, to: target + ".sig")
            try layout.rename(requests[0].partialPath, to: target)
            // The store folder too: the first accepted catalog makes `.catalog` itself.
            try FileIO.syncFolders([layout.catalogRoot, work, layout.root], below: layout.root)
            let restored = catalog.catalogVersion == recorded
            try records.write { ctx in
                try ctx.noteCatalogVersion(catalog.catalogVersion)
                if let digest = CatalogDigest.of(bytes, signature: sig) {
                    try ctx.noteCatalogDigest(version: catalog.catalogVersion, digest: digest)
                }
                try ctx.append(.catalog, modelId: nil,
                               detail: "catalog version \(catalog.catalogVersion) \(restored ? "restored" : "accepted") from \(url), signed by \(signer)"
                                   + (catalog.nextKey.map { "; it names the next signing key \($0.name), trusted from now on" } ?? ""))
            }
            // Older stored catalogs are never used again (the version only rises).
            for name in (try? FileIO.listDirectory(layout.catalogRoot)) ?? []
            where (name.hasSuffix(".json") || name.hasSuffix(".json.sig")) && !name.hasPrefix("\(catalog.catalogVersion).") {
                _ = try? layout.remove(layout.catalogRoot + "/" + name)
            }
            return CatalogUpdateResult(outcome: .accepted(version: catalog.catalogVersion, previous: self.catalog.catalogVersion,
                                                          signer: signer),
                                       catalog: catalog)
        } catch {
            throw .wrap(error)
        }
    }
}
