import FoundationEssentials

/// Fetches a set of files with libcurl's multi interface: several at once, each resumed
/// at byte level, hashed while streaming, capped at its declared size, retried with
/// backoff. Blocking: run it on a thread of its own.
final class TransferSession {
    let policy: TransferPolicy
    let cancellation: CancellationFlag
    let onEvent: (TransferEvent) -> Void
    /// The resume state, once per `tickInterval` (and at once for validators worth saving).
    let onTick: (TransferTick) -> Void
    /// The one progress throttle.
    let tickInterval: Double
    /// Loopback mirrors may redirect over plain http; public origins never.
    let allowPlainHTTPRedirects: Bool
    let hashWorker = HashWorker()
    /// The download's shared byte budget (`TransferPolicy.maxBytesPerSecond`).
    let limiter: RateLimiter?
    /// The credentials of this run (`TransferCredentials.resolved`), read when it starts.
    private(set) var credentials = ResolvedCredentials.none
    /// Where the Hugging Face token came from, once a request that carried it was answered
    /// 401: no request of this run carries it after that (`FileJob.freeRetry`).
    var tokenRefusedFrom: String?

    private var jobs: [FileJob] = []
    /// The bytes one transfer may take in a loop cycle while others run; nil when alone.
    private(set) var cycleShare: Int?
    private var totalBytes: Int64 = 0
    private var pendingValidators: [FileValidators] = []

    deinit { hashWorker.stop() }

    init(policy: TransferPolicy, cancellation: CancellationFlag, allowPlainHTTPRedirects: Bool, tickInterval: Double = 0.25,
         onEvent: @escaping (TransferEvent) -> Void, onTick: @escaping (TransferTick) -> Void) {
        self.policy = policy
        self.cancellation = cancellation
        self.allowPlainHTTPRedirects = allowPlainHTTPRedirects
        self.tickInterval = tickInterval
        self.limiter = policy.maxBytesPerSecond.map { RateLimiter(bytesPerSecond: $0) }
        self.onEvent = onEvent
        self.onTick = onTick
    }

    /// A session for a model's download or repair: the options' policy and progress interval.
    convenience init(options: DownloadOptions, cancellation: CancellationFlag, allowPlainHTTPRedirects: Bool,
                     onEvent: @escaping (TransferEvent) -> Void, onTick: @escaping (TransferTick) -> Void = { _ in }) {
        self.init(policy: options.policy, cancellation: cancellation, allowPlainHTTPRedirects: allowPlainHTTPRedirects,
                  tickInterval: options.progressInterval, onEvent: onEvent, onTick: onTick)
    }

    /// A job's response carried validators. Those of a file worth resuming go upward at
    /// once, before its first body byte is written; small files' wait for the next tick
    /// (if a crash loses them, the file simply restarts).
    func noteValidators(_ validators: FileValidators) {
        pendingValidators.append(validators)
        if validators.size >= FileJob.resumableSize { tick(.validators) }
    }

    private func tick(_ reason: TransferTick.Reason) {
        // Bytes received since the last write reach the disk at least once a tick: progress,
        // the resume state and a reader of the file never lag further, and a crash loses at
        // most a tick's worth (one staging buffer) of each file.
        for job in jobs where job.outcome == nil { job.flushStage() }
        let present = jobs.reduce(Int64(0)) { $0 + $1.onDisk }
        let validators = pendingValidators
        pendingValidators = []
        onTick(TransferTick(reason: reason, presentBytes: present, totalBytes: totalBytes, validators: validators))
    }

    /// The URL `job`'s next `begin` asks: the redirect it follows, else where its attempt
    /// starts (`FileJob.begin`).
    private static func nextURL(of job: FileJob) -> String {
        job.followingRedirect ? job.url : (job.resolvedURL ?? job.request.url)
    }

    /// Runs every request to an outcome (in request order).
    /// - Parameter readers: who reads a request's partial file while it is written, by the
    ///   request's index.
    func run(_ requests: [FileRequest], readers: [Int: any PartialFileReader] = [:]) throws(TransferFault) -> TransferResult {
        // Offline, a request whose bytes are not all on disk already is refused here, before
        // any file is read or any handle made; complete partials are still verified below.
        if let offline = policy.offlineBy,
           let needed = requests.first(where: { $0.sizeIsLimit || (FileIO.regularFileSize($0.partialPath) ?? 0) < $0.size }) {
            throw .offline(by: offline, url: needed.url)
        }
        // libcurl opens the CA file with a blocking read: a FIFO or a device named there
        // would hang every transfer. Checked here, without waiting, before any use.
        if let caFile = policy.caFile {
            do { _ = try FileIO.openForReading(caFile) } catch { throw .caFile(error) }
        }
        credentials = try policy.credentials.resolved()
        tokenRefusedFrom = nil

        jobs = requests.enumerated().map { FileJob(index: $0.offset, request: $0.element, session: self) }
        for job in jobs { job.reader = readers[job.index] }
        totalBytes = requests.reduce(Int64(0)) { $0 + $1.size }
        pendingValidators = []
        var queue = jobs.sorted { $0.request.size > $1.request.size }   // largest first: shortest total time
        var active: [Int: FileJob] = [:]
        // Handles on the multi handle's connections (small files, as HTTP/2 streams where
        // offered), and handles with connections of their own (big files).
        var spareHandles: [CurlEasy] = []
        var spareOwnHandles: [CurlEasy] = []
        var lastTick = 0.0
        let parallel = policy.parallelism(for: requests)
        // Small https files in flight beside `parallel` (nil: they count against it), and
        // the active jobs counted there; after a stall, fewer (`StreamWindow`).
        let streams = policy.streams(for: requests)
        var streaming: Set<Int> = []
        var window = StreamWindow(ceiling: streams ?? 1)

        // Existing partials are hashed once (resume base) before any network traffic, so the
        // first tick already counts them. A small file with nothing on disk yet is prepared
        // (its partial created) when it starts instead: creating hundreds of empty files first
        // would hold back every request, the big files' included, by a tenth of a second.
        for job in jobs where !cancellation.isCancelled {
            if job.request.size < TransferPolicy.ownConnectionSize && FileIO.regularFileSize(job.request.partialPath) == nil { continue }
            job.prepare()
        }
        if let offline = policy.offlineBy, let needed = jobs.first(where: { $0.outcome == nil }) {
            // A partial that did not verify would now be fetched again.
            for job in jobs where job.outcome == nil { job.finish(.failed(.cancelled)) }
            throw .offline(by: offline, url: needed.request.url)
        }
        let multi = try CurlMulti(maxHostConnections: max(8, parallel), maxStreams: streams ?? TransferPolicy.multiplexedFiles)
        cancellation.attach(multi.waker)
        defer {
            cancellation.attach(nil)
            // The handle lives until the detach above (ARC could otherwise end it at its last use).
            withExtendedLifetime(multi) {}
        }
        tick(.scheduled)

        while true {
            if cancellation.isCancelled {
                for job in active.values {
                    if let easy = job.easy { multi.remove(easy) }
                    job.finish(.failed(.cancelled))
                }
                for job in jobs where job.outcome == nil { job.finish(.failed(.cancelled)) }
                break
            }
            let now = monotonicSeconds()
            // Start what can start: small https files up to the stream window (HTTP/2 streams
            // on one connection where the server offers it), everything else up to `parallel`.
            var index = 0
            while index < queue.count && (active.count - streaming.count < parallel || (streams != nil && streaming.count < window.limit)) {
                let job = queue[index]
                if job.outcome != nil { queue.remove(at: index); continue }
                guard job.notBefore <= now else { index += 1; continue }
                let ownConnection = job.request.size >= TransferPolicy.ownConnectionSize
                let asStream = streams != nil && !ownConnection && Self.nextURL(of: job).lowercased().hasPrefix("https://")
                if asStream ? streaming.count >= window.limit : active.count - streaming.count >= parallel { index += 1; continue }
                // Not prepared yet (a small file with no partial): its partial is made now,
                // when it can start (not while it waits for a place: the files beyond the
                // first hundred streams held every request back by their creation).
                if job.file == nil {
                    job.prepare()
                    if job.outcome != nil { queue.remove(at: index); continue }
                }
                queue.remove(at: index)
                let easy: CurlEasy
                if ownConnection {
                    if let spare = spareOwnHandles.popLast() { easy = spare } else { easy = try CurlEasy(ownConnections: true) }
                } else {
                    if let spare = spareHandles.popLast() { easy = spare } else { easy = try CurlEasy() }
                }
                if job.begin(with: easy) {
                    try multi.add(easy)
                    active[job.index] = job
                    if asStream { streaming.insert(job.index) }
                } else {
                    if easy.ownsConnections { spareOwnHandles.append(easy) } else { spareHandles.append(easy) }
                    if job.outcome == nil { queue.append(job) }
                }
            }
            if active.isEmpty && queue.allSatisfy({ $0.outcome != nil }) { break }

            // One transfer may not hold the loop: while several run, each takes at most
            // `cycleShare` bytes a cycle, then waits (paused) for the next one. A fast big
            // file would otherwise keep one `perform` reading it for hundreds of
            // milliseconds while no small file's request goes out.
            cycleShare = active.count > 1 ? FileJob.cycleShare : nil
            for job in active.values {
                job.takenThisCycle = 0
                if job.pausedForShare {
                    job.pausedForShare = false
                    job.paused = false
                    job.easy?.unpause()
                }
            }
            try multi.perform()
            let finished = multi.finished()
            for (easy, result) in finished {
                multi.remove(easy)
                guard let job = active.removeValue(forKey: easy.tag) else { continue }
                if streaming.remove(job.index) != nil {
                    if easy.isStall(result) {
                        window.stalled(inFlight: streaming.count + 1, now: now, stallTimeout: policy.stallTimeout)
                    } else if result == .ok {
                        window.arrivedWhole()
                    }
                }
                job.complete(result)
                easy.delegate = nil
                if easy.ownsConnections { spareOwnHandles.append(easy) } else { spareHandles.append(easy) }
                if job.outcome == nil { queue.append(job) }
            }
            if now - lastTick >= tickInterval {
                lastTick = now
                tick(.scheduled)
            }
            // Sleep until activity, a retry is due, or the next tick.
            let nextRetry = queue.filter { $0.outcome == nil }.map(\.notBefore).min() ?? .infinity
            // Done: the last file finished in this perform. (Polling now would sleep a whole
            // tick with nothing left to wait for: 0.1-0.25 s added to every download.)
            if active.isEmpty && queue.allSatisfy({ $0.outcome != nil }) { break }
            // Transfers the rate limiter paused go on when its budget is back.
            var nextBudget = Double.infinity
            if let limiter, active.values.contains(where: { $0.paused && !$0.pausedForShare }) {
                nextBudget = limiter.secondsUntilAvailable()
                if nextBudget <= 0 {
                    for job in active.values where job.paused && !job.pausedForShare {
                        job.paused = false
                        job.easy?.unpause()
                    }
                    continue
                }
            }
            // A transfer that stopped at its share has bytes waiting: no sleep.
            if active.values.contains(where: \.pausedForShare) { continue }
            // Transfers ended: their places go to queued files now. (Polling first would wait
            // for activity that may not come until the next tick: when a round of HTTP/2
            // streams has ended together, nothing else is in flight.)
            if !finished.isEmpty && queue.contains(where: { $0.outcome == nil && $0.notBefore <= now }) { continue }
            let wait = max(0.001, min(tickInterval, nextRetry - monotonicSeconds(), nextBudget))
            multi.poll(timeoutMs: Int32(clamping: ExternalNumber.int64(clamping: wait * 1000) ?? 1))
        }
        tick(.final)
        return TransferResult(outcomes: jobs.map { $0.outcome ?? .failed(.cancelled) },
                              bytesOnDisk: jobs.reduce(Int64(0)) { $0 + $1.onDisk })
    }
}

