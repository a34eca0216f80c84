/// Why a download, verify or delete did not finish. Every case names the model, the file
/// or URL, and what to do next; nothing is left half-installed whichever case it is.
public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
    case unknownModel(String)
    /// Another process (or task) holds the model's lock.
    case busy(modelId: String)
    /// The download cannot fit: checked before any byte is transferred.
    case insufficientStorage(modelId: String, requiredMb: Int, availableMb: Int)
    /// The disk filled up mid-way; the bytes downloaded so far are kept.
    case diskFull(modelId: String, file: String, neededMb: Int, keptBytes: Int64)
    /// A final HTTP answer (404, 403, 410, …).
    case httpStatus(modelId: String, file: String, url: String, status: Int)
    /// The bytes' SHA-256 differs from the catalog's; the partial was discarded.
    case integrityMismatch(modelId: String, file: String, expected: String, actual: String)
    /// The server sent more than, or other than, the declared size.
    case sizeMismatch(modelId: String, file: String, url: String, declared: Int64, served: Int64?)
    /// An archive failed the unpacking checks (P8).
    case unsafeArchive(modelId: String, url: String, problem: String)
    /// Network/server trouble outlasted the retry budget: try again later.
    case temporary(modelId: String, file: String, url: String, cause: String)
    /// Redirect to http, TLS verification failure, redirect loop, unsupported URL.
    case refused(modelId: String, url: String, reason: String)
    /// Cancelled (Task cancellation, SIGINT); partial data is kept for a later resume.
    case cancelled(modelId: String, keptBytes: Int64)
    /// A file system or records failure.
    case io(modelId: String, message: String)
    /// The catalog has no source this build can use for the model.
    case noSource(modelId: String)
    /// `verify` of a model that is not installed.
    case notInstalled(modelId: String)

    public var description: String {
        switch self {
        case .unknownModel(let id):
            return "unknown model '\(id)'. Run 'glasses-local list' to see the catalog's model ids."
        case .busy(let id):
            return "\(id) is being downloaded or changed by another process. Wait for it to finish (or stop it), then retry."
        case let .insufficientStorage(id, required, available):
            return "\(id) needs \(required) MiB of storage but only \(available) MiB is available. Free \(required - available) MiB, or choose a store on a bigger disk with --store / EXTENTOS_MODELS_DIR. Nothing was downloaded."
        case let .diskFull(id, file, needed, kept):
            return "the disk filled up while writing \(file) of \(id). Free at least \(needed) MiB and run the download again: the \(kept) bytes already downloaded are kept and will not be fetched again."
        case let .httpStatus(id, file, url, status):
            return "\(file) of \(id): the server answered HTTP \(status) for \(url). Check the catalog or --mirror URL; a 404 is not retried."
        case let .integrityMismatch(id, file, expected, actual):
            return "\(file) of \(id) failed verification: expected SHA-256 \(expected), got \(actual). The bad bytes were discarded; the source or mirror serves a different file — check --mirror or report it."
        case let .sizeMismatch(id, file, url, declared, served):
            let what = served.map { "\($0) bytes" } ?? "more bytes"
            return "\(file) of \(id): \(url) served \(what), the catalog declares \(declared). The bytes were discarded; the source serves a different file — check --mirror or the catalog."
        case let .unsafeArchive(id, url, problem):
            return "the archive of \(id) from \(url) was refused: \(problem). Nothing was installed; report the archive to the catalog's maintainer."
        case let .temporary(id, file, url, cause):
            return "\(file) of \(id) could not be fetched from \(url): \(cause). This is probably temporary; run the download again later (partial data is kept)."
        case let .refused(id, url, reason):
            return "\(id): \(url) was refused: \(reason)."
        case let .cancelled(id, kept):
            return "download of \(id) interrupted; \(kept) bytes are kept and the next download resumes from them."
        case let .io(id, message):
            return "\(id): \(message)"
        case .noSource(let id):
            return "\(id) has no usable source in the catalog."
        case .notInstalled(let id):
            return "\(id) is not installed; download it first (glasses-local download \(id))."
        }
    }
}
