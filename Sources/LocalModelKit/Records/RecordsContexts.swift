import FoundationEssentials

/// Queries available inside `Records.read`.
package struct ReadContext {
    let db: SQLiteConnection

    static let installColumns = "model_id, kind, state, catalog_version, path, total_bytes, created_at, updated_at, installed_at, last_error, source"

    static func decodeInstall(_ row: SQLiteRow) -> InstallRecord? {
        guard let id = row[0].string, let kind = row[1].string.flatMap(ModelKind.init(rawValue:)),
              let state = row[2].string.flatMap(InstallState.init(rawValue:)) else { return nil }
        return InstallRecord(modelId: id, kind: kind, state: state, catalogVersion: Int(row[3].int64 ?? 0),
                             path: row[4].string, totalBytes: row[5].int64 ?? 0,
                             createdAt: row[6].double ?? 0, updatedAt: row[7].double ?? 0,
                             installedAt: row[8].double, lastError: row[9].string, source: row[10].string)
    }

    /// The model's record, or nil when there is none.
    package func install(_ modelId: String) throws(SQLiteError) -> InstallRecord? {
        try db.query("SELECT \(Self.installColumns) FROM installs WHERE model_id = ?", [.text(modelId)]).first.flatMap(Self.decodeInstall)
    }

    /// Every record, by model id.
    package func installs() throws(SQLiteError) -> [InstallRecord] {
        try db.query("SELECT \(Self.installColumns) FROM installs ORDER BY model_id").compactMap(Self.decodeInstall)
    }

    /// Every model's file rows, in one query (start-up repair checks them all).
    package func allFiles() throws(SQLiteError) -> [String: [FileRecord]] {
        var out: [String: [FileRecord]] = [:]
        for row in try db.query("""
            SELECT model_id, path, size, sha256, etag, last_modified, bytes_present, verified_sha256
            FROM files ORDER BY model_id, path
            """) {
            let record = FileRecord(path: row[1].string ?? "", size: row[2].int64 ?? 0, sha256: row[3].string, etag: row[4].string,
                                    lastModified: row[5].string, bytesPresent: row[6].int64 ?? 0, verifiedSha256: row[7].string)
            out[row[0].string ?? "", default: []].append(record)
        }
        return out
    }

    /// `sha256:size` of every verified file of an installed model: the bytes the store holds
    /// (what a download links instead of fetching). One lean query for start-up.
    package func heldFiles() throws(SQLiteError) -> Set<String> {
        var held = Set<String>()
        for row in try db.query("""
            SELECT f.verified_sha256, f.size FROM files f JOIN installs i ON i.model_id = f.model_id
            WHERE i.state = 'installed' AND f.verified_sha256 IS NOT NULL
            """) {
            if let sha = row[0].string, let size = row[1].int64 { held.insert(FileRecord.heldKey(sha256: sha, size: size)) }
        }
        return held
    }

    /// The model's file rows (an install's files as verified), by path.
    package func files(_ modelId: String) throws(SQLiteError) -> [FileRecord] {
        try db.query("""
            SELECT path, size, sha256, etag, last_modified, bytes_present, verified_sha256
            FROM files WHERE model_id = ? ORDER BY path
            """, [.text(modelId)]).map { row in
            FileRecord(path: row[0].string ?? "", size: row[1].int64 ?? 0, sha256: row[2].string, etag: row[3].string,
                       lastModified: row[4].string, bytesPresent: row[5].int64 ?? 0, verifiedSha256: row[6].string)
        }
    }

    /// Newest last; `limit` keeps the newest events.
    package func history(modelId: String?, limit: Int) throws(SQLiteError) -> [HistoryEvent] {
        let rows: [SQLiteRow]
        if let modelId {
            rows = try db.query("SELECT id, at, model_id, event, detail FROM (SELECT * FROM events WHERE model_id = ? ORDER BY id DESC LIMIT ?) ORDER BY id",
                                [.text(modelId), .integer(Int64(limit))])
        } else {
            rows = try db.query("SELECT id, at, model_id, event, detail FROM (SELECT * FROM events ORDER BY id DESC LIMIT ?) ORDER BY id",
                                [.integer(Int64(limit))])
        }
        return rows.map { HistoryEvent(id: $0[0].int64 ?? 0, at: $0[1].double ?? 0, modelId: $0[2].string, kind: $0[3].string ?? "", detail: $0[4].string) }
    }

    /// Bytes reserved by downloads in flight, except `excluding`'s own.
    package func reservedBytes(excluding modelId: String? = nil) throws(SQLiteError) -> Int64 {
        // Summed here, saturating: SQLite's SUM fails on an overflow, and a damaged or
        // hostile database must not stop every download (P12).
        ExternalNumber.saturatingSum(try db.query("SELECT bytes FROM reservations WHERE model_id IS NOT ?",
                                                  [modelId.map { .text($0) } ?? .null]).map { $0[0].int64 ?? 0 })
    }

    /// The bytes each download in flight has reserved, and the process that holds it.
    package func reservations() throws(SQLiteError) -> [(modelId: String, pid: Int32, bytes: Int64)] {
        try db.query("SELECT model_id, pid, bytes FROM reservations ORDER BY model_id").map {
            ($0[0].string ?? "", Int32(truncatingIfNeeded: $0[1].int64 ?? 0), max(0, $0[2].int64 ?? 0))
        }
    }

    /// Resume state of a download in flight (validators for `If-Range`, bytes present).
    package func partialFiles(_ modelId: String) throws(SQLiteError) -> [FileRecord] {
        try db.query("SELECT path, size, etag, last_modified, bytes_present FROM partial_files WHERE model_id = ? ORDER BY path",
                     [.text(modelId)]).map { row in
            FileRecord(path: row[0].string ?? "", size: row[1].int64 ?? 0, sha256: nil, etag: row[2].string,
                       lastModified: row[3].string, bytesPresent: row[4].int64 ?? 0)
        }
    }

    /// The highest catalog version this store has accepted (0 when none).
    package func highestCatalogVersion() throws(SQLiteError) -> Int {
        Int(try db.scalar("SELECT value FROM meta WHERE key = 'catalogVersion'").int64 ?? 0)
    }

    /// The digest of the signed catalog of `version` as it was accepted (its bytes and its
    /// signature's, `CatalogDigest`), or nil for a catalog accepted before digests were kept.
    package func catalogDigest(version: Int) throws(SQLiteError) -> String? {
        try db.scalar("SELECT value FROM meta WHERE key = ?", [.text("catalogDigest.\(version)")]).string
    }
}

/// Statements available inside `Records.write` (reads too).
package struct WriteContext {
    let db: SQLiteConnection
    /// The transaction's timestamp.
    package let now: Double

    /// The reads, inside this transaction (they see its writes so far).
    package var read: ReadContext { ReadContext(db: db) }

    /// Inserts or replaces a model's record (its files are kept unless replaced).
    package func upsert(_ r: InstallRecord) throws(SQLiteError) {
        try db.query("""
            INSERT INTO installs (model_id, kind, state, catalog_version, path, total_bytes, created_at, updated_at, installed_at, last_error, source)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(model_id) DO UPDATE SET kind = excluded.kind, state = excluded.state,
                catalog_version = excluded.catalog_version, path = excluded.path, total_bytes = excluded.total_bytes,
                updated_at = excluded.updated_at, installed_at = excluded.installed_at, last_error = excluded.last_error,
                source = excluded.source
            """, [.text(r.modelId), .text(r.kind.rawValue), .text(r.state.rawValue), .integer(Int64(r.catalogVersion)),
                  r.path.map { .text($0) } ?? .null, .integer(r.totalBytes), .real(r.createdAt), .real(r.updatedAt),
                  r.installedAt.map { .real($0) } ?? .null, r.lastError.map { .text($0) } ?? .null,
                  r.source.map { .text($0) } ?? .null])
    }

    /// Replaces every file row of a model.
    package func setFiles(_ modelId: String, _ files: [FileRecord]) throws(SQLiteError) {
        try db.query("DELETE FROM files WHERE model_id = ?", [.text(modelId)])
        for f in files { try upsertFile(modelId, f) }
    }

    /// Inserts or replaces one file row of a model.
    package func upsertFile(_ modelId: String, _ f: FileRecord) throws(SQLiteError) {
        try db.query("""
            INSERT INTO files (model_id, path, size, sha256, etag, last_modified, bytes_present, verified_sha256)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(model_id, path) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256, etag = excluded.etag,
                last_modified = excluded.last_modified, bytes_present = excluded.bytes_present, verified_sha256 = excluded.verified_sha256
            """, [.text(modelId), .text(f.path), .integer(f.size), f.sha256.map { .text($0) } ?? .null,
                  f.etag.map { .text($0) } ?? .null, f.lastModified.map { .text($0) } ?? .null,
                  .integer(f.bytesPresent), f.verifiedSha256.map { .text($0) } ?? .null])
    }

    /// Removes a model's record and its files' rows. Returns whether there was one.
    @discardableResult
    package func deleteInstall(_ modelId: String) throws(SQLiteError) -> Bool {
        try db.query("DELETE FROM files WHERE model_id = ?", [.text(modelId)])
        try db.query("DELETE FROM installs WHERE model_id = ?", [.text(modelId)])
        return db.changes > 0
    }

    /// Appends a history event, timed at the transaction's ``now``.
    package func append(_ kind: HistoryEvent.Kind, modelId: String?, detail: String? = nil) throws(SQLiteError) {
        try db.query("INSERT INTO events (at, model_id, event, detail) VALUES (?, ?, ?, ?)",
                     [.real(now), modelId.map { .text($0) } ?? .null, .text(kind.rawValue), detail.map { .text($0) } ?? .null])
    }

    /// Reserves (or updates) the bytes a download of `modelId` still needs.
    package func reserve(_ modelId: String, bytes: Int64, pid: Int32) throws(SQLiteError) {
        try db.query("""
            INSERT INTO reservations (model_id, pid, bytes, created_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(model_id) DO UPDATE SET pid = excluded.pid, bytes = excluded.bytes
            """, [.text(modelId), .integer(Int64(pid)), .integer(max(0, bytes)), .real(now)])
    }

    /// Drops the model's reservation (its download ended).
    package func release(_ modelId: String) throws(SQLiteError) {
        try db.query("DELETE FROM reservations WHERE model_id = ?", [.text(modelId)])
    }

    /// Saves a file's resume state.
    package func upsertPartialFile(_ modelId: String, _ f: FileRecord) throws(SQLiteError) {
        try db.query("""
            INSERT INTO partial_files (model_id, path, size, etag, last_modified, bytes_present, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(model_id, path) DO UPDATE SET size = excluded.size, etag = excluded.etag,
                last_modified = excluded.last_modified, bytes_present = excluded.bytes_present, updated_at = excluded.updated_at
            """, [.text(modelId), .text(f.path), .integer(f.size), f.etag.map { .text($0) } ?? .null,
                  f.lastModified.map { .text($0) } ?? .null, .integer(f.bytesPresent), .real(now)])
    }

    /// Forgets the model's resume state (its partial data is gone or installed).
    package func clearPartialFiles(_ modelId: String) throws(SQLiteError) {
        try db.query("DELETE FROM partial_files WHERE model_id = ?", [.text(modelId)])
    }

    /// Records a catalog version as seen; it never goes down.
    package func noteCatalogVersion(_ version: Int) throws(SQLiteError) {
        try db.query("""
            INSERT INTO meta (key, value) VALUES ('catalogVersion', ?)
            ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)
            """, [.integer(Int64(version))])
    }

    /// Remembers what the accepted catalog of `version` looked like (its digest), so that a
    /// stored copy that no longer matches is known to be damaged, not merely signed by a key
    /// this process does not trust.
    package func noteCatalogDigest(version: Int, digest: String) throws(SQLiteError) {
        try db.query("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                     [.text("catalogDigest.\(version)"), .text(digest)])
    }
}
