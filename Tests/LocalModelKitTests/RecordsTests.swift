// The records database (docs/ARCHITECTURE.md, "The store"; P1/P9):
// migrations, WAL, damaged and foreign files, transactions, the append-only history,
// reservations, and several real processes writing at once.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

@Suite("Records", .ownThreads, .networkGuard)
struct RecordsTests {
    typealias S = StoreTestSupport

    static let tables = ["installs", "files", "events", "reservations", "meta"]

    /// Names of the schema objects of a database file, read through a raw connection.
    static func schemaNames(_ path: String, type: String) throws -> Set<String> {
        let db = try SQLiteConnection(path: path, create: false, readOnly: true)
        return Set(try db.query("SELECT name FROM sqlite_master WHERE type = ?", [.text(type)]).compactMap { $0[0].string })
    }

    /// Deterministic bytes that are not a SQLite header.
    static func garbage(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    static func expectCorrupt(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = #expect(throws: RecordsError.self, sourceLocation: sourceLocation) { _ = try Records(path: path) }
        guard let error else { return }
        guard case .corrupt(let reported, _) = error else {
            Issue.record("expected .corrupt for \(path), got \(error)", sourceLocation: sourceLocation)
            return
        }
        #expect(reported == path, sourceLocation: sourceLocation)
        // The message names the file and says how to recover.
        #expect(error.description.contains(path), sourceLocation: sourceLocation)
        #expect(error.description.contains(RecordsRecovery.moveAsideCommand(recordsPath: path)), sourceLocation: sourceLocation)
        #expect(error.description.contains("mv '\(path)'* "), "the -wal and -shm files move with it", sourceLocation: sourceLocation)
        #expect(error.description.contains("glasses-local doctor"), sourceLocation: sourceLocation)
    }

    // MARK: Migrations and WAL

    @Test("a new database is migrated to the current schema, in WAL mode")
    func migratesNewFile() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let records = try Records(path: path)
            #expect(FileIO.exists(path))
            #expect(try records.userVersion() == Records.schemaVersion)
            #expect(try records.journalMode() == "wal")
            #expect(try records.integrityCheck() == "ok")
            let tables = try Self.schemaNames(path, type: "table")
            for table in Self.tables { #expect(tables.contains(table), "table \(table) missing: \(tables)") }
            let triggers = try Self.schemaNames(path, type: "trigger")
            #expect(triggers == ["events_no_update", "events_no_delete"])
            #expect(try records.installs().isEmpty)
            #expect(try records.history().isEmpty)
        }
    }

    @Test("an empty (zero-byte) file is migrated like a new one")
    func migratesZeroByteFile() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            try S.writeFile(path, [])
            let records = try Records(path: path, create: false)
            #expect(try records.userVersion() == Records.schemaVersion)
            #expect(try records.journalMode() == "wal")
            let tables = try Self.schemaNames(path, type: "table")
            #expect(Set(Self.tables).isSubset(of: tables))
        }
    }

    /// The schema as the first release wrote it (`user_version` 1), kept verbatim: a store
    /// created then must open with everything the current build uses.
    static let firstReleaseSchema = """
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
        """

    /// "table.column" for every column, plus every index and trigger name.
    static func schemaShape(_ path: String) throws -> [String] {
        let db = try SQLiteConnection(path: path, create: false, readOnly: true)
        let columns = try db.query("""
            SELECT m.name || '.' || p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
            WHERE m.type = 'table' ORDER BY 1
            """).compactMap { $0[0].string }
        let others = try db.query("SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'trigger') AND name NOT LIKE 'sqlite_%' ORDER BY 1")
            .compactMap { $0[0].string }
        return columns + others
    }

    @Test("a store written by the first release (schema 1) is upgraded to exactly the schema of a new one, data kept")
    func upgradesFirstReleaseStore() throws {
        try S.withTempDir { dir in
            let old = dir + "/old.sqlite3"
            do {
                let db = try SQLiteConnection(path: old, create: true)
                try db.execute(Self.firstReleaseSchema)
                try db.execute("PRAGMA user_version = 1")
                try db.execute("""
                    INSERT INTO installs VALUES ('kept', 'llm', 'installed', 1, '/x/kept', 42, 1, 2, 2, NULL);
                    INSERT INTO events (at, model_id, event, detail) VALUES (1, 'kept', 'completed', NULL);
                    INSERT INTO meta VALUES ('catalogVersion', 4);
                    """)
            }
            let upgraded = try Records(path: old)
            let fresh = try Records(path: dir + "/new.sqlite3")
            #expect(try upgraded.userVersion() == Records.schemaVersion)
            let upgradedShape = try Self.schemaShape(old)
            let freshShape = try Self.schemaShape(dir + "/new.sqlite3")
            #expect(upgradedShape == freshShape,
                    """
                    a store created by the first release lacks \(Set(freshShape).subtracting(upgradedShape).sorted()) \
                    (and has extra \(Set(upgradedShape).subtracting(freshShape).sorted())) after opening: \
                    was a shipped migration edited in place instead of appending a new one?
                    """)
            #expect(try upgraded.install("kept")?.totalBytes == 42)
            #expect(try upgraded.install("kept")?.path == "kept", "migration 3 makes the absolute install folder relative to the store")
            #expect(try upgraded.history().count == 1)
            #expect(try upgraded.read { try $0.highestCatalogVersion() } == 4)
            #expect(try fresh.installs().isEmpty)
        }
    }

    @Test("reopening keeps every record, file row, event, reservation and the catalog version")
    func reopenKeepsData() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let record = InstallRecord(modelId: "qwen-0.5b", kind: .llm, state: .installed, catalogVersion: 3,
                                       path: dir + "/qwen-0.5b", totalBytes: 1234, createdAt: 10, updatedAt: 20,
                                       installedAt: 20, lastError: nil)
            let file = FileRecord(path: "model.gguf", size: 1234, sha256: S.fakeHash, etag: "\"e1\"",
                                  lastModified: "Tue, 01 Jan 2025 00:00:00 GMT", bytesPresent: 1234, verifiedSha256: S.fakeHash)
            do {
                let records = try Records(path: path, now: { 100 })
                try records.write { ctx in
                    try ctx.upsert(record)
                    try ctx.setFiles(record.modelId, [file])
                    try ctx.append(.completed, modelId: record.modelId, detail: "installed")
                    try ctx.reserve("other", bytes: 777, pid: 4242)
                    try ctx.noteCatalogVersion(3)
                }
            }
            let reopened = try Records(path: path)
            #expect(try reopened.userVersion() == Records.schemaVersion)
            #expect(try reopened.journalMode() == "wal")
            #expect(try reopened.install("qwen-0.5b") == record)
            #expect(try reopened.installs() == [record])
            #expect(try reopened.files("qwen-0.5b") == [file])
            let history = try reopened.history()
            #expect(history.count == 1)
            #expect(history.first?.kind == "completed")
            #expect(history.first?.modelId == "qwen-0.5b")
            #expect(history.first?.detail == "installed")
            #expect(history.first?.at == 100)
            let reservations = try reopened.read { try $0.reservations() }
            #expect(reservations.count == 1)
            #expect(reservations.first?.modelId == "other")
            #expect(reservations.first?.bytes == 777)
            #expect(reservations.first?.pid == 4242)
            #expect(try reopened.read { try $0.highestCatalogVersion() } == 3)
        }
    }

    @Test("a filesystem without WAL support is refused with .walUnavailable, not used in another journal mode")
    func walRefusalIsReported() {
        // An in-memory database answers "memory" to journal_mode=WAL, like NFS answers "delete".
        let error = #expect(throws: RecordsError.self) { _ = try Records(path: ":memory:") }
        #expect(error == .walUnavailable(path: ":memory:", journalMode: "memory"))
        #expect(error?.description.contains("local disk") == true)
    }

    // MARK: Damaged and foreign files

    @Test("a file of garbage is reported as .corrupt with the path and the recovery step, and left untouched")
    func garbageFileIsCorrupt() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let bytes = Self.garbage(64 * 1024)
            try S.writeFile(path, bytes)
            Self.expectCorrupt(path)
            #expect(try S.readFile(path) == bytes, "the damaged file must be kept as it was for the user to inspect")
        }
    }

    @Test("the move-aside line of the recovery advice works in /bin/sh, even for a store path with a quote and spaces")
    func moveAsideCommandRunsInShell() throws {
        try S.withTempDir { dir in
            let store = dir + "/it's a \"store\" $HOME"
            let path = store + "/records.sqlite3"
            for suffix in ["", "-wal", "-shm"] { try S.writeFile(path + suffix, [0x5A]) }
            try S.writeFile(store + "/m1/weights.bin", [1])
            let shell = Subprocess()
            shell.executableURL = URL(fileURLWithPath: "/bin/sh")
            shell.arguments = ["-c", RecordsRecovery.moveAsideCommand(recordsPath: path)]
            try SpawnGate.spawn { try shell.run() }
            shell.waitUntilExit()
            #expect(shell.terminationStatus == 0)
            for suffix in ["", "-wal", "-shm"] {
                #expect(!FileIO.exists(path + suffix))
                #expect(try S.readFile(store + "/Damaged-records/records.sqlite3" + suffix) == [0x5A])
            }
            #expect(FileIO.exists(store + "/m1/weights.bin"), "nothing else moves")
        }
    }

    enum ForeignFile: String, CaseIterable {
        case text, zeros, truncatedHeader, pageOfHeaderThenZeros

        var bytes: [UInt8] {
            switch self {
            case .text: return Array("not a database\n".utf8)
            case .zeros: return [UInt8](repeating: 0, count: 4096)
            case .truncatedHeader: return Array("SQLite format".utf8)
            case .pageOfHeaderThenZeros: return Array("SQLite format 3\0".utf8) + [UInt8](repeating: 0xFF, count: 84)
            }
        }
    }

    // (A one-byte file is treated by SQLite itself as an empty database; not tested here.)
    @Test("a small file that is not a database is reported as .corrupt", arguments: ForeignFile.allCases)
    func shortForeignFileIsCorrupt(kind: ForeignFile) throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let bytes = kind.bytes
            try S.writeFile(path, bytes)
            Self.expectCorrupt(path)
            #expect(try S.readFile(path) == bytes, "the file must be left as it was")
        }
    }

    @Test("a valid SQLite header followed by garbage pages is reported as .corrupt")
    func validHeaderGarbagePagesIsCorrupt() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            do {
                let records = try Records(path: path)
                try records.write { ctx in
                    try ctx.upsert(InstallRecord(modelId: "m", kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                                 totalBytes: 1, createdAt: 1, updatedAt: 1))
                    try ctx.append(.started, modelId: "m")
                }
            } // closing the last connection checkpoints the WAL into the main file
            // The WAL is checkpointed into the main file on close and kept, empty (persistent
            // WAL, so a full disk can still open the store).
            #expect((FileIO.regularFileSize(path + "-wal") ?? 0) == 0, "the WAL should be checkpointed (and emptied) on close")
            let original = try S.readFile(path)
            #expect(original.count >= 4096)
            #expect(Array(original.prefix(16)) == Array("SQLite format 3\0".utf8))
            let damaged = Array(original.prefix(100)) + Self.garbage(original.count - 100, seed: 7)
            try S.writeFile(path, damaged)
            Self.expectCorrupt(path)
        }
    }

    @Test("damaged table pages behind an intact first page surface as .corrupt on read, never as a crash")
    func damagedTablePagesAreCorruptOnRead() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            do {
                let records = try Records(path: path)
                try records.write { ctx in
                    for n in 0..<50 {
                        try ctx.upsert(InstallRecord(modelId: "model-\(n)", kind: .llm, state: .partial, catalogVersion: 1,
                                                     path: nil, totalBytes: Int64(n), createdAt: 1, updatedAt: 1))
                    }
                }
            }
            let original = try S.readFile(path)
            let pageSize = 4096
            #expect(original.count > pageSize * 2)
            try S.writeFile(path, Array(original.prefix(pageSize)) + Self.garbage(original.count - pageSize, seed: 11))
            // Opening may or may not notice (only page 1 is read); reading the tables must.
            let records: Records
            do {
                records = try Records(path: path)
            } catch let error as RecordsError {
                if case .corrupt(let reported, _) = error {
                    #expect(reported == path)
                } else {
                    Issue.record("expected .corrupt when opening damaged pages, got \(error)")
                }
                return
            }
            let error = #expect(throws: RecordsError.self) { _ = try records.installs() }
            if let error, case .corrupt(let reported, _) = error {
                #expect(reported == path)
            } else {
                Issue.record("expected .corrupt when reading damaged pages, got \(String(describing: error))")
            }
            // integrity_check either lists the damage or fails as .corrupt; it never says "ok".
            do {
                #expect(try records.integrityCheck() != "ok")
            } catch let error as RecordsError {
                guard case .corrupt = error else { Issue.record("unexpected \(error)"); return }
            }
        }
    }

    @Test("a database written by a newer schema is refused with .newerSchema and not downgraded")
    func newerSchemaIsRefused() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            do {
                let db = try SQLiteConnection(path: path, create: true)
                try db.execute("CREATE TABLE future (x INTEGER); PRAGMA user_version = 99;")
            }
            let error = #expect(throws: RecordsError.self) { _ = try Records(path: path) }
            #expect(error == .newerSchema(path: path, found: 99, supported: Records.schemaVersion))
            #expect(error?.description.contains(path) == true)
            #expect(error?.description.contains("Update glasses-local") == true)
            let db = try SQLiteConnection(path: path, create: false, readOnly: true)
            #expect(try db.scalar("PRAGMA user_version").int64 == 99)
            #expect(try Self.schemaNames(path, type: "table") == ["future"], "nothing of ours may be written into it")
        }
    }

    @Test("a location that cannot hold a file is reported as .unavailable with the path")
    func unwritableLocationIsUnavailable() throws {
        try S.withTempDir { dir in
            // Tests run as root, so permissions do not stop us: put the database under a regular file.
            try S.writeFile(dir + "/afile", Array("x".utf8))
            try FileIO.createDirectory(dir + "/adir")
            for path in [dir + "/afile/records.sqlite3", dir + "/missing/folder/records.sqlite3", dir + "/adir"] {
                let error = #expect(throws: RecordsError.self) { _ = try Records(path: path) }
                guard let error, case .unavailable(let reported, _) = error else {
                    Issue.record("expected .unavailable for \(path), got \(String(describing: error))")
                    continue
                }
                #expect(reported == path)
                #expect(error.description.contains(path))
                #expect(error.description.contains("--store"))
            }
        }
    }

    @Test("create: false on a missing file is .unavailable and creates nothing")
    func openWithoutCreateDoesNotCreate() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let error = #expect(throws: RecordsError.self) { _ = try Records(path: path, create: false) }
            guard let error, case .unavailable = error else {
                Issue.record("expected .unavailable, got \(String(describing: error))")
                return
            }
            #expect(!FileIO.exists(path))
        }
    }

    // MARK: Transactions

    struct Boom: Error, Equatable {}

    @Test("a write whose body throws rolls back every statement, and the connection stays usable")
    func writeRollsBack() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let records = try Records(path: path)
            try records.write { try $0.noteCatalogVersion(2) }
            let thrown = #expect(throws: RecordsError.self) {
                try records.write { ctx -> Int in
                    try ctx.upsert(InstallRecord(modelId: "m", kind: .llm, state: .installed, catalogVersion: 9, path: "/x",
                                                 totalBytes: 5, createdAt: 1, updatedAt: 1))
                    try ctx.setFiles("m", [FileRecord(path: "a", size: 5, sha256: nil, bytesPresent: 5)])
                    try ctx.append(.completed, modelId: "m")
                    try ctx.reserve("m", bytes: 100, pid: 1)
                    try ctx.noteCatalogVersion(9)
                    // Visible inside the transaction…
                    #expect(try ctx.read.install("m") != nil)
                    throw Boom()
                }
            }
            // The body's own error comes out as the records' one error type, naming it.
            if case .aborted(_, let reason)? = thrown { #expect(reason.contains("Boom")) } else { Issue.record("\(String(describing: thrown))") }
            // …and gone after it, also for another connection.
            let other = try Records(path: path)
            for r in [records, other] {
                #expect(try r.install("m") == nil)
                #expect(try r.files("m").isEmpty)
                #expect(try r.history().isEmpty)
                #expect(try r.read { try $0.reservations() }.isEmpty)
                #expect(try r.read { try $0.highestCatalogVersion() } == 2)
            }
            // The failed transaction left nothing open: the next write commits for everyone.
            try records.append(.verified, modelId: "m")
            #expect(try other.history().map(\.kind) == ["verified"])
        }
    }

    @Test("a SQLite failure in the middle of a write undoes the statements before it")
    func constraintFailureRollsBack() throws {
        try S.withTempDir { dir in
            let records = try Records(path: dir + "/records.sqlite3")
            #expect(throws: (any Error).self) {
                try records.write { ctx in
                    try ctx.upsert(InstallRecord(modelId: "m", kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                                 totalBytes: 5, createdAt: 1, updatedAt: 1))
                    try ctx.append(.started, modelId: "m")
                    // bytes_present > size violates the table's CHECK.
                    try ctx.upsertFile("m", FileRecord(path: "a", size: 5, sha256: nil, bytesPresent: 6))
                }
            }
            #expect(try records.install("m") == nil)
            #expect(try records.history().isEmpty)
        }
    }

    @Test("read() sees one consistent snapshot while another connection commits")
    func readIsOneSnapshot() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let reader = try Records(path: path)
            let writer = try Records(path: path)
            try writer.write { ctx in
                try ctx.upsert(InstallRecord(modelId: "a", kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                             totalBytes: 1, createdAt: 1, updatedAt: 1))
            }
            let counts = try reader.read { ctx -> [Int] in
                let first = try ctx.installs().count
                // Another process finishes a write between two queries of the same read.
                try writer.write { w in
                    try w.upsert(InstallRecord(modelId: "b", kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                               totalBytes: 1, createdAt: 1, updatedAt: 1))
                }
                let second = try ctx.installs().count
                return [first, second]
            }
            #expect(counts == [1, 1], "the two queries of one read() saw different states of the database")
            #expect(try reader.installs().count == 2, "after the read, the new row is visible")
        }
    }

    // MARK: History, catalog version, reservations

    @Test("the history is append-only: UPDATE and DELETE through a raw connection fail")
    func historyIsAppendOnly() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let records = try Records(path: path)
            try records.append(.started, modelId: "m", detail: "first")
            try records.append(.failed, modelId: "m", detail: "second")
            let before = try records.history()
            let raw = try SQLiteConnection(path: path, create: false)
            for sql in ["UPDATE events SET detail = 'rewritten'", "DELETE FROM events", "DELETE FROM events WHERE id = 1"] {
                let error = #expect(throws: SQLiteError.self) { try raw.execute(sql) }
                #expect(error?.message.contains("history is append-only") == true, "\(sql): \(String(describing: error))")
            }
            #expect(try records.history() == before)
            #expect(before.map(\.detail) == ["first", "second"])
            // Deleting a model's record keeps its history.
            try records.write { ctx in
                try ctx.upsert(InstallRecord(modelId: "m", kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                             totalBytes: 0, createdAt: 1, updatedAt: 1))
                try ctx.deleteInstall("m")
            }
            #expect(try records.history(modelId: "m").count == 2)
        }
    }

    @Test("history(limit:) keeps the newest events, newest last")
    func historyLimitKeepsNewest() throws {
        try S.withTempDir { dir in
            let records = try Records(path: dir + "/records.sqlite3")
            for n in 0..<10 { try records.append(.resumed, modelId: n.isMultiple(of: 2) ? "a" : "b", detail: "\(n)") }
            #expect(try records.history(limit: 3).map(\.detail) == ["7", "8", "9"])
            #expect(try records.history(modelId: "a", limit: 2).map(\.detail) == ["6", "8"])
        }
    }

    @Test("the recorded catalog version never goes down")
    func catalogVersionNeverGoesDown() throws {
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let records = try Records(path: path)
            #expect(try records.read { try $0.highestCatalogVersion() } == 0)
            for (note, expected) in [(3, 3), (7, 7), (5, 7), (0, 7), (-1, 7), (8, 8)] {
                try records.write { try $0.noteCatalogVersion(note) }
                #expect(try records.read { try $0.highestCatalogVersion() } == expected, "after noting \(note)")
            }
            #expect(try Records(path: path).read { try $0.highestCatalogVersion() } == 8)
        }
    }

    @Test("reserved bytes sum every download in flight except the one asked about")
    func reservationsSumExcludingModel() throws {
        try S.withTempDir { dir in
            let records = try Records(path: dir + "/records.sqlite3")
            try records.write { ctx in
                try ctx.reserve("a", bytes: 100, pid: 1)
                try ctx.reserve("b", bytes: 200, pid: 2)
                try ctx.reserve("c", bytes: 300, pid: 3)
            }
            #expect(try records.read { try $0.reservedBytes() } == 600)
            #expect(try records.read { try $0.reservedBytes(excluding: "b") } == 400)
            #expect(try records.read { try $0.reservedBytes(excluding: "unknown") } == 600)
            // Reserving again updates, never adds a second row.
            try records.write { try $0.reserve("a", bytes: 50, pid: 9) }
            #expect(try records.read { try $0.reservedBytes(excluding: "c") } == 250)
            #expect(try records.read { try $0.reservations() }.first { $0.modelId == "a" }?.pid == 9)
            // A negative remainder reserves nothing rather than giving space back.
            try records.write { try $0.reserve("c", bytes: -10, pid: 3) }
            #expect(try records.read { try $0.reservedBytes() } == 250)
            try records.write { try $0.release("a") }
            #expect(try records.read { try $0.reservedBytes() } == 200)
            #expect(try records.read { try $0.reservations() }.map(\.modelId) == ["b", "c"])
        }
    }

    // MARK: Several processes at once (P9)

    static func launchStress(_ binary: String, path: String, prefix: String, iterations: Int,
                             pauseAt: String? = nil) throws -> (Subprocess, Pipe, Pipe) {
        let process = Subprocess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = [path, prefix, "\(iterations)"]
        if let pauseAt {
            var environment = ProcessInfo.processInfo.environment
            environment["GLASSES_LOCAL_TEST_HOOK"] = "pause@" + pauseAt
            process.environment = environment
        }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try SpawnGate.spawn { try process.run() }
        return (process, out, err)
    }

    static func finish(_ launched: [(Subprocess, Pipe, Pipe)]) -> [(status: Int32, stdout: String, stderr: String)] {
        launched.map { process, out, err in
            let o = out.fileHandleForReading.readDataToEndOfFile()
            let e = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let status = process.terminationReason == .exit ? process.terminationStatus : -process.terminationStatus
            return (status, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
        }
    }

    static func count(_ db: SQLiteConnection, _ sql: String) throws -> Int64 {
        try db.scalar(sql).int64 ?? -1
    }

    @Test("three processes and this one writing at once never see SQLITE_BUSY; nothing is lost; integrity is ok")
    func concurrentProcessesNeverSeeBusy() throws {
        let binary = try S.recordsStressBinary()
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let records = try Records(path: path)
            let iterations = 300
            let prefixes = ["p0", "p1", "p2"]
            let launched = try prefixes.map { try Self.launchStress(binary, path: path, prefix: $0, iterations: iterations) }
            // This process writes at the same time.
            var ownWrites = 0
            var ownErrors: [String] = []
            for n in 0..<iterations {
                do {
                    try records.write { ctx in
                        try ctx.append(.verified, modelId: "main-\(n % 5)", detail: "main \(n)")
                        try ctx.reserve("main-\(n % 5)", bytes: Int64(n), pid: getpid())
                    }
                    ownWrites += 1
                } catch {
                    ownErrors.append("\(error)")
                }
            }
            let results = Self.finish(launched)
            for (prefix, result) in zip(prefixes, results) {
                #expect(result.status == 0, "records-stress \(prefix) failed: \(result.stderr)")
                #expect(result.stdout.contains("ok \(iterations)"), "records-stress \(prefix): \(result.stdout)")
                #expect(!result.stderr.lowercased().contains("busy") && !result.stderr.lowercased().contains("locked"),
                        "\(result.stderr)")
            }
            #expect(ownErrors.isEmpty, "\(ownErrors.prefix(3))")
            #expect(ownWrites == iterations)

            let raw = try SQLiteConnection(path: path, create: false, readOnly: true)
            #expect(try Self.count(raw, "SELECT COUNT(*) FROM events") == Int64(iterations * (prefixes.count + 1)))
            for prefix in prefixes {
                #expect(try Self.count(raw, "SELECT COUNT(*) FROM events WHERE model_id LIKE '\(prefix)-%'") == Int64(iterations))
                #expect(try Self.count(raw, "SELECT COUNT(*) FROM installs WHERE model_id LIKE '\(prefix)-%'") == 7)
                #expect(try Self.count(raw, "SELECT COUNT(*) FROM reservations WHERE model_id LIKE '\(prefix)-%'") == 7)
            }
            #expect(try Self.count(raw, "SELECT COUNT(*) FROM events WHERE model_id LIKE 'main-%'") == Int64(iterations))
            #expect(try records.history(limit: 100_000).count == iterations * (prefixes.count + 1))
            #expect(try records.integrityCheck() == "ok")
            #expect(try records.journalMode() == "wal")
        }
    }

    /// The state letter of /proc/<pid>/stat ("T" when stopped).
    static func processState(_ pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ").first.map(String.init)
    }

    /// Every schema object (type, name, SQL) and the schema cookie, which SQLite bumps at
    /// each change of the schema: equal for two files when each was migrated the same way.
    static func schemaFacts(_ path: String) throws -> (objects: [String], cookie: Int64, userVersion: Int64) {
        let db = try SQLiteConnection(path: path, create: false, readOnly: true)
        let objects = try db.query("SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema ORDER BY type, name")
            .compactMap { $0[0].string }
        return (objects, try db.scalar("PRAGMA schema_version").int64 ?? -1, try db.scalar("PRAGMA user_version").int64 ?? -1)
    }

    @Test("four processes creating and migrating the same new database at once all succeed, and it is migrated once")
    func concurrentCreationMigratesOnce() throws {
        let binary = try S.recordsStressBinary()
        try S.withTempDir { dir in
            let path = dir + "/records.sqlite3"
            let iterations = 100
            let prefixes = ["q0", "q1", "q2", "q3"]
            // Each process stops at the hook `migrate`, having read the version of a database
            // nobody has migrated yet; once all four are stopped they are released together,
            // so every one of them goes for the write lock believing it must migrate. One
            // does; the other three must find, inside the lock, that it is done.
            let launched = try prefixes.map {
                try Self.launchStress(binary, path: path, prefix: $0, iterations: iterations, pauseAt: "migrate")
            }
            var stopped: [Bool] = []
            for (process, _, _) in launched {
                _ = S.waitUntil(seconds: 60) { Self.processState(process.processIdentifier) == "T" || !process.isRunning }
                stopped.append(Self.processState(process.processIdentifier) == "T")
            }
            for (process, _, _) in launched { kill(process.processIdentifier, SIGCONT) }
            let results = Self.finish(launched)
            #expect(stopped == [true, true, true, true], "every process stopped before migrating: \(results.map(\.stderr))")
            for (prefix, result) in zip(prefixes, results) {
                #expect(result.status == 0, "records-stress \(prefix) failed: \(result.stderr)")
                #expect(result.stderr.contains("PAUSE migrate"), "\(prefix) reached the migration: \(result.stderr)")
                #expect(result.stdout.contains("ok \(iterations)"), "records-stress \(prefix): \(result.stdout)")
            }
            // Once: the file is exactly what one process migrating alone leaves (the same
            // schema objects, and the same number of schema changes).
            let reference = dir + "/reference.sqlite3"
            _ = try Records(path: reference)
            let alone = try Self.schemaFacts(reference)
            let raced = try Self.schemaFacts(path)
            #expect(raced.objects == alone.objects, "\(raced.objects)")
            #expect(raced.cookie == alone.cookie, "schema changes: \(raced.cookie) racing, \(alone.cookie) alone")
            #expect(raced.userVersion == Int64(Records.schemaVersion))

            let records = try Records(path: path)
            #expect(try records.userVersion() == Records.schemaVersion)
            #expect(try records.history(limit: 100_000).count == iterations * prefixes.count)
            #expect(try records.installs().count == 7 * prefixes.count)
            #expect(try records.integrityCheck() == "ok")
        }
    }
}
