import FoundationEssentials

/// One file's transfer across attempts. Lives on the session's thread only.
final class FileJob: CurlEasyDelegate {
    let index: Int
    var request: FileRequest
    unowned let session: TransferSession
    var outcome: FileOutcome?
    /// Bytes on disk and fed to the hasher.
    var onDisk: Int64 = 0
    var notBefore: Double = 0
    var easy: CurlEasy?
    /// Reads the partial file as it grows (an archive unpacked while it downloads).
    var reader: (any PartialFileReader)?

    /// The partial file, open from `prepare` until the outcome.
    var file: FileDescriptor?
    /// Paused by the rate limiter; the session resumes it when the budget is back.
    var paused = false
    var hasher: SHA256Hasher?
    var attempts = 0
    var attemptsWithoutProgress = 0
    var onDiskAtAttemptStart: Int64 = 0
    var mismatchRetries = 0
    var requestedOffset: Int64 = 0
    /// The URL of this request: the catalog's, where a redirect of this attempt led, or
    /// `resolvedURL`.
    var url: String
    var redirectsFollowed = 0
    /// Where an earlier attempt's redirects led to the file's bytes (a CDN's signed URL): the
    /// next attempt of this run starts there instead of asking the catalog's URL again. When
    /// it is refused (expired: 400, 403, 410), the attempt after starts over at the catalog's
    /// URL for a fresh redirect, at no cost to the retry budget.
    var resolvedURL: String?
    /// This attempt started at `resolvedURL`.
    var startedAtResolved = false
    /// The next `begin` follows a redirect (the same attempt) rather than starting one.
    var followingRedirect = false
    /// Where the token sent with this request came from, when one was sent.
    var bearerFrom: String?

    // Per-response header state.
    var status = 0
    var contentRange: (start: Int64, end: Int64, total: Int64?)?
    var contentLength: Int64?
    var etag: String?
    var lastModified: String?
    var retryAfter: Int64?
    var contentEncoding: String?
    /// Set when a callback aborted the attempt on purpose.
    var abort: Abort?
    var accepting = false

    /// Files at least this big resume from a partial; smaller ones restart when their
    /// validators were not saved (their bytes are cheaper to fetch again than to trust).
    static let resumableSize: Int64 = 256 << 10
    /// Bytes an attempt must add to count as progress for the retry budget.
    static let progressQuantum: Int64 = 64 << 10
    /// Dirty bytes after which writeback is started early, so the final fsync of a big
    /// file waits for little.
    static let writebackChunk: Int64 = 16 << 20
    var writebackFrom: Int64 = 0
    /// Body bytes received and not yet written: gathered to `HashWorker.bufferSize`, then
    /// written with one call and handed, buffer and all, to the hash thread (`flushStage`).
    /// libcurl hands over 16 KiB at a time; a write, an allocation, a copy and a thread
    /// hand-off for each cost more than the disk did.
    var stage: UnsafeMutableRawBufferPointer?
    var staged = 0
    /// Body bytes taken in this loop cycle, and whether the transfer waits for the next
    /// cycle because it took its share (see `TransferSession.cycleShare`).
    var takenThisCycle = 0
    var pausedForShare = false
    /// The bytes a transfer takes in one loop cycle while others run.
    static let cycleShare = 1 << 20

    enum Abort: Equatable {
        case restart(String)
        case tooLong
        case sizeMismatch(Int64)
        case noSpace
        case system(SystemError)
        case encoding(String)
        case redirectRefused(String)
    }

    init(index: Int, request: FileRequest, session: TransferSession) {
        self.index = index
        self.request = request
        self.session = session
        self.url = request.url
    }

    func finish(_ result: FileOutcome) {
        // Bytes received but not written yet are kept (a resume will not fetch them again).
        if case .failed = result { flushStage() }
        if let stage { session.hashWorker.giveBack(stage) }
        stage = nil
        staged = 0
        if let file {
            // Never fsynced here, on the thread every transfer shares: whoever keeps the file
            // makes it durable (the install, one by one or by one `syncfs`; a repair), while
            // the writeback started as the bytes arrived (`startWriteback`) has done most of it.
            // A file that arrived whole starts the writeback of its last bytes now, not at
            // that sync: a small file's are all of them, and hundreds of small files left
            // dirty made the install's `syncfs` wait for them after the last byte came.
            if case .completed = result, onDisk > writebackFrom {
                file.startWriteback(from: writebackFrom, count: onDisk - writebackFrom)
                writebackFrom = onDisk
            }
            file.close()
            self.file = nil
        }
        outcome = result
    }

    // MARK: Before the network

    /// Opens the partial and hashes what is there (the resume base). A partial that is
    /// already complete is verified without any request.
    func prepare() {
        var size: Int64
        do {
            let file = try FileIO.openFile(request.partialPath, below: request.boundary, .readWrite, options: .create, createParents: true)
            self.file = file
            size = try file.size()
        } catch {
            finish(.failed(error.isOutOfSpace ? .noSpace(path: request.partialPath) : .system(error)))
            return
        }
        if request.sizeIsLimit {
            // Nothing declares the length, so nothing can be resumed: fetch it whole.
            if size > 0 { file?.truncate(to: 0) }
            size = 0
        } else if size > request.size {
            // Longer than the file can be: not a resume base (P5).
            restartFromZero("the partial file was longer than the declared size")
            size = 0
        } else if size > 0 && size < request.size, let shared = file, shared.linkCount() > 1 {
            // A file linked from elsewhere (another install, the Hugging Face cache) is never
            // written: short of its size it is not a resume base but someone else's file.
            restartFromZero("the linked copy is shorter than the file")
            size = 0
        } else if size > 0 && size < request.size && request.ifRange == nil {
            // No validator to ask with (none saved, or the server gave only a weak ETag):
            // without If-Range a resume could splice two versions of the file (P5).
            restartFromZero("no validator (a strong ETag or Last-Modified) was saved for this partial")
            size = 0
        }
        do {
            let hasher = try SHA256Hasher()
            if size > 0 {
                try hashExisting(into: hasher, bytes: size)
                TestHooks.point("hash")
            }
            self.hasher = hasher
            onDisk = size
            if size > 0 { reader?.written(upTo: size) }
        } catch is CancellationError {
            finish(.failed(.cancelled))
            return
        } catch {
            finish(.failed(.system(error as? SystemError ?? SystemError(message: "hash \(request.partialPath): \(error)"))))
            return
        }
        if onDisk == request.size && !request.sizeIsLimit { verifyComplete(fromNetwork: false) }
    }

    func hashExisting(into hasher: SHA256Hasher, bytes: Int64) throws {
        guard let file else { return }
        let bufferSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < bytes {
            // A multi-gigabyte resume base takes seconds to hash: stay cancellable.
            if session.cancellation.isCancelled { throw CancellationError() }
            let want = Int(min(Int64(bufferSize), bytes - offset))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += Int64(n)
        }
    }

    func restartFromZero(_ reason: String) {
        if let shared = file, shared.linkCount() > 1 {
            // A file adopted from another install by a hard link: its bytes are that
            // install's too, so they are never truncated or written; a fresh file takes
            // its name instead.
            shared.close()
            file = nil
            do {
                _ = try FileIO.removeTree(request.partialPath, below: request.boundary)
                file = try FileIO.openFile(request.partialPath, below: request.boundary, .readWrite, options: .create, createParents: true)
            } catch {
                finish(.failed(error.isOutOfSpace ? .noSpace(path: request.partialPath) : .system(error)))
                return
            }
        }
        if onDisk > 0 { reader?.restarted(reason: reason) }
        staged = 0
        file?.truncate(to: 0)
        hasher = try? SHA256Hasher()
        onDisk = 0
        session.onEvent(.restarted(file: request.name, reason: reason))
    }

    /// The file has all its bytes: compare the streamed hash. A mismatch discards the
    /// bytes (P6) and allows one fresh download before failing.
    func verifyComplete(fromNetwork: Bool) {
        flushStage()
        guard let hasher else { return }
        session.hashWorker.drain()
        let actual: String
        do {
            actual = try hasher.finalize()
        } catch {
            finish(.failed(.system(SystemError(message: "SHA-256 of \(request.partialPath): \(error)"))))
            return
        }
        self.hasher = nil
        if let expected = request.sha256, expected != actual {
            // Never a resume base again (P6): the bytes go, the file starts from zero.
            restartFromZero("SHA-256 mismatch (expected \(expected.prefix(12))…, got \(actual.prefix(12))…)")
            guard fromNetwork else { return }
            // One fresh download may cure a corrupted transfer; a second mismatch is final.
            mismatchRetries += 1
            if mismatchRetries > 1 {
                finish(.failed(.hashMismatch(expected: expected, actual: actual)))
            } else {
                notBefore = 0
            }
            return
        }
        session.onEvent(.completed(file: request.name, sha256: actual))
        finish(.completed(sha256: actual, etag: request.etag, lastModified: request.lastModified))
    }

    // MARK: An attempt

    /// Configures `easy` for the next attempt. Returns false when there is nothing to fetch.
    func begin(with easy: CurlEasy) -> Bool {
        guard outcome == nil, let file else { return false }
        if hasher == nil { hasher = try? SHA256Hasher() }
        if followingRedirect {
            followingRedirect = false
        } else {
            attempts += 1
            startedAtResolved = resolvedURL != nil
            url = resolvedURL ?? request.url
            redirectsFollowed = 0
        }
        status = 0
        contentRange = nil
        contentLength = nil
        retryAfter = nil
        contentEncoding = nil
        abort = nil
        accepting = false
        if request.sizeIsLimit && onDisk > 0 {
            // An earlier attempt ended short: without a declared length it starts over.
            reader?.restarted(reason: "an attempt ended short")
            file.truncate(to: 0)
            hasher = try? SHA256Hasher()
            onDisk = 0
        } else if onDisk > 0 && request.ifRange == nil {
            // The bytes so far came with no validator to resume with (P5).
            restartFromZero("the server gave no validator (a strong ETag or Last-Modified) to resume with")
        }
        onDiskAtAttemptStart = onDisk
        requestedOffset = onDisk
        writebackFrom = onDisk
        var headers: [String] = []
        // The same Range and If-Range on every hop of a redirect: the bytes continue the
        // partial wherever they finally come from.
        if onDisk > 0, let ifRange = request.ifRange { headers.append("If-Range: \(ifRange)") }
        // A credential goes only to the origin it belongs to, one request at a time; none
        // once the token was refused in this run (`TransferSession.tokenRefusedFrom`).
        let authorization = session.tokenRefusedFrom == nil ? session.credentials.authorization(for: url) : nil
        bearerFrom = authorization?.from
        if let authorization { headers.append(authorization.header) }
        easy.reset()
        do {
            try easy.configure(url: url, rangeFrom: onDisk, headers: headers, policy: session.policy,
                               netrcFile: session.credentials.netrcFile)
        } catch {
            finish(.failed(.refused(error.description, url: request.url)))
            return false
        }
        easy.delegate = self
        easy.tag = index
        self.easy = easy
        file.seek(to: onDisk)
        return true
    }
}

@available(*, unavailable)
extension FileJob: Sendable {}
