import FoundationEssentials

/// The install records of one store, in `records.sqlite3`.
///
/// Thread-safe: one connection behind a lock (`Locked`). Several processes may open the same
/// file; WAL lets readers proceed while one writer writes, every write runs in
/// `BEGIN IMMEDIATE`, and a busy database is waited for and retried — `SQLITE_BUSY`
/// never reaches a caller (P9).
package final class Records: Sendable {
    /// The schema version this build writes (`PRAGMA user_version`).
    package static var schemaVersion: Int { migrations.count }
    /// The database file (`STORE/records.sqlite3`).
    package let path: String
    private let connection: Locked<SQLiteConnection>
    private let now: @Sendable () -> Double
    /// Longest total wait for another process's write lock.
    private let busyLimitSeconds: Double

    /// Opens (creating when asked) and migrates the records of a store.
    /// - Parameters:
    ///   - path: the database file (`STORE/records.sqlite3`).
    ///   - create: false opens an existing file read-write and fails if it is absent.
    ///   - busyLimitSeconds: the longest total wait for another process's write lock.
    ///   - now: the clock (seconds since 1970), a parameter for tests.
    ///   - whenCreated: what a database this call creates starts with (the engine's first
    ///     bookkeeping), written in the creation itself; not run when the file exists.
    package init(path: String, create: Bool = true, busyLimitSeconds: Double = 120,
                now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
                whenCreated: ((WriteContext) throws -> Void)? = nil) throws(RecordsError) {
        self.path = path
        self.now = now
        self.busyLimitSeconds = busyLimitSeconds
        // SQLITE_OPEN_NOFOLLOW guards the database file; its companions are checked here,
        // since SQLite opens them by name (P11: nothing outside the store is written).
        for file in [path, path + "-wal", path + "-shm", path + "-journal"] {
            if (try? FileIO.status(file))?.kind == .symbolicLink {
                throw RecordsError.symbolicLink(path: file)
            }
        }
        if create, path != ":memory:", !path.isEmpty, (try? FileIO.status(path) == nil) == true {
            // Absent: made whole beside its place and linked in (or another process's, made
            // meanwhile, is opened below). Anything that fails here falls back to creating it
            // in place, which reports the failure as it always did. (SQLite's names for a
            // database that is no file are left to SQLite.)
            _ = Records.createWhole(path: path, now: now, initial: whenCreated)
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
        connection = Locked(db)
    }

    static func classify(_ error: SQLiteError, path: String) -> RecordsError {
        if error.isCorruption { return .corrupt(path: path, detail: Records.shortDetail(error)) }
        if error.isDiskFull { return .diskFull(path: path) }
        if error.isReadOnly { return .readOnly(path: path) }
        if error.isUnavailable { return .unavailable(path: path, detail: Records.shortDetail(error)) }
        return .sqlite(error)
    }

    private static func shortDetail(_ error: SQLiteError) -> String {
        if let detail = error.message.afterLast(": ") { return detail }
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
        // 4: which source an install came from (`voice status` says it).
        """
        ALTER TABLE installs ADD COLUMN source TEXT;
        """,
        // 5: a switch of a model's folder in progress (an install's rename into place, a
        // delete), written before any file of it moves, so that start-up repair finishes or
        // undoes it (P15). `tree_device`/`tree_inode` name the verified tree an install puts
        // in place; the other columns are the install record it commits.
        """
        CREATE TABLE switches (
            model_id TEXT PRIMARY KEY,
            action TEXT NOT NULL CHECK (action IN ('install', 'delete')),
            tree_device INTEGER,
            tree_inode INTEGER,
            kind TEXT NOT NULL,
            catalog_version INTEGER NOT NULL,
            path TEXT NOT NULL,
            total_bytes INTEGER NOT NULL CHECK (total_bytes >= 0),
            created_at REAL NOT NULL,
            source TEXT,
            started_at REAL NOT NULL
        ) STRICT;
        CREATE TABLE switch_files (
            model_id TEXT NOT NULL REFERENCES switches(model_id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            size INTEGER NOT NULL CHECK (size >= 0),
            sha256 TEXT,
            etag TEXT,
            last_modified TEXT,
            verified_sha256 TEXT,
            PRIMARY KEY (model_id, path)
        ) STRICT, WITHOUT ROWID;
        """,
    ]

    /// A new database, built under a temporary name beside `path` with nothing synced (no
    /// one else can see it yet): WAL mode, every migration and `initial` in one transaction;
    /// then closed (SQLite checkpoints it and removes its `-wal`), fsynced and linked in as
    /// `path` (`FileIO.publishExclusively`: never over a database another process made
    /// meanwhile), the folder fsynced. A power cut leaves no database or a whole one (P15).
    /// Creating it in place took four rollback-journal syncs to enter WAL mode and three
    /// more for the migration, all before a download's first request; this takes two.
    /// - Returns: whether it is in place; false when another process's was there first,
    ///   or anything failed (the temporary files are removed).
    private static func createWhole(path: String, now: @Sendable () -> Double,
                                    initial: ((WriteContext) throws -> Void)?) -> Bool {
        guard let temporary = try? FileIO.createTemporaryFile(beside: path) else { return false }
        var linked = false
        defer {
            for leftover in (linked ? [] : [temporary]) + [temporary + "-wal", temporary + "-shm", temporary + "-journal"] {
                _ = try? FileIO.removeTree(leftover)
            }
        }
        do {
            // In a function of its own: the connection is closed when it returns.
            try build(temporary, now: now, initial: initial)
            // A test stops processes creating the same database here and releases them together.
            TestHooks.point("migrate")
            linked = try FileIO.publishExclusively(temporary, as: path)
            return linked
        } catch {
            return false
        }
    }

    private static func build(_ temporary: String, now: @Sendable () -> Double,
                              initial: ((WriteContext) throws -> Void)?) throws {
        let db = try SQLiteConnection(path: temporary, create: false, busyTimeoutMs: 5_000)
        try db.execute("PRAGMA synchronous=OFF")
        let mode = try db.scalar("PRAGMA journal_mode=WAL").string ?? ""
        guard mode.lowercased() == "wal" else { throw RecordsError.walUnavailable(path: temporary, journalMode: mode) }
        try db.execute("PRAGMA foreign_keys=ON")
        try db.execute("BEGIN IMMEDIATE")
        for (n, migration) in migrations.enumerated() {
            try db.execute(migration)
            try db.execute("PRAGMA user_version = \(n + 1)")
        }
        try initial?(WriteContext(db: db, now: now()))
        try db.execute("COMMIT")
    }

    private static func migrate(_ db: SQLiteConnection, path: String, busyLimitSeconds: Double) throws {
        let current = Int(try db.scalar("PRAGMA user_version").int64 ?? 0)
        if current > migrations.count {
            throw RecordsError.newerSchema(path: path, found: current, supported: migrations.count)
        }
        if current == migrations.count { return }
        // A test stops every process opening a new database here, each having read an old
        // version, and lets them race for the write lock together (RecordsTests).
        TestHooks.point("migrate")
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
        var pause: UInt32 = 2_000
        while true {
            do {
                return try body()
            } catch where error.isBusy {
                if Date().timeIntervalSince(start) > limit { throw RecordsError.busyTooLong(path: path, seconds: Int(limit)) }
                Threads.sleep(microseconds: pause)
                pause = min(pause * 2, 200_000)
            } catch {
                throw classify(error, path: path)
            }
        }
    }

    // MARK: Transactions

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction: all of it commits or none.
    /// A database busy with another process's write is waited for, never reported.
    /// `body` uses the context's statements, which throw `SQLiteError`; whatever it throws
    /// comes out as the records' one error type.
    package func write<T>(_ body: (WriteContext) throws -> T) throws(RecordsError) -> T {
        try connection.withLock { (db: inout SQLiteConnection) throws(RecordsError) -> T in
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
                throw Records.classify(any: error, path: path)
            }
        }
    }

    /// Runs read-only queries on one consistent snapshot (one deferred transaction:
    /// another process's commit never shows up halfway through).
    package func read<T>(_ body: (ReadContext) throws -> T) throws(RecordsError) -> T {
        try connection.withLock { (db: inout SQLiteConnection) throws(RecordsError) -> T in
            let conn = db
            do {
                _ = try conn.query("BEGIN")
                defer { if conn.isInTransaction { _ = try? conn.query("COMMIT") } }
                return try body(ReadContext(db: conn))
            } catch {
                throw Records.classify(any: error, path: path)
            }
        }
    }

    /// What a transaction's body threw, as the records' error: SQLite's classified, the
    /// records' own as they are. The contexts throw nothing else; anything else would be a
    /// body doing more than records work, reported with its description.
    static func classify(any error: any Error, path: String) -> RecordsError {
        switch error {
        case let failure as RecordsError: return failure
        case let sqlite as SQLiteError: return classify(sqlite, path: path)
        default: return .aborted(path: path, reason: String(describing: error))
        }
    }

    // MARK: Convenience

    /// The model's record, or nil, in a read transaction of its own.
    package func install(_ modelId: String) throws(RecordsError) -> InstallRecord? { try read { try $0.install(modelId) } }
    /// Every record, in a read transaction of its own.
    package func installs() throws(RecordsError) -> [InstallRecord] { try read { try $0.installs() } }
    /// The model's file rows, in a read transaction of its own.
    package func files(_ modelId: String) throws(RecordsError) -> [FileRecord] { try read { try $0.files(modelId) } }
    /// The newest `limit` events (of one model, or all), oldest first.
    package func history(modelId: String? = nil, limit: Int = 1000) throws(RecordsError) -> [HistoryEvent] {
        try read { try $0.history(modelId: modelId, limit: limit) }
    }

    /// Appends one history event in its own transaction.
    package func append(_ kind: HistoryEvent.Kind, modelId: String?, detail: String? = nil) throws(RecordsError) {
        try write { try $0.append(kind, modelId: modelId, detail: detail) }
    }

    /// `PRAGMA integrity_check`: "ok", or SQLite's list of problems.
    package func integrityCheck() throws(RecordsError) -> String {
        try read { ctx in
            try ctx.db.query("PRAGMA integrity_check").compactMap { $0[0].string }.joined(separator: "; ")
        }
    }

    /// `PRAGMA journal_mode` as it is now.
    package func journalMode() throws(RecordsError) -> String {
        try read { try $0.db.scalar("PRAGMA journal_mode").string ?? "" }
    }

    /// `PRAGMA user_version`.
    package func userVersion() throws(RecordsError) -> Int {
        try read { Int(try $0.db.scalar("PRAGMA user_version").int64 ?? 0) }
    }
}
