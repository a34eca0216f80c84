/// What `doctor` reports about a store's records database: SQLite's own checks and what the
/// records hold. A value, so the command never holds the records itself.
package struct RecordsHealth: Sendable, Equatable {
    /// `PRAGMA integrity_check`: "ok", or SQLite's list of problems.
    package var integrityCheck: String
    /// `PRAGMA journal_mode` (the store needs `wal`).
    package var journalMode: String
    /// `PRAGMA user_version`: the schema the records were migrated to.
    package var schemaVersion: Int
    /// How many installs are recorded (installed and partial).
    package var installs: Int
    /// The highest catalog version the store has accepted (P7's floor).
    package var storeCatalogVersion: Int

    /// Healthy: SQLite finds no damage and the journal is WAL.
    package var isHealthy: Bool { integrityCheck == "ok" && journalMode == "wal" }
}

extension LocalModelEngine {
    /// Opens the store (see `open()`) and reads the records' health. Reads only.
    package func recordsHealth() throws(LocalModelError) -> RecordsHealth {
        let records = try open().records
        do {
            return RecordsHealth(integrityCheck: try records.integrityCheck(), journalMode: try records.journalMode(),
                                 schemaVersion: try records.userVersion(), installs: try records.installs().count,
                                 storeCatalogVersion: try records.read { try $0.highestCatalogVersion() })
        } catch {
            throw .records(error)
        }
    }

    /// The highest catalog version the store at `root` has accepted, or nil when it has no
    /// records yet. Creates nothing and repairs nothing (`catalog validate` asks it of any
    /// store, without making an engine).
    package static func recordedCatalogVersion(storeRoot root: String) throws(LocalModelError) -> Int? {
        let layout = StoreLayout(root: root)
        guard FileIO.exists(layout.recordsPath) else { return nil }
        do {
            return try Records(path: layout.recordsPath, create: false).read { try $0.highestCatalogVersion() }
        } catch {
            throw .records(error)
        }
    }

    /// The SQLite library's version, as `doctor` names the libraries it uses.
    package static var sqliteVersion: String { SQLiteConnection.libraryVersion }
}
