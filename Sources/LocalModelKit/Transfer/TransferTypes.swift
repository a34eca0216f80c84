// The values a transfer takes and gives: requests, outcomes, failures, events.

/// One file to fetch into a partial file.
package struct FileRequest: Sendable, Equatable {
    /// The catalog path (or a label like "archive"), for messages and events.
    package var name: String
    /// The URL asked first (https, or plain http to loopback); redirects are followed from it.
    package var url: String
    /// Where the bytes accumulate; kept across runs for byte-level resume.
    package var partialPath: String
    /// The folder `partialPath` must stay inside (the store): every folder below it is
    /// opened without following links, and so is the file (P11).
    package var boundary: String
    /// The file's exact size in bytes: never more is written (or the cap, see ``sizeIsLimit``).
    package var size: Int64
    /// When true, `size` is a cap, not the length: the file is whatever the server sends,
    /// at most `size` bytes (small metadata such as a catalog and its signature, whose
    /// length nothing declares). Never resumed; more than the cap fails as `tooLong`.
    package var sizeIsLimit: Bool
    /// Expected SHA-256; nil means size-checked only.
    package var sha256: String?
    /// Validators the server gave last time, for `If-Range`.
    package var etag: String?
    /// The `Last-Modified` the server gave last time: the `If-Range` when there is no
    /// strong ETag.
    package var lastModified: String?

    /// A request for one file; the validators of an earlier attempt make it a resume.
    package init(name: String, url: String, partialPath: String, boundary: String, size: Int64, sha256: String?,
                etag: String? = nil, lastModified: String? = nil, sizeIsLimit: Bool = false) {
        self.name = name
        self.url = url
        self.partialPath = partialPath
        self.boundary = boundary
        self.size = size
        self.sizeIsLimit = sizeIsLimit
        self.sha256 = sha256
        self.etag = etag
        self.lastModified = lastModified
    }

    /// The `If-Range` value a resume asks with: a strong ETag, else Last-Modified
    /// (RFC 9110 §13.1.5: a weak ETag may not be used); nil when there is neither, and a
    /// partial is then fetched again from zero rather than resumed (P5).
    package var ifRange: String? {
        if let etag, !etag.hasPrefix("W/"), !etag.isEmpty { return etag }
        return lastModified.flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// How one file ended.
package enum FileOutcome: Sendable, Equatable {
    /// Complete, `size` bytes, hash computed while streaming.
    case completed(sha256: String, etag: String?, lastModified: String?)
    /// It failed for this reason (the partial kept or discarded as the reason says).
    case failed(FileFailure)
}

/// Why a file failed, before the downloader names the model.
package enum FileFailure: Sendable, Equatable {
    /// A final HTTP answer (404, 403, 410, …): never retried.
    /// A final HTTP answer from `url` (after redirects; `requested` is the URL asked for).
    case httpStatus(Int, url: String, requested: String)
    /// The bytes' SHA-256 differs from the catalog's (the partial was discarded).
    case hashMismatch(expected: String, actual: String)
    /// The server sent more than the declared size (the partial was discarded).
    case tooLong(declared: Int64)
    /// The server's size for the file differs from the catalog's.
    case sizeMismatch(declared: Int64, served: Int64)
    /// No space left while writing; the partial is kept.
    case noSpace(path: String)
    /// Transient failures exhausted the retry budget.
    case retriesExhausted(cause: String, url: String)
    /// The server asked to wait longer than the policy allows.
    case retryAfterTooLong(seconds: Int64, url: String)
    /// Redirect to plain http, unsupported scheme, TLS verification, redirect loop, …
    case refused(String, url: String)
    /// 401 or 403 from the source's own origin: a credential is needed, or the one sent
    /// (`sent`) was refused.
    case authRequired(Int, url: String, sent: CredentialSent)
    /// A system call on the partial file failed.
    case system(SystemError)
    /// The run was cancelled; the partial is kept for a resume.
    case cancelled
}

/// A transfer's answer, the one value that carries what it learned upward: each file's
/// outcome (with its hash and validators) and the bytes left on disk.
package struct TransferResult: Sendable, Equatable {
    /// One per request, in request order.
    package var outcomes: [FileOutcome]
    /// Bytes of the requested files on disk at the end: what a resume will not fetch again
    /// (a file whose bytes were discarded counts zero).
    package var bytesOnDisk: Int64
}

/// Reads a partial file while the transfer writes it (an archive unpacked as it arrives).
/// The transfer drives it directly, from the thread that writes the file: it learns of
/// each write as it lands, and of a restart before any new byte replaces what it read.
protocol PartialFileReader: AnyObject {
    /// The first `bytes` of the file are on disk.
    func written(upTo bytes: Int64)
    /// The file starts again from zero: what was read is no longer the download's.
    func restarted(reason: String)
}

/// What a transfer reports while it runs, for people (events and messages): nothing
/// below the transfer acts on these.
package enum TransferEvent: Sendable, Equatable {
    /// The partial could not serve as a resume base and starts again from zero.
    case restarted(file: String, reason: String)
    /// A transient failure (`cause`: a reset, a timeout, a 5xx or 429); attempt `attempt`
    /// follows after `delay` seconds (`Retry-After` honoured).
    case retry(file: String, attempt: Int, cause: String, delay: Double)
    /// Under 1 KiB/s for the stall timeout: the connection is dropped and retried.
    case stalled(file: String)
    /// The file arrived whole, and its bytes hash to `sha256`.
    case completed(file: String, sha256: String)
}

/// A server's validators for one file, kept for the next attempt's `If-Range`.
package struct FileValidators: Sendable, Equatable {
    /// The request's name (the catalog path).
    package var name: String
    /// The file's size, as requested.
    package var size: Int64
    /// The ETag of the answer that carried the bytes (never a redirect's).
    package var etag: String?
    /// The `Last-Modified` of that answer.
    package var lastModified: String?
}

/// The resume state of a transfer as its session knows it, handed upward as one value
/// once per tick: the bytes on disk, and the validators that arrived since the last tick.
/// The session is the only one that knows these; nothing above it `stat`s a partial file
/// to learn them again.
package struct TransferTick: Sendable, Equatable {
    /// Why this tick was sent.
    package enum Reason: Sendable, Equatable {
        /// The regular tick (the one progress throttle).
        case scheduled
        /// Validators of a file worth resuming arrived: persist them before its first body byte.
        case validators
        /// The session ended; whatever is pending goes now.
        case final
    }
    /// Why it was sent.
    package var reason: Reason
    /// Bytes of every requested file on disk (verified resume bases and new bytes).
    package var presentBytes: Int64
    /// Bytes of every requested file once complete.
    package var totalBytes: Int64
    /// Validators that arrived since the last tick, to persist for the next resume.
    package var validators: [FileValidators]
}

extension LocalModelError {
    /// One file's failure, named for its model. `onDisk` tells, when needed, the bytes of
    /// the model kept on disk and the bytes still to download.
    init(_ failure: FileFailure, modelId id: String, request: FileRequest, onDisk: () -> (kept: Int64, missing: Int64)) {
        switch failure {
        case let .httpStatus(status, url, requested):
            self = .httpStatus(modelId: id, file: request.name, url: url, status: status, redirectedFrom: url == requested ? nil : requested)
        case let .hashMismatch(expected, actual): self = .integrityMismatch(modelId: id, file: request.name, expected: expected, actual: actual)
        case .tooLong(let declared): self = .sizeMismatch(modelId: id, file: request.name, url: request.url, declared: declared, served: nil)
        case let .sizeMismatch(declared, served): self = .sizeMismatch(modelId: id, file: request.name, url: request.url, declared: declared, served: served)
        case .noSpace:
            let (kept, missing) = onDisk()
            self = .diskFull(modelId: id, file: request.name, neededMb: max(1, Int((missing + (1 << 20) - 1) >> 20)), keptBytes: kept)
        case let .retriesExhausted(cause, url): self = .temporary(modelId: id, file: request.name, url: url, cause: cause)
        case let .retryAfterTooLong(seconds, url):
            self = .temporary(modelId: id, file: request.name, url: url,
                              cause: "the server asks to retry after \(seconds == .max ? "an unbounded time" : "\(seconds) s"), longer than this run waits")
        case let .refused(reason, url): self = .refused(modelId: id, url: url, reason: reason)
        case let .authRequired(status, url, sent): self = .authRequired(modelId: id, file: request.name, url: url, status: status, sent: sent)
        case .system(let error): self = .system(error, modelId: id)
        case .cancelled: self = .cancelled(modelId: id, keptBytes: onDisk().kept)
        }
    }
}
