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
}

/// Where an engine looks for copies of models outside the store.
public struct LocalCopySettings: Sendable, Equatable {
    /// The Hugging Face hub cache folder; nil when none is known.
    public var huggingFaceHub: String?
    /// Whether a download links matching files from that cache before fetching (off with
    /// `EXTENTOS_NO_HF_CACHE=1`).
    public var adoptOnDownload: Bool

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
public enum HuggingFaceCache {
    /// The hub folder the Hub client would use: `$HF_HUB_CACHE`, else the older
    /// `$HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`, else `$XDG_CACHE_HOME/huggingface/hub`,
    /// else `~/.cache/huggingface/hub`, expanded as the client expands them (`~`, `~user`,
    /// `$VAR`: `HubClientPaths`). Nil when the default is needed and no home folder is known.
    public static func hubFolder(environment: [String: String]) -> String? {
        HubClientPaths(environment: environment).hubCache
    }

    /// The repository and revision a per-file source's URL names, whatever its host:
    /// `https://host/ORG/REPO/resolve/REV/` → (`ORG/REPO`, `REV`). Nil for any other shape.
    public static func repository(ofBaseURL url: String) -> (repo: String, revision: String)? {
        guard let path = LocalModelEngine.urlPath(of: url) else { return nil }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard parts.count >= 4, parts[2] == "resolve" else { return nil }
        let revision = parts[3...].joined(separator: "/")
        guard !parts[0].isEmpty, !parts[1].isEmpty, !revision.isEmpty,
              ![parts[0], parts[1]].contains(where: { $0 == "." || $0 == ".." }),
              !revision.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else { return nil }
        return (parts[0] + "/" + parts[1], revision)
    }

    /// The snapshot folder of `repo` at `revision` in `hub`: `snapshots/<revision>` for a
    /// commit, else the commit that `refs/<revision>` (a branch or tag) names. Nil when the
    /// cache does not have it.
    static func snapshot(hub: String, repo: String, revision: String) -> String? {
        let repoFolder = hub + "/models--" + repo.split(separator: "/").joined(separator: "--")
        let direct = repoFolder + "/snapshots/" + revision
        if FileIO.resolvingLinks(direct).map(FileIO.isDirectory) == true { return direct }
        guard let bytes = try? FileIO.readFile(atPath: repoFolder + "/refs/" + revision, limit: 256) else { return nil }
        let commit = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        guard !commit.isEmpty, !commit.contains("/"), commit != ".", commit != ".." else { return nil }
        let pinned = repoFolder + "/snapshots/" + commit
        return FileIO.resolvingLinks(pinned).map(FileIO.isDirectory) == true ? pinned : nil
    }
}

/// A model's files found in a place outside the store.
struct LocalCopies {
    /// Catalog path → the file it resolves to (links followed: the place is the user's own).
    var files: [String: String]
    /// The folder they were looked up in (for messages): the folder, or the snapshot.
    var folder: String?

    /// Looks up each catalog file of `model` in `place`. Only regular files of the
    /// catalog's size are kept; the bytes are checked later, in the store.
    init(_ model: CatalogModel, in place: LocalCopyPlace) {
        files = [:]
        switch place {
        case .folder(let dir):
            folder = dir
        case .huggingFaceCache(let hub):
            folder = model.deliveries.lazy.compactMap { delivery -> String? in
                guard let (repo, revision) = delivery.huggingFaceRepository else { return nil }
                return HuggingFaceCache.snapshot(hub: hub, repo: repo, revision: revision)
            }.first
        }
        guard let folder else { return }
        for file in model.files {
            guard let resolved = FileIO.resolvingLinks(folder + "/" + file.path),
                  FileIO.regularFileSize(resolved) == file.size else { continue }
            files[file.path] = resolved
        }
    }
}
