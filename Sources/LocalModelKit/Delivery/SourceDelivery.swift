/// How one kind of catalog source brings a model's tree into the store. Each kind is one
/// type in a file of its own (`FilesDelivery`, `ArchiveDelivery`) that knows its requests,
/// the room it needs, its unpack step and how a mirror lays it out; everything else (the
/// download's lock and space check, the records, the install) is the same for every kind.
/// `ModelSource.delivery(for:)` is the one place that picks the type.
/// docs/ARCHITECTURE.md, "Adding a source kind", walks through a new one.
protocol SourceDelivery {
    /// The catalog source this delivers.
    var source: ModelSource { get }
    /// The model it delivers (with the sources the download may use).
    var model: CatalogModel { get }
    /// Bytes this source fetches over the network.
    var downloadBytes: Int64 { get }
    /// Room on disk the install needs beyond the downloaded bytes while the tree is built
    /// (an archive is unpacked beside itself).
    var buildRoom: Int64 { get }
    /// Whether this source's own hash vouches for files the catalog gives no SHA-256 of: an
    /// installed tree of such a model cannot be re-verified file by file from disk alone.
    var vouchesForUnhashedFiles: Bool { get }
    /// The folder below a mirror's root where `mirror` lays the model's files out, so the
    /// mirror serves this source's URLs; nil when this kind cannot be served file by file.
    var mirrorFolder: String? { get }
    /// The Hugging Face repository and revision this source fetches from, when it is one
    /// (its snapshot in the Hub client's cache may already hold the files).
    var huggingFaceRepository: (repo: String, revision: String)? { get }

    /// Bytes of this source's partial data in the store: what a resume will not fetch again.
    /// - Parameter held: `sha256:size` keys of the files installed models hold (read only
    ///   when this kind can use them).
    func bytesPresent(in layout: StoreLayout, held: () -> Set<String>) -> Int64

    /// Requests that fetch `files` again into `root` (a repair); nil when this kind cannot
    /// fetch single files. `rewrite` turns a catalog URL into the one fetched (`--mirror`,
    /// `HF_ENDPOINT`: `DownloadOptions.fetchURL`).
    func requests(for files: [CatalogFile], into root: String, boundary: String, rewrite: (String) -> String) -> [FileRequest]?

    /// Fetches the model into the store, under `run`'s lock, and returns the verified tree.
    func fetch(in run: DownloadRun) throws(LocalModelError) -> FetchedTree
}

extension SourceDelivery {
    var mirrorFolder: String? { nil }
    var huggingFaceRepository: (repo: String, revision: String)? { nil }
    func requests(for files: [CatalogFile], into root: String, boundary: String, rewrite: (String) -> String) -> [FileRequest]? { nil }
}

/// A source's fetch, done: the verified tree in the store, and what the transfer learned
/// about each file, carried to the install (which records it without reading anything back).
struct FetchedTree {
    /// The tree, inside the store (the partial folder, or the staging folder).
    var path: String
    /// SHA-256 of each file as computed on the way (catalog path → hex).
    var hashes: [String: String]
    /// The server's validators of each file, for the record (catalog path → validators).
    var validators: [String: FileValidators] = [:]
    /// Archive entries the catalog does not list, skipped (for the history).
    var skippedExtras: [String] = []
    /// Files taken from outside the store (the Hugging Face cache) and verified in it.
    var localCopies: LocalCopyUse?
    /// Where the tree came from, for the record and the history.
    var origin: String
}

extension ModelSource {
    /// The type that delivers this source. The one switch over the source kinds.
    func delivery(for model: CatalogModel) -> any SourceDelivery {
        switch self {
        case .files(let base): return FilesDelivery(source: self, model: model, baseURL: base)
        case .archive(let archive): return ArchiveDelivery(source: self, model: model, archive: archive)
        }
    }
}

extension CatalogModel {
    /// The deliveries of the sources, in catalog order.
    var deliveries: [any SourceDelivery] { sources.map { $0.delivery(for: self) } }

    /// The preferred (first) source's delivery.
    var preferredDelivery: (any SourceDelivery)? { sources.first.map { $0.delivery(for: self) } }
}
