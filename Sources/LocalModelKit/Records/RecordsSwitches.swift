import FoundationEssentials

/// A change of a model's folder that is under way: written (durably) before any file of it
/// moves, removed in the transaction that records the change as done. After a crash or a
/// power cut, start-up repair reads it to finish or undo the change (`StoreRepair`, P15).
package struct SwitchRecord: Sendable, Equatable {
    /// What the change does.
    package enum Action: String, Sendable {
        /// A verified, durable tree is being renamed into the model's folder (a first
        /// install, or an update replacing the installed version).
        case install
        /// The model's folder and data are being removed; the install record is already gone.
        case delete
    }
    /// The model whose folder changes.
    package var modelId: String
    /// An install or a delete.
    package var action: Action
    /// The tree an install puts in place (the staging folder's device and inode, which the
    /// rename keeps): the model's folder is that tree exactly when it has this identity.
    package var tree: FileIdentity?
    /// The record the install commits (`state` installed); for a delete, the folder it removes.
    package var install: InstallRecord
    /// The file rows the install commits.
    package var files: [FileRecord]
}

extension WriteContext {
    /// Records a switch about to start (replacing any earlier one of the model).
    package func beginSwitch(_ s: SwitchRecord) throws(SQLiteError) {
        try dropSwitch(s.modelId)
        let r = s.install
        try db.query("""
            INSERT INTO switches (model_id, action, tree_device, tree_inode, kind, catalog_version, path, total_bytes,
                                  created_at, source, started_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(s.modelId), .text(s.action.rawValue),
                  s.tree.map { .integer(Int64(bitPattern: $0.device)) } ?? .null,
                  s.tree.map { .integer(Int64(bitPattern: $0.inode)) } ?? .null,
                  .text(r.kind.rawValue), .integer(Int64(r.catalogVersion)), .text(r.path ?? s.modelId), .integer(r.totalBytes),
                  .real(r.createdAt), r.source.map { .text($0) } ?? .null, .real(now)])
        for f in s.files {
            try db.query("""
                INSERT INTO switch_files (model_id, path, size, sha256, etag, last_modified, verified_sha256)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, [.text(s.modelId), .text(f.path), .integer(f.size), f.sha256.map { .text($0) } ?? .null,
                      f.etag.map { .text($0) } ?? .null, f.lastModified.map { .text($0) } ?? .null,
                      f.verifiedSha256.map { .text($0) } ?? .null])
        }
    }

    /// Makes an install switch's record the model's install record (with its files), and
    /// forgets the switch. Returns false when there was no install switch for the model.
    @discardableResult
    package func commitSwitch(_ modelId: String) throws(SQLiteError) -> Bool {
        guard let s = try read.switchRecord(modelId), s.action == .install else { return false }
        var record = s.install
        record.state = .installed
        record.updatedAt = now
        record.installedAt = now
        try upsert(record)
        try setFiles(modelId, s.files)
        try dropSwitch(modelId)
        return true
    }

    /// Forgets a model's switch (done, or undone).
    package func dropSwitch(_ modelId: String) throws(SQLiteError) {
        try db.query("DELETE FROM switch_files WHERE model_id = ?", [.text(modelId)])
        try db.query("DELETE FROM switches WHERE model_id = ?", [.text(modelId)])
    }
}

extension ReadContext {
    /// Every switch under way (start-up repair finishes or undoes them).
    package func switches() throws(SQLiteError) -> [SwitchRecord] {
        var out: [SwitchRecord] = []
        for row in try db.query("SELECT model_id FROM switches ORDER BY model_id") {
            if let id = row[0].string, let record = try switchRecord(id) { out.append(record) }
        }
        return out
    }

    /// The change under way for the model, or nil when none is.
    package func switchRecord(_ modelId: String) throws(SQLiteError) -> SwitchRecord? {
        guard let row = try db.query("""
            SELECT action, tree_device, tree_inode, kind, catalog_version, path, total_bytes, created_at, source
            FROM switches WHERE model_id = ?
            """, [.text(modelId)]).first,
              let action = row[0].string.flatMap(SwitchRecord.Action.init(rawValue:)),
              let kind = row[3].string.flatMap(ModelKind.init(rawValue:)) else { return nil }
        var tree: FileIdentity?
        if let device = row[1].int64, let inode = row[2].int64 {
            tree = FileIdentity(device: UInt64(bitPattern: device), inode: UInt64(bitPattern: inode))
        }
        let install = InstallRecord(modelId: modelId, kind: kind, state: .installed, catalogVersion: Int(row[4].int64 ?? 0),
                                    path: row[5].string, totalBytes: row[6].int64 ?? 0, createdAt: row[7].double ?? 0,
                                    updatedAt: row[7].double ?? 0, source: row[8].string)
        let files = try db.query("""
            SELECT path, size, sha256, etag, last_modified, verified_sha256 FROM switch_files WHERE model_id = ? ORDER BY path
            """, [.text(modelId)]).map { f in
            FileRecord(path: f[0].string ?? "", size: f[1].int64 ?? 0, sha256: f[2].string, etag: f[3].string,
                       lastModified: f[4].string, bytesPresent: f[1].int64 ?? 0, verifiedSha256: f[5].string)
        }
        return SwitchRecord(modelId: modelId, action: action, tree: tree, install: install, files: files)
    }
}
