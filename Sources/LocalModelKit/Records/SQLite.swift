// The only Swift file that touches SQLite. A deliberately small wrapper: a connection,
// prepared statements with typed binding, and errors that carry SQLite's own message
// plus what was being attempted. https://sqlite.org/c3ref/intro.html
internal import CSQLite

/// A SQLite failure: the result code, SQLite's message and what was being attempted.
package struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code.
    package var code: Int32
    /// SQLite's message with what was being attempted ("open records database at …: …").
    package var message: String
    /// The ``message``.
    package var description: String { message }

    /// The database file is not a database, or is damaged.
    package var isCorruption: Bool {
        let primary = code & 0xFF
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }

    /// The disk (or quota) is full.
    package var isDiskFull: Bool { code & 0xFF == SQLITE_FULL }

    /// Another connection holds a lock (SQLITE_BUSY or SQLITE_LOCKED) past the busy timeout.
    package var isBusy: Bool {
        let primary = code & 0xFF
        return primary == SQLITE_BUSY || primary == SQLITE_LOCKED
    }

    /// The database is read-only for this connection (SQLITE_READONLY): the file's
    /// permissions, a read-only filesystem, or a read-only open.
    package var isReadOnly: Bool { code & 0xFF == SQLITE_READONLY }

    /// The database cannot be opened or used as it stands, without being damaged:
    /// SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR or SQLITE_AUTH.
    package var isUnavailable: Bool {
        let primary = code & 0xFF
        return [SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_AUTH].contains(primary)
    }
}

/// A value read from or bound to a statement.
package enum SQLiteValue: Sendable, Equatable {
    /// SQL `NULL`.
    case null
    /// An `INTEGER`.
    case integer(Int64)
    /// A `REAL`.
    case real(Double)
    /// A `TEXT` (UTF-8).
    case text(String)

    /// The integer, or nil for any other kind of value.
    package var int64: Int64? { if case .integer(let i) = self { return i }; return nil }
    /// The text, or nil for any other kind of value.
    package var string: String? { if case .text(let s) = self { return s }; return nil }
    /// The real, or an integer as a `Double`; nil otherwise.
    package var double: Double? {
        switch self {
        case .real(let d): return d
        case .integer(let i): return Double(i)
        default: return nil
        }
    }
}

/// One row of a result, by column index.
package struct SQLiteRow: Sendable {
    /// The columns, in the query's order.
    package var values: [SQLiteValue]
    /// The value of column `i` (from 0); a bad index is a bug and traps.
    package subscript(_ i: Int) -> SQLiteValue { values[i] }
}

// SQLite asks for a destructor; -1 tells it to copy the bytes (GRDB, SwiftPM).
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not Sendable: confine it to one thread, actor or lock.
package final class SQLiteConnection {
    private let handle: OpaquePointer
    /// Prepared statements by SQL text: start-up runs the same few queries many times, and
    /// preparing costs more than running them. Bounded; cleared when full.
    private var statements: [String: OpaquePointer] = [:]
    private static let maxCachedStatements = 64
    /// The file this connection opened, for messages.
    package let path: String

    /// Opens (creating if asked) a database file.
    /// - Parameters:
    ///   - path: the database file (a link is refused: `SQLITE_OPEN_NOFOLLOW`).
    ///   - create: create the file when it is absent.
    ///   - readOnly: open it read-only (a store this user may read but not write).
    ///   - busyTimeoutMs: how long a writer waits for another process's lock before SQLite
    ///     gives up; callers retry beyond that, so users never see BUSY.
    package init(path: String, create: Bool, readOnly: Bool = false, busyTimeoutMs: Int32 = 10_000) throws(SQLiteError) {
        self.path = path
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            if let db { sqlite3_close_v2(db) }
            throw SQLiteError(code: rc, message: "open records database \(path): \(message)")
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        sqlite3_busy_timeout(db, busyTimeoutMs)
    }

    deinit {
        for stmt in statements.values { sqlite3_finalize(stmt) }
        sqlite3_close_v2(handle)
    }

    /// A prepared statement for `sql`, from the cache or newly prepared (and cached).
    private func statement(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let stmt = statements[sql] { return stmt }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, "prepare \(sql.prefix(60))") }
        if statements.count >= Self.maxCachedStatements {
            for old in statements.values { sqlite3_finalize(old) }
            statements.removeAll(keepingCapacity: true)
        }
        statements[sql] = stmt
        return stmt
    }

    /// Builds an error from the connection's last message.
    private func error(_ rc: Int32, _ what: String) -> SQLiteError {
        SQLiteError(code: rc, message: "\(what) in \(path): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs one or more statements that return nothing.
    package func execute(_ sql: String) throws(SQLiteError) {
        var errorMessage: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &errorMessage)
        if rc != SQLITE_OK {
            let text = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(errorMessage)
            throw SQLiteError(code: sqlite3_extended_errcode(handle), message: "\(sql.prefix(60)) in \(path): \(text)")
        }
    }

    /// Runs one statement with bound values and returns every row. The statement is
    /// prepared once per connection and reset after each use.
    @discardableResult
    package func query(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> [SQLiteRow] {
        let stmt = try statement(sql)
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        for (n, value) in arguments.enumerated() {
            let index = Int32(n + 1)
            let brc: Int32
            switch value {
            case .null: brc = sqlite3_bind_null(stmt, index)
            case .integer(let i): brc = sqlite3_bind_int64(stmt, index, i)
            case .real(let d): brc = sqlite3_bind_double(stmt, index, d)
            case .text(let s): brc = sqlite3_bind_text(stmt, index, s, -1, transient)
            }
            guard brc == SQLITE_OK else { throw error(brc, "bind \(sql.prefix(60))") }
        }
        var rows: [SQLiteRow] = []
        let columns = sqlite3_column_count(stmt)
        while true {
            let step = sqlite3_step(stmt)
            if step == SQLITE_DONE { break }
            guard step == SQLITE_ROW else { throw error(step, "run \(sql.prefix(60))") }
            var values: [SQLiteValue] = []
            values.reserveCapacity(Int(columns))
            for c in 0..<columns {
                switch sqlite3_column_type(stmt, c) {
                case SQLITE_INTEGER: values.append(.integer(sqlite3_column_int64(stmt, c)))
                case SQLITE_FLOAT: values.append(.real(sqlite3_column_double(stmt, c)))
                case SQLITE_NULL: values.append(.null)
                default:
                    if let text = sqlite3_column_text(stmt, c) {
                        values.append(.text(String(cString: text)))
                    } else {
                        values.append(.null)
                    }
                }
            }
            rows.append(SQLiteRow(values: values))
        }
        return rows
    }

    /// The first column of the first row, or `.null`.
    package func scalar(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) -> SQLiteValue {
        try query(sql, arguments).first?.values.first ?? .null
    }

    /// Keeps the `-wal` and `-shm` files after the last connection closes
    /// (SQLITE_FCNTL_PERSIST_WAL), so a later open needs no new file — it works on a full disk.
    package func persistWAL() {
        var on: Int32 = 1
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
    }

    /// Rows changed by the last statement.
    package var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether the connection is inside a transaction.
    package var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// The SQLite library version, for `doctor`.
    package static var libraryVersion: String { String(cString: sqlite3_libversion()) }

}

@available(*, unavailable)
extension SQLiteConnection: Sendable {}
