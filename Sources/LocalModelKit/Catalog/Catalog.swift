// The catalog: which models exist, which files make each one, and where to fetch them.

/// What a model is for.
public enum ModelKind: String, Sendable, CaseIterable {
    /// A language model on the local-tier ladder; `autoChoice` picks among these.
    case llm
    /// A text-to-speech voice bundle (Kokoro), installed under `voices/<id>/`.
    case voice
}

/// One file of a model's installed tree.
public struct CatalogFile: Sendable, Hashable {
    /// Relative path inside the model folder, `/`-separated, never `..` or absolute.
    public var path: String
    /// Exact size in bytes.
    public var size: Int64
    /// Lowercase hex SHA-256, or nil when no trusted hash is known (the file is then
    /// size-checked only, unless an archive source's hash covers it).
    public var sha256: String?

    /// A file entry as the catalog gives it (the loader has checked the path and hash).
    public init(path: String, size: Int64, sha256: String?) {
        self.path = path
        self.size = size
        self.sha256 = sha256
    }
}

/// Archive formats the unpacker enables; nothing else is read.
public enum ArchiveFormat: String, Sendable, CaseIterable {
    /// A tar compressed with bzip2 (the Kokoro voice's release); the bzip2 is decoded
    /// block by block on every core.
    case tarBz2 = "tar.bz2"
    /// A tar compressed with gzip.
    case tarGz = "tar.gz"
    /// A tar compressed with xz.
    case tarXz = "tar.xz"
    /// A tar compressed with Zstandard.
    case tarZst = "tar.zst"
    /// An uncompressed tar.
    case tar
    /// A zip archive.
    case zip
}

/// One archive that unpacks to a model's whole `files` tree.
public struct ArchiveSource: Sendable, Hashable {
    /// Where the archive is fetched (https, or plain http to loopback).
    public var url: String
    /// Its format: only this one is enabled when it is read.
    public var format: ArchiveFormat
    /// The archive's exact size in bytes.
    public var size: Int64
    /// The archive's SHA-256 (lowercase hex): the tree counts only once the whole archive
    /// matched it.
    public var sha256: String
    /// Leading path components dropped from every entry (like `tar --strip-components`).
    public var stripComponents: Int
}

/// Where a model's bytes come from. Sources are tried in catalog order.
public enum ModelSource: Sendable, Hashable {
    /// Each file fetched at `baseURL` + percent-encoded path. `baseURL` ends with `/`.
    case files(baseURL: String)
    /// One archive, verified, then extracted and checked against `files`.
    case archive(ArchiveSource)

    /// Which kind of source this is.
    public var kind: SourceKind {
        switch self {
        case .files: return .files
        case .archive: return .archive
        }
    }

    /// How the record names it: `archive <url>` or `files <base url>`.
    public var recordText: String { kind.rawValue + " " + primaryURL }

    /// The URL(s) this source names, for `--mirror` and messages.
    public var primaryURL: String {
        switch self {
        case .files(let base): return base
        case .archive(let a): return a.url
        }
    }
}

/// The two ways a catalog source delivers a model.
public enum SourceKind: String, Sendable, CaseIterable {
    /// One request per file (resumable file by file).
    case files
    /// One release archive, verified as a whole, then unpacked.
    case archive
}

/// One model of the catalog.
public struct CatalogModel: Sendable, Hashable {
    /// The stable id (`local-qwen3-1.7b`): the folder name and what every command takes.
    public var id: String
    /// An LLM of the ladder or a voice.
    public var kind: ModelKind
    /// The name to show people.
    public var displayName: String
    /// Memory the loaded model needs, in MB (not its download size).
    public var requiredMb: Int
    /// Whether `autoChoice` may pick it.
    public var autoEligible: Bool
    /// The upstream revision the URLs pin, when there is one.
    public var revision: String?
    /// Every file of the installed tree, with its size and (usually) its SHA-256.
    public var files: [CatalogFile]
    /// Where the bytes come from, tried in this order.
    public var sources: [ModelSource]
    /// The credential each source asks for (`"auth"` on a source); a source not listed
    /// needs none (netrc still applies to every request).
    package var sourceAuth: [ModelSource: SourceAuth] = [:]
    /// Whether the model comes from the catalog in use or from the store's own catalog of
    /// models a user added (`UserCatalog`). Not a catalog field: where the model was read
    /// decides it.
    public var origin: ModelOrigin = .catalog

    /// Bytes of the installed tree.
    public var installedBytes: Int64 { files.reduce(0) { $0 + $1.size } }

    /// Bytes fetched over the network by the preferred (first) source.
    public var downloadBytes: Int64 { preferredDelivery?.downloadBytes ?? installedBytes }

    /// The same model with only its sources of `kind` (nil: all of them, in catalog order),
    /// so sizes, partial data and fit follow the source that will be used.
    public func using(_ kind: SourceKind?) -> CatalogModel {
        guard let kind else { return self }
        var copy = self
        copy.sources = sources.filter { $0.kind == kind }
        return copy
    }

    /// True when some file has no known hash and no archive hash covers it.
    public var hasSizeOnlyFiles: Bool {
        if preferredDelivery?.vouchesForUnhashedFiles == true { return false }
        return files.contains { $0.sha256 == nil }
    }
}

/// A key a catalog names as its publisher's next signing key (key rotation). It is trusted
/// for later catalogs only once a catalog naming it was accepted, that is, signed by a key
/// already trusted; or once it ships in `Catalog/keys/`.
public struct CatalogKey: Sendable, Equatable {
    /// A file-name-safe name (letters, digits, `.`, `_`, `-`).
    public var name: String
    /// The Ed25519 public key, SubjectPublicKeyInfo PEM.
    public var publicKey: String

    /// A named key, as a catalog's `nextKey` gives it.
    public init(name: String, publicKey: String) {
        self.name = name
        self.publicKey = publicKey
    }
}

/// A validated catalog.
public struct Catalog: Sendable {
    /// The catalog format's version (1); a loader refuses any other.
    public var schemaVersion: Int
    /// Monotonic version; a store refuses a catalog older than one it has seen (rollback).
    public var catalogVersion: Int
    /// When the publisher made it (RFC 3339 UTC), for people.
    public var generatedAt: String
    /// When this catalog stops being trusted (RFC 3339 UTC), nil when it never does: a
    /// catalog read after this moment is refused, so that a mirror cannot freeze devices
    /// on an old, still validly signed catalog. The built-in catalog has none: it is the floor.
    public var expiresAt: String?
    /// The publisher's next signing key, when it announces one (key rotation).
    public var nextKey: CatalogKey?
    /// The models, in the catalog's order (the LLM ladder smallest first, then the voice).
    public var models: [CatalogModel]
    private var index: [String: Int]

    /// A catalog from its values. ``EngineSetup`` reads validated ones from JSON; a catalog
    /// made here is trusted as given (the built-in one was validated when it was generated).
    public init(schemaVersion: Int = 1, catalogVersion: Int, generatedAt: String, expiresAt: String? = nil, nextKey: CatalogKey? = nil,
                models: [CatalogModel]) {
        self.schemaVersion = schemaVersion
        self.catalogVersion = catalogVersion
        self.generatedAt = generatedAt
        self.expiresAt = expiresAt
        self.nextKey = nextKey
        self.models = models
        // By position, reading the id alone: `for m in models` copies each model (a reference
        // count per field, twice), a twentieth of a 5,000-model catalog's load.
        var index: [String: Int] = [:]
        index.reserveCapacity(models.count)
        for n in models.indices where index[models[n].id] == nil { index[models[n].id] = n }
        self.index = index
    }

    /// Whether `expiresAt` is at or before `now` (seconds since 1970, UTC).
    public func isExpired(now: Int64) -> Bool {
        guard let expiresAt, let end = CatalogRules.epochSeconds(expiresAt) else { return false }
        return now >= end
    }

    /// The model with this id, or nil.
    public func model(id: String) -> CatalogModel? {
        index[id].map { models[$0] }
    }

    /// This catalog with `more` models after its own (ids it already has are skipped).
    func adding(_ more: [CatalogModel]) -> Catalog {
        var copy = self
        copy.models.reserveCapacity(models.count + more.count)
        copy.index.reserveCapacity(models.count + more.count)
        // Each added model copied once, into place; only the added ones indexed (the first
        // of an id, as `init` does).
        for n in more.indices where index[more[n].id] == nil {
            if copy.index[more[n].id] == nil { copy.index[more[n].id] = copy.models.count }
            copy.models.append(more[n])
        }
        return copy
    }

}
