/// Where models live on disk, and the layout inside:
///
/// ```
/// <root>/records.sqlite3      install records (WAL)
/// <root>/<id>/                an installed model
/// <root>/voices/<id>/         an installed voice bundle
/// <root>/.partial/<id>/       resumable data of a download in progress (files sources)
/// <root>/.partial/<id>@archive  the archive being downloaded (archive sources)
/// <root>/.staging/<id>/       a verified tree about to be renamed into place
/// <root>/.locks/<id>.lock     one flock file per model
/// ```
public struct StoreLayout: Sendable, Equatable {
    /// Absolute path of the store folder.
    public let root: String

    /// The layout of the store at `root` (made absolute; nothing is created or read).
    public init(root: String) {
        self.root = FileIO.absolutePath(root)
    }

    /// The default store: `$EXTENTOS_MODELS_DIR`, else `$XDG_DATA_HOME/extentos/models`,
    /// else `~/.local/share/extentos/models`.
    /// - Parameter environment: the process environment (a parameter so tests can set it).
    public static func defaultRoot(environment: [String: String]) -> String? {
        if let dir = environment["EXTENTOS_MODELS_DIR"], !dir.isEmpty { return dir }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") { return xdg + "/extentos/models" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.local/share/extentos/models" }
        // No HOME (a bare systemd unit): fall back to the password database.
        return ProcessEnvironment.homeDirectoryFromPasswordDatabase().map { $0 + "/.local/share/extentos/models" }
    }

    /// `<root>/records.sqlite3`: the install records.
    package var recordsPath: String { root + "/records.sqlite3" }
    /// `<root>/.partial`: resumable data of downloads in progress.
    package var partialRoot: String { root + "/.partial" }
    /// `<root>/.staging`: verified trees about to be renamed into place.
    package var stagingRoot: String { root + "/.staging" }
    /// `<root>/.locks`: one lock file per model, and the store-wide ones.
    package var locksRoot: String { root + "/.locks" }
    /// `<root>/voices`: installed voices.
    package var voicesRoot: String { root + "/voices" }
    /// Accepted signed catalogs: `<version>.json` and `<version>.json.sig` (see `CatalogUpdate`).
    package var catalogRoot: String { root + "/.catalog" }
    /// Keys announced as `nextKey` by accepted catalogs (each signed by a key trusted at the
    /// time): `.catalog/keys/<name>.pub`.
    package var rotatedKeysRoot: String { catalogRoot + "/keys" }

    /// Final folder of an installed model.
    public func installPath(id: String, kind: ModelKind) -> String {
        switch kind {
        case .llm: return root + "/" + id
        case .voice: return voicesRoot + "/" + id
        }
    }

    /// The install folder relative to the root, as install records keep it.
    public static func relativeInstallPath(id: String, kind: ModelKind) -> String {
        kind == .voice ? "voices/" + id : id
    }

    /// Where a recorded install lives: its recorded folder under this root (wherever the
    /// store is now), or the layout's folder for the model when the record holds none, or
    /// holds anything but a plain relative path inside the store.
    public func folder(of record: InstallRecord) -> String {
        if let path = record.path, CatalogRules.pathProblem(path) == nil { return root + "/" + path }
        return installPath(id: record.modelId, kind: record.kind)
    }

    /// `.partial/<id>`: a files source's resumable data for the model.
    package func partialPath(id: String) -> String { partialRoot + "/" + id }
    /// The archive being downloaded for an archive source (`@` cannot occur in an id,
    /// so it never collides with a model's partial folder).
    package func partialArchivePath(id: String) -> String { partialRoot + "/" + id + "@archive" }
    /// `.staging/<id>`: the model's verified tree before its rename into place.
    package func stagingPath(id: String) -> String { stagingRoot + "/" + id }
    /// `.locks/<id>.lock`: the file whose `flock` makes one installer per model.
    package func lockPath(id: String) -> String { locksRoot + "/" + id + ".lock" }

    /// The model id a `.partial` or `.staging` entry belongs to (`<id>@archive`,
    /// `<id>.repair`, `<id>.replaced`, `<id>.deleting` → `<id>`).
    package static func modelId(fromLeftover name: String) -> String {
        for suffix in ["@archive", ".repair", ".replaced", ".deleting"] where name.hasSuffix(suffix) {
            return String(name.dropLast(suffix.count))
        }
        return name
    }

    /// Creates the store folders that do not exist yet. A link standing where one of them
    /// belongs is removed (never followed) and a real folder made in its place (P11).
    /// - Returns: the links removed, for the history.
    @discardableResult
    package func createFolders() throws(SystemError) -> [String] {
        try FileIO.createDirectory(root)
        var removed: [String] = []
        var created = false
        for dir in [partialRoot, stagingRoot, locksRoot, voicesRoot] {
            if let found = try FileIO.status(dir) {
                if found.kind == .directory { continue }
                guard found.kind == .symbolicLink else {
                    throw SystemError.notAFolder("\(dir) is not a folder; move it out of the store and retry")
                }
                try FileIO.removeTree(dir, below: root)
                removed.append(dir)
            }
            do {
                try FileIO.createDirectory(dir, below: root)
                created = true
            } catch where error.isPermissionDenied {
                // A store this user may read but not write (a system-wide store): reading
                // works without the folder; a write says what it could not do.
                continue
            }
        }
        // New folders (a new store) survive a power cut before anything is recorded in them.
        if created { try? FileIO.syncFolders([root], below: root) }
        // The stored catalog's folders are made when a catalog is first accepted; a link in
        // their place is removed like the others (else `catalog update` could never write
        // there, and the stored catalog would be read through it).
        for dir in [catalogRoot, rotatedKeysRoot, damagedCatalogRoot] {
            if let found = try FileIO.status(dir), found.kind == .symbolicLink {
                try FileIO.removeTree(dir, below: root)
                removed.append(dir)
            }
        }
        return removed
    }

    /// Temporary files that atomic writes left in the store's own folders (the root, where
    /// the records and the user catalog are written, and the stored catalog's folders) when
    /// their process died before putting them in place, modified more than `age` seconds
    /// before `now`. A younger one may be a write still in progress (they take milliseconds),
    /// so it is left alone. Only regular files, never through a link.
    package func abandonedTemporaries(now: Double, olderThan age: Double = 3600) -> [String] {
        var found: [String] = []
        for dir in [root, catalogRoot, rotatedKeysRoot] {
            for name in (try? FileIO.listDirectory(dir)) ?? [] where FileIO.isTemporaryName(name) {
                let path = dir + "/" + name
                guard let status = try? FileIO.status(path), status.kind == .regular,
                      Double(status.modified.seconds) < now - age else { continue }
                found.append(path)
            }
        }
        return found
    }

    // MARK: Changing the store without leaving it (P11)

    /// `mkdir -p` below the store root; never through a link.
    package func createDirectory(_ path: String) throws(SystemError) {
        try FileIO.createDirectory(path, below: root)
    }

    /// `rm -rf` below the store root; a link is removed, never followed.
    @discardableResult
    package func remove(_ path: String) throws(SystemError) -> Int64 {
        try FileIO.removeTree(path, below: root)
    }

    /// Removes a model's folder (out of its place in one rename first, so it is never seen
    /// half removed), its partial data and staging leftovers, and makes the removals durable
    /// (P15). Returns the bytes freed. The caller holds the model's lock.
    package func removeModelData(_ id: String, folder: String) throws(SystemError) -> Int64 {
        let aside = stagingRoot + "/" + id + ".deleting"
        var freed: Int64 = 0
        if FileIO.exists(folder) {
            try remove(aside)
            try rename(folder, to: aside)
        }
        for path in [aside, partialPath(id: id), partialArchivePath(id: id), stagingPath(id: id)] {
            freed += try remove(path)
        }
        try FileIO.syncFolders([FileIO.parent(of: folder), stagingRoot, partialRoot], below: root)
        return freed
    }

    /// `rename` inside the store; no folder on either side is reached through a link.
    package func rename(_ from: String, to: String) throws(SystemError) {
        try FileIO.rename(from, to: to, below: root)
    }

    /// Removes every symbolic link and special file (fifo, socket, device) in the tree at
    /// `path`, or `path` itself when it is one. Nothing is followed or moved.
    /// - Returns: the paths removed, relative to `path` ("" for `path` itself).
    package func removeLinks(in path: String) throws(SystemError) -> [String] {
        guard let found = try FileIO.status(path) else { return [] }
        guard found.kind == .directory else {
            if found.kind == .regular { return [] }
            try remove(path)
            return [""]
        }
        let others = try FileIO.walkFiles(path).others
        for other in others { try remove(path + "/" + other) }
        return others
    }
}

/// Free space of a filesystem, as `statvfs` sees it.
public struct FilesystemSpace: Sendable, Equatable {
    /// Bytes available to this (unprivileged) user: `f_bavail × f_frsize`.
    public var availableBytes: Int64
    /// Bytes of the whole filesystem.
    public var totalBytes: Int64

    /// The space of the filesystem holding `path`, or of its nearest existing ancestor
    /// (a store that does not exist yet will be created there).
    package static func of(path: String) throws(SystemError) -> FilesystemSpace {
        var probe = FileIO.absolutePath(path)
        while !FileIO.exists(probe), probe != "/" {
            if let slash = probe.lastIndex(of: "/") {
                probe = slash == probe.startIndex ? "/" : String(probe[..<slash])
            } else {
                probe = "/"
            }
        }
        let space = try FileIO.space(of: probe)
        return FilesystemSpace(availableBytes: space.available, totalBytes: space.total)
    }
}

/// An advisory `flock` on a lock file: one installer per model across processes.
///
/// The kernel drops the lock when the descriptor closes, so a process killed with
/// `kill -9` never leaves a stale lock behind — unlike pid files.
package final class FileLock {
    /// The lock file.
    package let path: String
    private var file: FileDescriptor?

    /// A lock on `path`, not taken yet (``tryLock(exclusive:)`` or ``lock(exclusive:)``).
    package init(path: String) {
        self.path = path
    }

    deinit { unlock() }

    /// Takes the lock without waiting. Returns false when another process (or another
    /// `FileLock` in this one) holds it.
    package func tryLock(exclusive: Bool = true) throws(SystemError) -> Bool {
        if file != nil { return true }
        let candidate = try openLockFile(readOnly: !exclusive)
        guard try candidate.lock(exclusive: exclusive, wait: false) else { return false }
        file = candidate
        return true
    }

    /// Waits for the lock.
    package func lock(exclusive: Bool = true) throws(SystemError) {
        if file != nil { return }
        let candidate = try openLockFile(readOnly: !exclusive)
        _ = try candidate.lock(exclusive: exclusive, wait: true)
        file = candidate
    }

    /// Opens (creating) the lock file without following a link; a link planted in its
    /// place is removed first (P11). With `readOnly`, an existing lock file this user may
    /// read but not write is opened read-only (`flock` needs no write access).
    private func openLockFile(readOnly: Bool = false) throws(SystemError) -> FileDescriptor {
        var removedLink = false
        while true {
            do {
                return try FileIO.createOrOpenLockFile(path)
            } catch {
                if error.isLink, !removedLink, try FileIO.status(path)?.kind == .symbolicLink {
                    try FileIO.removeTree(path)
                    removedLink = true
                    continue
                }
                let denied = error.isPermissionDenied
                if readOnly && denied, let reader = try? FileDescriptor.open(path, .readOnly, options: .nonBlocking) { return reader }
                var failure = error.attempting("open lock file \(path)")
                if denied {
                    failure.message += " — this store is read-only for this user; changing it needs its owner, or use a store of your own (--store DIR or EXTENTOS_MODELS_DIR)"
                }
                throw failure
            }
        }
    }

    /// Releases the lock (`flock(LOCK_UN)` before the close, so a child process holding a
    /// copy of the descriptor never keeps it), if held. Also done on `deinit`.
    package func unlock() {
        file?.unlock()
        file?.close()
        file = nil
    }
}

@available(*, unavailable)
extension FileLock: Sendable {}

extension StoreLayout {
    /// Takes model `id`'s lock without waiting, for work on that model's files. Returns nil
    /// when another process holds it, or — with `ifPermitted`, for repairs a store's owner
    /// should make — when this user may not take it. A leftover whose name is no valid id
    /// has no lock to take: the returned lock then holds nothing. Released when the
    /// returned value goes away (or by `unlock()`).
    func tryModelLock(_ id: String, exclusive: Bool = true, ifPermitted: Bool = false) throws(SystemError) -> FileLock? {
        let lock = FileLock(path: lockPath(id: id))
        guard CatalogRules.idProblem(id) == nil else { return lock }
        do {
            return try lock.tryLock(exclusive: exclusive) ? lock : nil
        } catch where ifPermitted && error.isPermissionDenied {
            return nil
        }
    }
}
