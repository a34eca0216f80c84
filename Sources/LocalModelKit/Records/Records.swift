import Foundation
import Synchronization

/// Whether a model's bytes are partly present or fully installed.
public enum InstallState: String, Sendable {
    /// Download in progress or interrupted; data under `.partial/<id>`.
    case partial
    /// Every file verified and renamed into place; the install committed.
    case installed
}

/// One model's record.
public struct InstallRecord: Sendable, Equatable {
    public var modelId: String
    public var kind: ModelKind
    public var state: InstallState
    /// The catalog version the files came from.
    public var catalogVersion: Int
    /// Final folder (installed), relative to the store root (`<id>` or `voices/<id>`), so a
    /// store restored from a backup or moved elsewhere keeps its installed state. Stores
    /// written before schema 3 held absolute paths; migration 3 rewrites them.
    public var path: String?
    /// Bytes of the installed tree.
    public var totalBytes: Int64
    public var createdAt: Double
    public var updatedAt: Double
    public var installedAt: Double?
    public var lastError: String?

    public init(modelId: String, kind: ModelKind, state: InstallState, catalogVersion: Int, path: String?,
                totalBytes: Int64, createdAt: Double, updatedAt: Double, installedAt: Double? = nil, lastError: String? = nil) {
        self.modelId = modelId
        self.kind = kind
        self.state = state
        self.catalogVersion = catalogVersion
        self.path = path
        self.totalBytes = totalBytes
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.installedAt = installedAt
        self.lastError = lastError
    }
}

/// One file of a model's record.
public struct FileRecord: Sendable, Equatable {
    public var path: String
    public var size: Int64
    /// The catalog's hash, when it has one.
    public var sha256: String?
    /// The server's validators, for `If-Range` on resume.
    public var etag: String?
    public var lastModified: String?
    /// Bytes already on disk (in `.partial`, or all of them once installed).
    public var bytesPresent: Int64
    /// The SHA-256 computed while installing; `verify` compares against it when the
    /// catalog has no hash.
    public var verifiedSha256: String?

    public init(path: String, size: Int64, sha256: String?, etag: String? = nil, lastModified: String? = nil,
                bytesPresent: Int64 = 0, verifiedSha256: String? = nil) {
        self.path = path
        self.size = size
        self.sha256 = sha256
        self.etag = etag
        self.lastModified = lastModified
        self.bytesPresent = bytesPresent
        self.verifiedSha256 = verifiedSha256
    }
}

/// One line of the append-only history.
public struct HistoryEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, CaseIterable {
        case started, resumed, completed, failed, verified, deleted, repaired, catalog
    }
    public var id: Int64
    /// Seconds since 1970.
    public var at: Double
    public var modelId: String?
    public var kind: String
    public var detail: String?
}

/// Why the records database cannot be used, and what to do.
public enum RecordsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file is not a SQLite database, or is damaged.
    case corrupt(path: String, detail: String)
    /// The file or its folder cannot be opened or written (permissions, read-only, …).
    case unavailable(path: String, detail: String)
    /// Written by a newer glasses-local (its schema version is higher than ours).
    case newerSchema(path: String, found: Int, supported: Int)
    /// The filesystem refused WAL mode (network filesystems often do).
    case walUnavailable(path: String, journalMode: String)
    /// Another process kept the database locked for longer than we wait.
    case busyTooLong(path: String, seconds: Int)
    /// The disk holding the records is full.
    case diskFull(path: String)
    /// This user may read the database but not write it (a system-wide store).
    case readOnly(path: String)
    /// The database, or its `-wal`/`-shm`/`-journal` file, is a symbolic link (P11).
    case symbolicLink(path: String)
    /// Any other SQLite failure.
    case sqlite(SQLiteError)

    /// True when the failure is a full disk (so callers may skip optional writes).
    public var isDiskFull: Bool {
        if case .diskFull = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case let .corrupt(path, detail):
            return "records database \(path) is damaged or not a database (\(detail)); it is left as it is. Move it aside with its -wal/-shm files (nothing is deleted): \(RecordsRecovery.moveAsideCommand(recordsPath: path)) — then run 'glasses-local doctor': it starts new records (install records and history are lost) and says which models on disk are re-verified and which are fetched again."
        case let .unavailable(path, detail):
            return "records database \(path) cannot be opened (\(detail)). Check that the folder exists and is writable by this user, or choose another store with --store or EXTENTOS_MODELS_DIR."
        case let .newerSchema(path, found, supported):
            return "records database \(path) was written by a newer glasses-local (schema \(found), this one knows \(supported)). Update glasses-local, or use another store with --store."
        case let .walUnavailable(path, mode):
            return "records database \(path) could not switch to WAL mode (journal mode is '\(mode)'). Put the store on a local disk (not NFS/SMB) with --store or EXTENTOS_MODELS_DIR."
        case let .busyTooLong(path, seconds):
            return "records database \(path) stayed locked by another process for \(seconds) s. Check for a hung glasses-local process ('fuser \(path)') and retry."
        case .diskFull(let path):
            return "records database \(path) cannot be written: the disk is full. Free at least \(LocalModelError.recordsRoomMb) MiB ('glasses-local delete ID' and 'glasses-local gc' work on a full disk) and retry."
        case .readOnly(let path):
            return "records database \(path) is read-only for this user: reading works, changing the store needs its owner. Use a store of your own with --store or EXTENTOS_MODELS_DIR to download."
        case .symbolicLink(let path):
            return "records database file \(path) is a symbolic link; links inside the store are never followed, so nothing was read or written through it. Put the real file in its place, or move the link away (install records are then rebuilt: models already on disk are re-verified, not fetched again)."
        case let .sqlite(error):
            return "\(error.message)"
        }
    }
}

/// The install records of one store, in `records.sqlite3`.
///
/// Thread-safe: one connection behind a `Mutex`. Several processes may open the same
/// file; WAL lets readers proceed while one writer writes, every write runs in
/// `BEGIN IMMEDIATE`, and a busy database is waited for and retried — `SQLITE_BUSY`
/// never reaches a caller (P9).
public final class Records: Sendable {
    /// The schema version this build writes (`PRAGMA user_version`).
    public static var schemaVersion: Int { migrations.count }
    public let path: String
    private let connection: Mutex<SQLiteConnection>
    private let now: @Sendable () -> Double
    /// Longest total wait for another process's write lock.
    private let busyLimitSeconds: Double

    /// Opens (creating when asked) and migrates the records of a store.
    /// - Parameters:
    ///   - create: false opens an existing file read-write and fails if it is absent.
    ///   - now: the clock (seconds since 1970), a parameter for tests.
    public init(path: String, create: Bool = true, busyLimitSeconds: Double = 120,
                now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) throws(RecordsError) {
        self.path = path
        self.now = now
        self.busyLimitSeconds = busyLimitSeconds
        // SQLITE_OPEN_NOFOLLOW guards the database file; its companions are checked here,
        // since SQLite opens them by name (P11: nothing outside the store is written).
        for file in [path, path + "-wal", path + "-shm", path + "-journal"] {
            if let st = try? FileIO.status(file), (st.st_mode & S_IFMT) == S_IFLNK {
                throw RecordsError.symbolicLink(path: file)
            }
        }
        let db: SQLiteConnection
        do {
            db = try SQLiteConnection(path: path, create: create, busyTimeoutMs: 5_000)
        } catch {
            throw Records.classify(error, path: path)
        }
        do {
            try Records.configure(db, path: path, busyLimitSeconds: busyLimitSeconds)
            try Records.migrate(db, path: path, busyLimitSeconds: busyLimitSeconds)
            // A healthy database keeps its -wal/-shm files between runs (emptied at each
            // close, so nothing stale can mask the main file): opening then creates no file,
            // which keeps reading, deleting and gc working on a full disk.
            try db.execute("PRAGMA journal_size_limit=0")
            db.persistWAL()
        } catch let error as RecordsError {
            throw error
        } catch let error as SQLiteError {
            throw Records.classify(error, path: path)
        } catch {
            throw RecordsError.unavailable(path: path, detail: "\(error)")
        }
        connection = Mutex(db)
    }

    static func classify(_ error: SQLiteError, path: String) -> RecordsError {
        if error.isCorruption { return .corrupt(path: path, detail: Records.shortDetail(error)) }
        if error.isDiskFull { return .diskFull(path: path) }
        let primary = error.code & 0xFF
        if primary == 8 { return .readOnly(path: path) }   // SQLITE_READONLY
        // SQLITE_CANTOPEN 14, SQLITE_PERM 3, SQLITE_READONLY 8, SQLITE_IOERR 10, SQLITE_AUTH 23.
        if [14, 3, 8, 10, 23].contains(primary) { return .unavailable(path: path, detail: Records.shortDetail(error)) }
        return .sqlite(error)
    }

    private static func shortDetail(_ error: SQLiteError) -> String {
        if let range = error.message.range(of: ": ", options: .backwards) {
            return String(error.message[range.upperBound...])
        }
        return error.message
    }

    private static func configure(_ db: SQLiteConnection, path: String, busyLimitSeconds: Double) throws {
        // Switching to WAL needs a brief exclusive lock: retry while another process does it.
        let mode = try withBusyRetry(path: path, limit: busyLimitSeconds) { () throws(SQLiteError) in
            try db.scalar("PRAGMA journal_mode=WAL").string ?? ""
        }
        guard mode.lowercased() == "wal" else { throw RecordsError.walUnavailable(path: path, journalMode: mode) }
        try db.execute("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
    }

    /// Ordered migrations; index + 1 is the `user_version` each one produces. Never edit
    /// a shipped migration: append a new one.
    private static let migrations: [String] = [
        """
        CREATE TABLE installs (
            model_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('partial', 'installed')),
            catalog_version INTEGER NOT NULL,
            path TEXT,
            total_bytes INTEGER NOT NULL CHECK (total_bytes >= 0),
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            installed_at REAL,
            last_error TEXT
        ) STRICT;
        CREATE TABLE files (
            model_id TEXT NOT NULL REFERENCES installs(model_id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            sha256 TEXT,
            etag TEXT,
            last_modified TEXT,
            bytes_present INTEGER NOT NULL DEFAULT 0 CHECK (bytes_present >= 0 AND bytes_present <= size),
            verified_sha256 TEXT,
            PRIMARY KEY (model_id, path)
        ) STRICT, WITHOUT ROWID;
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            model_id TEXT,
            event TEXT NOT NULL,
            detail TEXT
        ) STRICT;
        CREATE INDEX events_by_model ON events(model_id, id);
        CREATE TRIGGER events_no_update BEFORE UPDATE ON events
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
        CREATE TRIGGER events_no_delete BEFORE DELETE ON events
            BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
        CREATE TABLE reservations (
            model_id TEXT PRIMARY KEY,
            pid INTEGER NOT NULL,
            bytes INTEGER NOT NULL CHECK (bytes >= 0),
            created_at REAL NOT NULL
        ) STRICT;
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value ANY
        ) STRICT;
        """,
        // 2: resume state of downloads in flight, apart from the installed files' rows.
        """
        CREATE TABLE partial_files (
            model_id TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            etag TEXT,
            last_modified TEXT,
            bytes_present INTEGER NOT NULL DEFAULT 0,
            updated_at REAL NOT NULL,
            PRIMARY KEY (model_id, path)
        ) STRICT, WITHOUT ROWID;
        """,
        // 3: install folders relative to the store (a store that moves keeps its installs).
        // The folder of a model is fixed by the layout, so an absolute path — even one of
        // a store that was moved before this upgrade — becomes `<id>` or `voices/<id>`.
        """
        UPDATE installs SET path = CASE kind WHEN 'voice' THEN 'voices/' || model_id ELSE model_id END
            WHERE path IS NOT NULL AND substr(path, 1, 1) = '/';
        """,
    ]

    private static func migrate(_ db: SQLiteConnection, path: String, busyLimitSeconds: Double) throws {
        let current = Int(try db.scalar("PRAGMA user_version").int64 ?? 0)
        if current > migrations.count {
            throw RecordsError.newerSchema(path: path, found: current, supported: migrations.count)
        }
        if current == migrations.count { return }
        try withBusyRetry(path: path, limit: busyLimitSeconds) { () throws(SQLiteError) in
            try db.execute("BEGIN IMMEDIATE")
            do throws(SQLiteError) {
                // Re-read inside the write lock: another process may have migrated meanwhile.
                let version = Int(try db.scalar("PRAGMA user_version").int64 ?? 0)
                if version < migrations.count {
                    for n in version..<migrations.count {
                        try db.execute(migrations[n])
                        try db.execute("PRAGMA user_version = \(n + 1)")
                    }
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Retries `body` while SQLite reports BUSY/LOCKED, with a growing pause, up to `limit` seconds.
    private static func withBusyRetry<T>(path: String, limit: Double, _ body: () throws(SQLiteError) -> T) throws(RecordsError) -> T {
        let start = Date()
        var pause: useconds_t = 2_000
        while true {
            do {
                return try body()
            } catch where error.isBusy {
                if Date().timeIntervalSince(start) > limit { throw RecordsError.busyTooLong(path: path, seconds: Int(limit)) }
                FileIO.pause(microseconds: pause)
                pause = min(pause * 2, 200_000)
            } catch {
                throw classify(error, path: path)
            }
        }
    }

    // MARK: Transactions

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction: all of it commits or none.
    /// A database busy with another process's write is waited for, never reported.
    public func write<T: Sendable>(_ body: (WriteContext) throws -> T) throws -> T {
        try connection.withLock { (db: inout SQLiteConnection) throws -> T in
            let conn = db
            try Records.withBusyRetry(path: path, limit: busyLimitSeconds) { () throws(SQLiteError) in
                try conn.execute("BEGIN IMMEDIATE")
            }
            do {
                let result = try body(WriteContext(db: conn, now: now()))
                try Records.withBusyRetry(path: path, limit: busyLimitSeconds) { () throws(SQLiteError) in
                    try conn.execute("COMMIT")
                }
                return result
            } catch {
                if conn.isInTransaction { try? conn.execute("ROLLBACK") }
                if let sqlite = error as? SQLiteError { throw Records.classify(sqlite, path: path) }
                throw error
            }
        }
    }

    /// Runs read-only queries on one consistent snapshot (one deferred transaction:
    /// another process's commit never shows up halfway through).
    public func read<T: Sendable>(_ body: (ReadContext) throws -> T) throws -> T {
        try connection.withLock { (db: inout SQLiteConnection) throws -> T in
            let conn = db
            do {
                try conn.query("BEGIN")
                defer { if conn.isInTransaction { _ = try? conn.query("COMMIT") } }
                return try body(ReadContext(db: conn))
            } catch let error as SQLiteError {
                throw Records.classify(error, path: path)
            }
        }
    }

    // MARK: Convenience

    public func install(_ modelId: String) throws -> InstallRecord? { try read { try $0.install(modelId) } }
    public func installs() throws -> [InstallRecord] { try read { try $0.installs() } }
    public func files(_ modelId: String) throws -> [FileRecord] { try read { try $0.files(modelId) } }
    public func history(modelId: String? = nil, limit: Int = 1000) throws -> [HistoryEvent] {
        try read { try $0.history(modelId: modelId, limit: limit) }
    }

    /// Appends one history event in its own transaction.
    public func append(_ kind: HistoryEvent.Kind, modelId: String?, detail: String? = nil) throws {
        try write { try $0.append(kind, modelId: modelId, detail: detail) }
    }

    /// `PRAGMA integrity_check`: "ok", or SQLite's list of problems.
    public func integrityCheck() throws -> String {
        try read { ctx in
            try ctx.db.query("PRAGMA integrity_check").compactMap { $0[0].string }.joined(separator: "; ")
        }
    }

    /// `PRAGMA journal_mode` as it is now.
    public func journalMode() throws -> String {
        try read { try $0.db.scalar("PRAGMA journal_mode").string ?? "" }
    }

    /// `PRAGMA user_version`.
    public func userVersion() throws -> Int {
        try read { Int(try $0.db.scalar("PRAGMA user_version").int64 ?? 0) }
    }
}

/// Queries available inside `Records.read`.
public struct ReadContext {
    let db: SQLiteConnection

    static let installColumns = "model_id, kind, state, catalog_version, path, total_bytes, created_at, updated_at, installed_at, last_error"

    static func decodeInstall(_ row: SQLiteRow) -> InstallRecord? {
        guard let id = row[0].string, let kind = row[1].string.flatMap(ModelKind.init(rawValue:)),
              let state = row[2].string.flatMap(InstallState.init(rawValue:)) else { return nil }
        return InstallRecord(modelId: id, kind: kind, state: state, catalogVersion: Int(row[3].int64 ?? 0),
                             path: row[4].string, totalBytes: row[5].int64 ?? 0,
                             createdAt: row[6].double ?? 0, updatedAt: row[7].double ?? 0,
                             installedAt: row[8].double, lastError: row[9].string)
    }

    public func install(_ modelId: String) throws -> InstallRecord? {
        try db.query("SELECT \(Self.installColumns) FROM installs WHERE model_id = ?", [.text(modelId)]).first.flatMap(Self.decodeInstall)
    }

    public func installs() throws -> [InstallRecord] {
        try db.query("SELECT \(Self.installColumns) FROM installs ORDER BY model_id").compactMap(Self.decodeInstall)
    }

    /// Every model's file rows, in one query (start-up repair checks them all).
    public func allFiles() throws -> [String: [FileRecord]] {
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

    public func files(_ modelId: String) throws -> [FileRecord] {
        try db.query("""
            SELECT path, size, sha256, etag, last_modified, bytes_present, verified_sha256
            FROM files WHERE model_id = ? ORDER BY path
            """, [.text(modelId)]).map { row in
            FileRecord(path: row[0].string ?? "", size: row[1].int64 ?? 0, sha256: row[2].string, etag: row[3].string,
                       lastModified: row[4].string, bytesPresent: row[5].int64 ?? 0, verifiedSha256: row[6].string)
        }
    }

    /// Newest last; `limit` keeps the newest events.
    public func history(modelId: String?, limit: Int) throws -> [HistoryEvent] {
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
    public func reservedBytes(excluding modelId: String? = nil) throws -> Int64 {
        // Summed here, saturating: SQLite's SUM fails on an overflow, and a damaged or
        // hostile database must not stop every download (P12).
        ExternalNumber.saturatingSum(try db.query("SELECT bytes FROM reservations WHERE model_id IS NOT ?",
                                                  [modelId.map { .text($0) } ?? .null]).map { $0[0].int64 ?? 0 })
    }

    public func reservations() throws -> [(modelId: String, pid: Int32, bytes: Int64)] {
        try db.query("SELECT model_id, pid, bytes FROM reservations ORDER BY model_id").map {
            ($0[0].string ?? "", Int32(truncatingIfNeeded: $0[1].int64 ?? 0), max(0, $0[2].int64 ?? 0))
        }
    }

    /// Resume state of a download in flight (validators for `If-Range`, bytes present).
    public func partialFiles(_ modelId: String) throws -> [FileRecord] {
        try db.query("SELECT path, size, etag, last_modified, bytes_present FROM partial_files WHERE model_id = ? ORDER BY path",
                     [.text(modelId)]).map { row in
            FileRecord(path: row[0].string ?? "", size: row[1].int64 ?? 0, sha256: nil, etag: row[2].string,
                       lastModified: row[3].string, bytesPresent: row[4].int64 ?? 0)
        }
    }

    /// The highest catalog version this store has accepted (0 when none).
    public func highestCatalogVersion() throws -> Int {
        Int(try db.scalar("SELECT value FROM meta WHERE key = 'catalogVersion'").int64 ?? 0)
    }
}

/// Statements available inside `Records.write` (reads too).
public struct WriteContext {
    let db: SQLiteConnection
    /// The transaction's timestamp.
    public let now: Double

    public var read: ReadContext { ReadContext(db: db) }

    /// Inserts or replaces a model's record (its files are kept unless replaced).
    public func upsert(_ r: InstallRecord) throws {
        try db.query("""
            INSERT INTO installs (model_id, kind, state, catalog_version, path, total_bytes, created_at, updated_at, installed_at, last_error)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(model_id) DO UPDATE SET kind = excluded.kind, state = excluded.state,
                catalog_version = excluded.catalog_version, path = excluded.path, total_bytes = excluded.total_bytes,
                updated_at = excluded.updated_at, installed_at = excluded.installed_at, last_error = excluded.last_error
            """, [.text(r.modelId), .text(r.kind.rawValue), .text(r.state.rawValue), .integer(Int64(r.catalogVersion)),
                  r.path.map { .text($0) } ?? .null, .integer(r.totalBytes), .real(r.createdAt), .real(r.updatedAt),
                  r.installedAt.map { .real($0) } ?? .null, r.lastError.map { .text($0) } ?? .null])
    }

    /// Replaces every file row of a model.
    public func setFiles(_ modelId: String, _ files: [FileRecord]) throws {
        try db.query("DELETE FROM files WHERE model_id = ?", [.text(modelId)])
        for f in files { try upsertFile(modelId, f) }
    }

    public func upsertFile(_ modelId: String, _ f: FileRecord) throws {
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
    public func deleteInstall(_ modelId: String) throws -> Bool {
        try db.query("DELETE FROM files WHERE model_id = ?", [.text(modelId)])
        try db.query("DELETE FROM installs WHERE model_id = ?", [.text(modelId)])
        return db.changes > 0
    }

    public func append(_ kind: HistoryEvent.Kind, modelId: String?, detail: String? = nil) throws {
        try db.query("INSERT INTO events (at, model_id, event, detail) VALUES (?, ?, ?, ?)",
                     [.real(now), modelId.map { .text($0) } ?? .null, .text(kind.rawValue), detail.map { .text($0) } ?? .null])
    }

    /// Reserves (or updates) the bytes a download of `modelId` still needs.
    public func reserve(_ modelId: String, bytes: Int64, pid: Int32) throws {
        try db.query("""
            INSERT INTO reservations (model_id, pid, bytes, created_at) VALUES (?, ?, ?, ?)
            ON CONFLICT(model_id) DO UPDATE SET pid = excluded.pid, bytes = excluded.bytes
            """, [.text(modelId), .integer(Int64(pid)), .integer(max(0, bytes)), .real(now)])
    }

    public func release(_ modelId: String) throws {
        try db.query("DELETE FROM reservations WHERE model_id = ?", [.text(modelId)])
    }

    /// Saves a file's resume state.
    public func upsertPartialFile(_ modelId: String, _ f: FileRecord) throws {
        try db.query("""
            INSERT INTO partial_files (model_id, path, size, etag, last_modified, bytes_present, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(model_id, path) DO UPDATE SET size = excluded.size, etag = excluded.etag,
                last_modified = excluded.last_modified, bytes_present = excluded.bytes_present, updated_at = excluded.updated_at
            """, [.text(modelId), .text(f.path), .integer(f.size), f.etag.map { .text($0) } ?? .null,
                  f.lastModified.map { .text($0) } ?? .null, .integer(f.bytesPresent), .real(now)])
    }

    public func clearPartialFiles(_ modelId: String) throws {
        try db.query("DELETE FROM partial_files WHERE model_id = ?", [.text(modelId)])
    }

    /// Records a catalog version as seen; it never goes down.
    public func noteCatalogVersion(_ version: Int) throws {
        try db.query("""
            INSERT INTO meta (key, value) VALUES ('catalogVersion', ?)
            ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)
            """, [.integer(Int64(version))])
    }
}
