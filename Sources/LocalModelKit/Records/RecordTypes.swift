import FoundationEssentials

/// Whether a model's bytes are partly present or fully installed.
public enum InstallState: String, Sendable {
    /// Download in progress or interrupted; data under `.partial/<id>`.
    case partial
    /// Every file verified and renamed into place; the install committed.
    case installed
}

/// One model's record.
public struct InstallRecord: Sendable, Equatable {
    /// The catalog id of the model.
    public var modelId: String
    /// An LLM or a voice: it decides the folder (`<id>` or `voices/<id>`).
    public var kind: ModelKind
    /// Partly downloaded, or installed.
    public var state: InstallState
    /// The catalog version the files came from.
    public var catalogVersion: Int
    /// Final folder (installed), relative to the store root (`<id>` or `voices/<id>`), so a
    /// store restored from a backup or moved elsewhere keeps its installed state. Stores
    /// written before schema 3 held absolute paths; migration 3 rewrites them.
    public var path: String?
    /// Bytes of the installed tree.
    public var totalBytes: Int64
    /// When the record was first written (the first download's start), seconds since 1970.
    public var createdAt: Double
    /// When the record last changed, seconds since 1970.
    public var updatedAt: Double
    /// When the install committed, seconds since 1970; nil while partial.
    public var installedAt: Double?
    /// The last failure's message, kept for `info` until the next success.
    public var lastError: String?
    /// Where the installed bytes came from: `archive <url>` or `files <base url>`.
    public var source: String?

    /// A record with every column given (the records' readers and writers use it).
    public init(modelId: String, kind: ModelKind, state: InstallState, catalogVersion: Int, path: String?,
                totalBytes: Int64, createdAt: Double, updatedAt: Double, installedAt: Double? = nil, lastError: String? = nil,
                source: String? = nil) {
        self.source = source
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
package struct FileRecord: Sendable, Equatable {
    /// The file's path inside the model's folder, as the catalog names it.
    package var path: String
    /// The file's size in bytes, as the catalog declares it.
    package var size: Int64
    /// The catalog's hash, when it has one.
    package var sha256: String?
    /// The server's validators, for `If-Range` on resume.
    package var etag: String?
    /// The server's `Last-Modified`, used for `If-Range` when there is no strong ETag.
    package var lastModified: String?
    /// Bytes already on disk (in `.partial`, or all of them once installed).
    package var bytesPresent: Int64
    /// The SHA-256 computed while installing; `verify` compares against it when the
    /// catalog has no hash.
    package var verifiedSha256: String?

    /// A file's record; a new one has no bytes present and no validators yet.
    package init(path: String, size: Int64, sha256: String?, etag: String? = nil, lastModified: String? = nil,
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
    /// What happened; its raw value is what `history` prints and the records keep.
    public enum Kind: String, Sendable, CaseIterable {
        /// A download began with nothing on disk.
        case started
        /// A download began from partial data (or from copies found on this machine).
        case resumed
        /// An install committed.
        case completed
        /// A download, verify or repair failed; `detail` has the message.
        case failed
        /// `verify` checked a model (the detail says how many files and what it found).
        case verified
        /// A model was deleted.
        case deleted
        /// Opening the store repaired leftovers of interrupted work, or set something aside.
        case repaired
        /// A catalog was accepted, refused as a rollback, or set aside as damaged.
        case catalog
        /// One `prefetch` run, with what it did or why it did nothing.
        case prefetch
        /// `import` (or a download) installed files already on this machine.
        case imported
    }
    /// The event's row id: events are numbered in the order they happened.
    public var id: Int64
    /// Seconds since 1970.
    public var at: Double
    /// The model the event is about; nil for store-wide events (a catalog, a prefetch run).
    public var modelId: String?
    /// The ``Kind``'s raw value (kept as text, so an older build reads a newer kind).
    public var kind: String
    /// What happened, in words; nil when the kind says it all.
    public var detail: String?
}

/// Why the records database cannot be used, and what to do.
package enum RecordsError: Error, Sendable, Equatable, CustomStringConvertible {
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
    /// A transaction's body gave up with an error of its own (`reason`); nothing of the
    /// transaction was written.
    case aborted(path: String, reason: String)

    /// True when the failure is a full disk (so callers may skip optional writes).
    package var isDiskFull: Bool {
        if case .diskFull = self { return true }
        return false
    }

    /// What failed, on which file, and what to do about it.
    package var description: String {
        switch self {
        case let .corrupt(path, detail):
            return "records database \(path) is damaged or not a database (\(detail)); it is left as it is. Move it aside with its -wal/-shm files (nothing is deleted): \(Self.moveAsideCommand(recordsPath: path)) — then run 'glasses-local doctor': it starts new records (install records and history are lost) and says which models on disk are re-verified and which are fetched again."
        case let .aborted(path, reason):
            return "a change to the records database \(path) was abandoned (\(reason)); nothing of it was written."
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

extension FileRecord {
    /// The key under which the store knows a file's bytes: its SHA-256 and size. A file of a
    /// model to install with a key the store holds is linked, not downloaded.
    package static func heldKey(sha256: String, size: Int64) -> String { sha256 + ":\(size)" }
}
