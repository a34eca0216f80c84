// What a download reports: a delivery reports its phases and skipped entries through its
// `DeliveryRun`, the transfer its retries, stalls and restarts; the download adds
// progress, local copies and the end.

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
