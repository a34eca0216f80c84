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
    /// - Parameter partials: the names in `.partial`, when the caller listed it (once for many
    ///   models): a model with no entry there has no partial data, and no `lstat` is made.
    func bytesPresent(in layout: StoreLayout, partials: Set<String>?, held: () -> Set<String>) -> Int64

    /// Requests that fetch `files` again into `root` (a repair); nil when this kind cannot
    /// fetch single files. `rewrite` turns a catalog URL into the one fetched (`--mirror`,
    /// `HF_ENDPOINT`: `DownloadOptions.fetchURL`).
    func requests(for files: [CatalogFile], into root: String, boundary: String, rewrite: (String) -> String) -> [FileRequest]?

    /// Fetches the model into the store, under `run`'s lock, and returns the verified tree.
    func fetch(in run: any DeliveryRun) throws(LocalModelError) -> FetchedTree
}

/// The download a delivery runs in, as the delivery sees it: what it may ask (the store's
/// folders, the saved validators, a transfer, a URL as fetched, adopted local copies) and
/// how it reports back (events, typed failures). The download (`DownloadRun`) conforms;
/// the delivery never sees the records, the recorder, the options or the engine, so data
/// goes down as requests and comes back up as values (docs/ARCHITECTURE.md, "Folders and
/// their layers"). As corelibs' `_EasyHandle` reports to its delegate.
protocol DeliveryRun: AnyObject {
    /// The store: partial, staging and install folders.
    var layout: StoreLayout { get }
    /// Set when the download is cancelled; an unpacking step polls it.
    var cancellation: CancellationFlag { get }
    /// The validators an earlier attempt saved, by file name (an archive's under
    /// `ArchiveDelivery.validatorKey`), for `If-Range` resumes.
    var savedValidators: [String: FileRecord] { get }
    /// Reports an event (a phase, skipped archive entries) to the download's listener.
    var onEvent: (DownloadEvent) -> Void { get }
    /// A catalog URL as this download fetches it (`--mirror`, `HF_ENDPOINT`).
    func rewrite(_ url: String) -> String
    /// Runs the requests; the download records their progress (resume state, events).
    /// - Parameters:
    ///   - validatorKey: the name the validators are saved under (nil: each file's own).
    ///   - readers: who reads a request's partial file while it is written, by index.
    func transfer(_ requests: [FileRequest], plainHTTP: Bool, validatorKey: String?,
                  readers: [Int: any PartialFileReader]) throws(LocalModelError) -> TransferResult
    /// One file's failure as the download's error, with the bytes left on disk.
    func failure(_ failure: FileFailure, request: FileRequest, result: TransferResult, downloadBytes: Int64) -> LocalModelError
    /// A system failure as the download's error.
    func io(_ error: any Error) -> LocalModelError
    /// Links the files installed models hold into the partial folder; their paths.
    func adoptStoredCopies() -> [String]
    /// Links the files the Hugging Face cache holds into the partial folder; nil when none.
    func adoptHuggingFaceCopies() -> CacheAdoption?
    /// What came from the cache once the transfer verified it.
    func usedLocalCopies(_ adoption: CacheAdoption, fromStore: [String]) -> LocalCopyUse
}

extension DeliveryRun {
    /// A transfer with each file's own validators and no reader.
    func transfer(_ requests: [FileRequest], plainHTTP: Bool) throws(LocalModelError) -> TransferResult {
        try transfer(requests, plainHTTP: plainHTTP, validatorKey: nil, readers: [:])
    }
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
