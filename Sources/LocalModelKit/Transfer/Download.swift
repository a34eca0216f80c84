import FoundationEssentials

/// Where a download is.
public enum DownloadPhase: String, Sendable {
    /// Reading the records, checking the space, finding what is already on disk.
    case resolve
    /// Fetching bytes (each hashed as it lands).
    case download
    /// Checking files already on disk (a resume base, a linked copy) against the catalog.
    case verify
    /// Unpacking an archive source (while it downloads, or from the verified file).
    case unpack
    /// Making the verified tree durable, renaming it into place and committing the record.
    case install
}

/// What a download reports while it runs (the CLI's JSON lines, the richer API).
public enum DownloadEvent: Sendable, Equatable {
    /// The download entered this phase.
    case phase(DownloadPhase)
    /// Byte progress; `fraction` is non-decreasing and below 1 until the install commits.
    case progress(bytes: Int64, total: Int64, fraction: Double, bytesPerSecond: Double)
    /// A transient failure of `file` (`cause`: a reset, a timeout, a 5xx, a 429); attempt
    /// `attempt` follows after `delay` seconds.
    case retry(file: String, attempt: Int, cause: String, delay: Double)
    /// `file` moved under 1 KiB/s for the stall timeout: its connection is retried.
    case stall(file: String)
    /// `file`'s partial data could not be resumed and is fetched again from zero.
    case restarted(file: String, reason: String)
    /// `file` arrived whole and matched its SHA-256 (or size).
    case fileCompleted(file: String)
    /// A source failed and the next one is tried.
    case sourceFallback(failed: String, reason: String)
    /// Entries of a release archive the catalog does not list (a README, a LICENSE),
    /// skipped: never installed, never a refusal.
    case skippedExtras(entries: [String])
    /// Files whose SHA-256 an installed model already holds: hard-linked (or copied) from
    /// it, verified from disk, never downloaded.
    case adopted(files: [String], bytes: Int64)
    /// Files found outside the store (the Hugging Face cache): linked (or copied) into the
    /// partial data, then verified like any resume base; a bad one is fetched. `total` is
    /// the model's file count.
    case foundLocally(files: [String], bytes: Int64, total: Int, place: String)
    /// Once, after the install committed and before `.done`, when files came from outside
    /// the store (the Hugging Face cache): those that passed verification, those refused
    /// and downloaded instead, and how many were downloaded in all (zero: nothing was).
    case usedLocalCopies(LocalCopyUse)
    /// Exactly once, after the install committed. `alreadyInstalled` when nothing was fetched.
    case done(path: String, alreadyInstalled: Bool)
}

extension DownloadEvent {
    /// A transfer's report, as a download tells it.
    init(_ event: TransferEvent) {
        switch event {
        case let .restarted(file, reason): self = .restarted(file: file, reason: reason)
        case let .retry(file, attempt, cause, delay): self = .retry(file: file, attempt: attempt, cause: cause, delay: delay)
        case .stalled(let file): self = .stall(file: file)
        case .completed(let file, _): self = .fileCompleted(file: file)
        }
    }
}

/// How a download behaves.
public struct DownloadOptions: Sendable {
    /// Retries, timeouts, the rate limit, the CA file, credentials and the network switch.
    public var policy = TransferPolicy()
    /// Replaces the origin (scheme://host:port) of every source URL; `HF_ENDPOINT`
    /// (`policy.hubEndpoint`) is then not used.
    public var mirror: String?
    /// Shortest interval between two progress events.
    public var progressInterval: Double = 0.25
    /// Only sources of this kind are tried (`--source`); nil tries the catalog's sources in order.
    public var source: SourceKind?

    /// Options; the defaults are the command's (`TransferPolicy()` reads nothing from the
    /// environment: ``TransferPolicy/init(environment:)`` does).
    public init(policy: TransferPolicy = TransferPolicy(), mirror: String? = nil, progressInterval: Double = 0.25,
                source: SourceKind? = nil) {
        self.policy = policy
        self.mirror = mirror
        self.progressInterval = progressInterval
        self.source = source
    }
}

extension LocalModelEngine {
    // MARK: Public entry points

    /// Downloads, verifies and installs a model; async, cancellable.
    ///
    /// Runs the blocking transfer on a thread of its own. Task cancellation stops the
    /// transfer within a poll interval (≤ 100 ms) and keeps the partial data.
    public func download(modelId: String, options: DownloadOptions = DownloadOptions(),
                         onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }) async throws(LocalModelError) -> String {
        let flag = CancellationFlag()
        let result: Result<String, LocalModelError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, LocalModelError>, Never>) in
                Threads.start(name: "gl-download") {
                    let outcome: Result<String, LocalModelError>
                    do throws(LocalModelError) {
                        outcome = .success(try self.downloadBlocking(modelId: modelId, options: options, cancellation: flag, onEvent: onEvent))
                    } catch {
                        outcome = .failure(error)
                    }
                    continuation.resume(returning: outcome)
                }
            }
        } onCancel: {
            flag.cancel()
        }
        return try result.get()
    }

    /// Downloads, verifies and installs a model on the calling thread.
    /// - Returns: the install folder.
    public func downloadBlocking(modelId: String, options: DownloadOptions, cancellation: CancellationFlag,
                                 onEvent: @escaping (DownloadEvent) -> Void) throws(LocalModelError) -> String {
        guard let found = catalog.model(id: modelId) else { throw .unknownModel(modelId) }
        // With a source asked for, sizes, partial data and the space check follow it.
        let model = found.using(options.source)
        guard !model.sources.isEmpty else { throw .noSource(modelId: modelId, kind: options.source) }
        onEvent(.phase(.resolve))
        // libcurl loads while the store is opened and the records are written (unless the
        // model looks installed already, or nothing may be fetched).
        let warm = options.policy.offlineBy == nil && !FileIO.isDirectory(layout.installPath(id: model.id, kind: model.kind))
            ? CurlEasy.warmUp() : nil
        defer { warm?.wait() }
        let records: Records
        records = try open().records
        try requireStoreCatalog()
        // What the Hugging Face cache holds of it may make a per-file source the better one.
        let copies = huggingFaceCopies(of: model)
        let chosen = copies.map { model.preferringFiles(given: $0, layout: layout) } ?? model
        // The Hugging Face token may go to the origins of this model's sources that ask for
        // it (through HF_ENDPOINT when that applies); a bad HF_ENDPOINT stops here.
        let options = try options.authorizing(chosen)
        return try withModelLock(modelId) { () throws(LocalModelError) in
            try DownloadRun(engine: self, model: chosen, records: records, options: options, cancellation: cancellation,
                            huggingFaceCopies: copies, onEvent: onEvent).execute()
        }
    }
}
