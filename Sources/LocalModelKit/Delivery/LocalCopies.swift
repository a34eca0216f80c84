import FoundationEssentials

/// Where copies of a model's files may already be on this machine, outside the store.
public enum LocalCopyPlace: Sendable, Equatable {
    /// A folder holding the files under their catalog paths (a USB stick, a folder made by
    /// `hf download --local-dir`, a factory image).
    case folder(String)
    /// A Hugging Face hub cache folder (`~/.cache/huggingface/hub`): the snapshot of the
    /// repository and revision a per-file source's URL names (`/ORG/REPO/resolve/REV/`).
    case huggingFaceCache(hub: String)

    /// How messages and the history name it.
    public var description: String {
        switch self {
        case .folder(let dir): return dir
        case .huggingFaceCache(let hub): return "the Hugging Face cache (\(hub))"
        }
    }

    /// Its name without the folder: "the Hugging Face cache", or the folder.
    public var name: String {
        switch self {
        case .folder(let dir): return dir
        case .huggingFaceCache: return "the Hugging Face cache"
        }
    }
}

/// What a download took from copies outside the store (the Hugging Face cache), told once
/// its install committed (`DownloadEvent.usedLocalCopies`) and kept in the history.
public struct LocalCopyUse: Sendable, Equatable {
    /// Catalog paths taken from there and verified in the store: linked (or copied), not
    /// downloaded.
    public var files: [String]
    /// Their bytes.
    public var bytes: Int64
    /// How many of them were copied because the filesystem could not link; the rest are
    /// hard links to the place's own files.
    public var copied: Int
    /// Found there but refused in the store (their bytes did not match the catalog):
    /// downloaded instead. The place's copies are never changed.
    public var refused: [String]
    /// Files that were downloaded (by this run, or resumed from an earlier one), the refused
    /// ones included; zero when nothing came over the network.
    public var downloaded: Int
    /// The model's file count.
    public var total: Int
    /// The place's name (`LocalCopyPlace.name`): "the Hugging Face cache".
    public var place: String
    /// Where in it: the snapshot folder, or the repository's folder and how many files were
    /// found each way (`…/models--org--repo: 3 by SHA-256 in blobs/`).
    public var foundIn: String

    init(files: [String], bytes: Int64, copied: Int, refused: [String], downloaded: Int, total: Int, place: String, foundIn: String) {
        (self.files, self.bytes, self.copied, self.refused) = (files, bytes, copied, refused)
        (self.downloaded, self.total, self.place, self.foundIn) = (downloaded, total, place, foundIn)
    }

    /// The history's wording, after "installed … from <origin>": "2 of 3 file(s), 1234
    /// bytes, from the Hugging Face cache (…): linked, verified; 1 downloaded". When every
    /// file came from there the origin names the place already (`FilesDelivery.fetch`), so
    /// this does not: "3 of 3 file(s), 1234 bytes: linked, verified, nothing downloaded".
    var historyText: String {
        let how = copied == 0 ? "linked" : copied == files.count ? "copied" : "linked (\(copied) copied)"
        let refusedText = refused.isEmpty ? "" : " (refused there: \(refused.prefix(5).joined(separator: ", ")))"
        let place = files.count == total ? "" : ", from \(self.place) (\(foundIn))"
        return "\(files.count) of \(total) file(s), \(bytes) bytes\(place): \(how), verified"
            + (downloaded == 0 ? ", nothing downloaded" : "; \(downloaded) downloaded\(refusedText)")
    }
}

/// Where an engine looks for copies of models outside the store.
public struct LocalCopySettings: Sendable, Equatable {
    /// The Hugging Face hub cache folder; nil when none is known.
    public var huggingFaceHub: String?
    /// Whether a download links matching files from that cache before fetching (off with
    /// `EXTENTOS_NO_HF_CACHE=1`).
    public var adoptOnDownload: Bool

    /// Settings as given (the default: no cache, nothing adopted).
    public init(huggingFaceHub: String? = nil, adoptOnDownload: Bool = false) {
        self.huggingFaceHub = huggingFaceHub
        self.adoptOnDownload = adoptOnDownload
    }

    /// The settings of this environment: the Hub client's cache folder, adopted from unless
    /// `EXTENTOS_NO_HF_CACHE=1`.
    public init(environment: [String: String]) {
        self.init(huggingFaceHub: HuggingFaceCache.hubFolder(environment: environment),
                  adoptOnDownload: environment["EXTENTOS_NO_HF_CACHE"] != "1")
    }
}

/// The Hugging Face hub cache, laid out as the Hub client lays it out:
/// `models--ORG--REPO/{blobs/<hash>, refs/<name>, snapshots/<commit>/<path> → ../../blobs/<hash>}`.
package enum HuggingFaceCache {
    /// The hub folder the Hub client would use: `$HF_HUB_CACHE`, else the older
    /// `$HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`,
    /// else `~/.cache/huggingface/hub`, expanded as the client expands them (`~`, `~user`,
    /// `$VAR`: `HubClientPaths`). Nil when the default is needed and no home folder is known.
    package static func hubFolder(environment: [String: String]) -> String? {
        HubClientPaths(environment: environment).hubCache
    }

    /// The repository and revision a per-file source's URL names, whatever its host:
    /// `https://host/ORG/REPO/resolve/REV/` → (`ORG/REPO`, `REV`), also under a path prefix
    /// (an `HF_ENDPOINT` such as `https://mirror.example/hf`: the two parts before the first
    /// `resolve` that has two). Nil for any other shape.
    package static func repository(ofBaseURL url: String) -> (repo: String, revision: String)? {
        guard let path = ModelURL.path(of: url) else { return nil }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard let at = parts.indices.first(where: { $0 >= 2 && parts[$0] == "resolve" }), at + 1 < parts.count else { return nil }
        let (org, name) = (parts[at - 2], parts[at - 1])
        let revision = parts[(at + 1)...].joined(separator: "/")
        guard !org.isEmpty, !name.isEmpty, !revision.isEmpty,
              ![org, name].contains(where: { $0 == "." || $0 == ".." }),
              !revision.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        return (org + "/" + name, revision)
    }

    /// The folder the Hub client keeps `repo` in: `models--ORG--REPO`.
    static func repositoryFolder(hub: String, repo: String) -> String {
        hub + "/models--" + repo.split(separator: "/").joined(separator: "--")
    }

    /// The snapshot folder of `repo` at `revision` in `hub`: `snapshots/<revision>` for a
    /// commit, else the commit that `refs/<revision>` (a branch or tag) names. Nil when the
    /// cache does not have it.
    static func snapshot(hub: String, repo: String, revision: String) -> String? {
        let repoFolder = repositoryFolder(hub: hub, repo: repo)
        let direct = repoFolder + "/snapshots/" + revision
        if FileIO.resolvingLinks(direct).map(FileIO.isDirectory) == true { return direct }
        guard let bytes = try? FileIO.readFile(atPath: repoFolder + "/refs/" + revision, limit: 256) else { return nil }
        let commit = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        guard !commit.isEmpty, !commit.contains("/"), commit != ".", commit != ".." else { return nil }
        let pinned = repoFolder + "/snapshots/" + commit
        return FileIO.resolvingLinks(pinned).map(FileIO.isDirectory) == true ? pinned : nil
    }

    /// Whether a blob's name is a SHA-256 (64 lowercase hex digits): the client names a Git
    /// LFS file's blob by its SHA-256 (the Hub's `X-Linked-Etag`), and a file kept in Git
    /// itself (a config, a small tokenizer) by its Git blob SHA-1 (40 digits).
    static func isSHA256Name(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}

/// A model's files found in a place outside the store.
///
/// In the Hugging Face cache a file is looked up, in this order:
/// 1. under its path in the snapshot of the revision the per-file source names (a branch or
///    tag through `refs/`): every catalog file, kept when it is a regular file of its size;
/// 2. by the catalog's SHA-256 as `blobs/<sha256>` of the same repository, which is where
///    the client keeps a Git LFS file whatever revision brought it (the weights, whose
///    snapshot under another revision links there): only files the catalog gives a SHA-256;
/// 3. under its path in another snapshot of the same repository, for a file the client
///    keeps under its Git blob SHA-1 (small files kept in Git itself, which step 2 cannot
///    name): only files the catalog gives a SHA-256, up to 16 MiB, and only when the
///    file's SHA-256 here is the catalog's (another revision may have changed it).
/// Nothing here is trusted: every file is verified again once it is in the store.
struct LocalCopies {
    /// How a file was found.
    enum Way: Equatable {
        /// Under its path in `folder`.
        case path
        /// By its SHA-256 in the repository's `blobs/`.
        case blob(repositoryFolder: String)
        /// Unchanged in another snapshot of the repository (its SHA-256 checked there).
        case otherSnapshot(repositoryFolder: String, commit: String)
    }

    /// Where they were looked for.
    let place: LocalCopyPlace
    /// Catalog path → the file it resolves to (links followed: the place is the user's own).
    var files: [String: String] = [:]
    /// Catalog path → how it was found.
    var ways: [String: Way] = [:]
    /// The folder they were looked up in: the folder; in the cache, the snapshot of the
    /// revision the source names, else the repository's folder when a file was found in it
    /// otherwise. Nil when the place has no copy of the model.
    var folder: String?

    /// A file in the cache no larger than this may be hashed before it is taken from another
    /// snapshot (the Hub keeps files over 10 MB in LFS, so Git-kept files are smaller).
    static let otherSnapshotFileLimit: Int64 = 16 << 20

    /// Looks up each catalog file of `model` in `place`. Only regular files of the
    /// catalog's size are kept; the bytes are checked later, in the store.
    init(_ model: CatalogModel, in place: LocalCopyPlace) {
        self.place = place
        switch place {
        case .folder(let dir):
            folder = dir
            lookUpByPath(model.files, in: dir)
        case .huggingFaceCache(let hub):
            lookUp(model, inHub: hub)
        }
    }

    private mutating func lookUpByPath(_ wanted: [CatalogFile], in folder: String) {
        for file in wanted {
            guard let resolved = FileIO.resolvingLinks(folder + "/" + file.path),
                  FileIO.regularFileSize(resolved) == file.size else { continue }
            files[file.path] = resolved
            ways[file.path] = .path
        }
    }

    /// The three steps above, over the repositories the model's per-file sources name.
    private mutating func lookUp(_ model: CatalogModel, inHub hub: String) {
        let named = model.deliveries.compactMap(\.huggingFaceRepository)
        var snapshotsUsed: [String: Set<String>] = [:]
        for (repo, revision) in named {
            guard let snapshot = HuggingFaceCache.snapshot(hub: hub, repo: repo, revision: revision) else { continue }
            if folder == nil { folder = snapshot }
            snapshotsUsed[repo, default: []].insert(FileIO.lastComponent(of: snapshot))
            lookUpByPath(model.files.filter { files[$0.path] == nil }, in: snapshot)
        }
        var repos: [String] = []
        for (repo, _) in named where !repos.contains(repo) { repos.append(repo) }
        for repo in repos {
            let repoFolder = HuggingFaceCache.repositoryFolder(hub: hub, repo: repo)
            for file in model.files where files[file.path] == nil {
                guard let sha = file.sha256, let resolved = FileIO.resolvingLinks(repoFolder + "/blobs/" + sha),
                      FileIO.regularFileSize(resolved) == file.size else { continue }
                take(file, at: resolved, way: .blob(repositoryFolder: repoFolder))
            }
            let gitKept = model.files.filter { files[$0.path] == nil && $0.sha256 != nil && $0.size <= Self.otherSnapshotFileLimit }
            guard !gitKept.isEmpty else { continue }
            let snapshots = repoFolder + "/snapshots"
            for commit in (try? FileIO.listDirectory(snapshots)) ?? [] where !(snapshotsUsed[repo]?.contains(commit) ?? false) {
                for file in gitKept where files[file.path] == nil {
                    // A blob named by a SHA-256 that is not the catalog's holds other bytes.
                    guard let sha = file.sha256, let resolved = FileIO.resolvingLinks(snapshots + "/" + commit + "/" + file.path),
                          !HuggingFaceCache.isSHA256Name(FileIO.lastComponent(of: resolved)),
                          FileIO.regularFileSize(resolved) == file.size,
                          let hashed = try? SHA256Hasher.hashFile(atPath: resolved, limit: file.size),
                          hashed.size == file.size, hashed.sha256 == sha else { continue }
                    take(file, at: resolved, way: .otherSnapshot(repositoryFolder: repoFolder, commit: commit))
                }
            }
        }
    }

    private mutating func take(_ file: CatalogFile, at resolved: String, way: Way) {
        files[file.path] = resolved
        ways[file.path] = way
        if folder == nil, case .blob(let repoFolder) = way { folder = repoFolder }
        if folder == nil, case .otherSnapshot(let repoFolder, _) = way { folder = repoFolder }
    }

    /// How a file was found, when not under its path in `folder` (for `import`'s report).
    func detail(_ path: String) -> String? {
        switch ways[path] {
        case .blob(let repoFolder): return "by its SHA-256 in \(repoFolder)/blobs"
        case let .otherSnapshot(repoFolder, commit): return "unchanged in \(repoFolder)/snapshots/\(commit) (SHA-256 checked)"
        case .path, nil: return nil
        }
    }

    /// Where the files came from, for messages and the history: `folder` when every one was
    /// under its path there; else the repository's folder and how many were found each way
    /// (`…/models--org--repo: 3 by SHA-256 in blobs/`). Nil when nothing was found.
    var foundIn: String? {
        guard let folder, !files.isEmpty else { return nil }
        var byPath = 0, byBlob = 0
        var repository: String?
        var commits: [String: Int] = [:]
        for way in ways.values {
            switch way {
            case .path: byPath += 1
            case .blob(let repoFolder):
                byBlob += 1
                repository = repository ?? repoFolder
            case let .otherSnapshot(repoFolder, commit):
                commits[commit, default: 0] += 1
                repository = repository ?? repoFolder
            }
        }
        guard let repository else { return folder }
        var parts: [String] = []
        if byPath > 0 { parts.append("\(byPath) in snapshots/" + FileIO.lastComponent(of: folder)) }
        if byBlob > 0 { parts.append("\(byBlob) by SHA-256 in blobs/") }
        for (commit, n) in commits.sorted(by: { $0.key < $1.key }) { parts.append("\(n) unchanged in snapshots/\(commit)") }
        return repository + ": " + parts.joined(separator: ", ")
    }

    /// Bytes of the files found.
    func bytes(of model: CatalogModel) -> Int64 {
        model.files.reduce(0) { $0 + (files[$1.path] == nil ? 0 : $1.size) }
    }
}

/// The files a download linked from the Hugging Face cache, before the transfer verified them.
struct CacheAdoption {
    var files: [String]
    /// Those copied, not linked (another filesystem).
    var copied: Set<String>
    var place: LocalCopyPlace
    /// `LocalCopies.foundIn`.
    var foundIn: String
}
