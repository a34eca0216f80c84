
/// What an unattended prefetch may do (docs/prefetch.md).
package struct PrefetchPolicy: Sendable {
    /// Never leave less than this free after a download (MiB).
    package var minFreeMb: Int64 = 0
    /// A byte budget for this run; a model needing more is left for a later run.
    package var maxBytes: Int64?
    /// Only inside this local-time window; a download still running when it closes stops.
    package var window: TimeWindow?
    /// Only on mains power.
    package var requireAC = false
    /// Only while the 1-minute load average is under this.
    package var maxLoad: Double?
    /// Only on a connection that is not metered (NetworkManager's `Metered`, or
    /// `EXTENTOS_METERED`); an unknown state counts as unmetered, and the run says so.
    package var requireUnmetered = false
    /// A random delay of up to this many seconds before any network use.
    package var jitterSeconds: Double = 0
    /// Also the voice model.
    package var includeVoice = false
    /// Say what would happen and why; touch nothing.
    package var dryRun = false
    /// A signed catalog to update from first (`EXTENTOS_CATALOG_URL`); a failed update
    /// never stops the run, which then uses the catalog it already trusts.
    package var catalogURL: String?
    /// The keys trusted to sign that catalog.
    package var catalogKeys: [(name: String, pem: String)] = TrustedCatalogKeys.shipped

    /// No window, no power, load, size or space limit, no jitter: every check off.
    package init() {}
}

/// What a prefetch reports, one line each.
package enum PrefetchEvent: Sendable, Equatable {
    /// A condition stopped the run before any network use: the condition and the value seen.
    case stopped(String)
    /// Nothing to fetch, and why.
    case nothingToDo(String)
    /// This model is left for a later run (over `--max-bytes`, under `--min-free-mb`, busy).
    case skipped(modelId: String, reason: String)
    /// `--dry-run`: this would be fetched.
    case wouldFetch(modelId: String, missingBytes: Int64)
    /// The random `--jitter` wait before any request.
    case waiting(seconds: Double)
    /// A download starts, with the bytes it still lacks.
    case fetching(modelId: String, missingBytes: Int64)
    /// A model is installed, at `path`.
    case fetched(modelId: String, path: String)
    /// The window closed mid-download: stopped cleanly, partial data kept.
    case windowClosed(modelId: String, window: TimeWindow, keptBytes: Int64)
    /// The catalog update before the downloads: what it did, or why it failed (the run
    /// goes on with the catalog already trusted, `inUse`).
    case catalogUpdated(CatalogUpdateOutcome, url: String)
    /// The catalog update failed (a warning): the run goes on with version `inUse`.
    case catalogUpdateFailed(LocalModelError, url: String, inUse: Int)
    /// `--dry-run`: the catalog would be updated from this URL first.
    case wouldUpdateCatalog(url: String)
    /// `--require-unmetered` could not learn the metered state (`why`): the run goes on as
    /// on an unmetered connection.
    case meteredUnknown(why: String)
    /// The network is off (`by`: the switch); `what` was not fetched. The run ends with exit 0.
    case offline(by: String, what: String)
}

/// How a prefetch ended.
package enum PrefetchOutcome: Sendable, Equatable {
    /// Another prefetch holds the store-wide lock; nothing was done.
    case alreadyRunning
    /// Ran to its end (fetched what it could, or stopped by a condition or the window).
    case finished(fetched: [String])
}

extension LocalModelEngine {
    /// The models a prefetch would fetch: `autoChoice()`'s download target, and the voice
    /// with `includeVoice`; or why there is nothing.
    package func prefetchTargets(includeVoice: Bool) throws(LocalModelError) -> (targets: [CatalogModel], why: String?) {
        let decision: AutoDecision
        do { decision = try autoChoice() } catch { throw .wrap(error) }
        var targets: [CatalogModel] = []
        if let id = decision.downloadTarget, let model = catalog.model(id: id) { targets.append(model) }
        if includeVoice, let voice = catalog.models.first(where: { $0.kind == .voice }) {
            let installed: Bool
            do { installed = try status(of: voice.id).isInstalled } catch { throw .wrap(error) }
            if !installed { targets.append(voice) }
        }
        guard targets.isEmpty else { return (targets, nil) }
        let why: String
        if let id = decision.modelId {
            why = "autoChoice runs \(id), which is installed; nothing to download"
        } else {
            why = "autoChoice answers cloud (\(decision.cloudReasonName ?? "no reason")) with no download target"
        }
        return (targets, includeVoice ? why + "; the voice is installed" : why)
    }

    /// Runs one unattended prefetch under the store-wide prefetch lock. Conditions are
    /// checked before any network use; downloads go through `downloadBlocking`, the one path.
    package func prefetch(policy: PrefetchPolicy, conditions probe: PrefetchConditionsProbe, options: DownloadOptions,
                         cancellation: CancellationFlag, onEvent: @escaping (PrefetchEvent) -> Void,
                         onDownload: @escaping (DownloadEvent) -> Void) throws(LocalModelError) -> PrefetchOutcome {
        // The lock: a dry run takes none (it touches nothing); a second run leaves at once.
        let lock = FileLock(path: layout.locksRoot + "/@prefetch.lock")
        if !policy.dryRun {
            do {
                try layout.createFolders()
                guard try lock.tryLock() else {
                    try? open().records.append(.prefetch, modelId: nil, detail: "another prefetch was running; nothing done")
                    return .alreadyRunning
                }
            } catch { throw .wrap(error) }
        }
        defer { lock.unlock() }
        var fetched: [String] = []
        var summary: [String] = []
        defer {
            if !policy.dryRun {
                try? open().records.append(.prefetch, modelId: nil, detail: summary.isEmpty ? "nothing done" : summary.joined(separator: "; "))
            }
        }

        // Conditions, before any network use.
        let now = probe.read()
        if let window = policy.window, window.secondsLeft(atSecondOfDay: now.secondOfDay) == nil {
            let why = "outside the window \(window): it is \(now.clock)"
            summary.append("stopped: " + why); onEvent(.stopped(why))
            return .finished(fetched: [])
        }
        if policy.requireAC, now.power == .battery {
            let why = "on battery (\(now.powerSource)); --require-ac waits for mains power"
            summary.append("stopped: " + why); onEvent(.stopped(why))
            return .finished(fetched: [])
        }
        if let maxLoad = policy.maxLoad, let load = now.load1, load >= maxLoad {
            let why = "the 1-minute load average is \(load), not under --max-load \(maxLoad)"
            summary.append("stopped: " + why); onEvent(.stopped(why))
            return .finished(fetched: [])
        }
        // Offline nothing uses the network, so whether it would cost is not asked.
        if policy.requireUnmetered && options.policy.offlineBy == nil {
            let metered = probe.metered()
            switch metered.state {
            case .metered:
                let why = "the connection is metered (\(metered.source)); --require-unmetered waits for an unmetered one"
                summary.append("stopped: " + why); onEvent(.stopped(why))
                return .finished(fetched: [])
            case .unknown:
                summary.append("metered state unknown (\(metered.source)); treated as unmetered")
                onEvent(.meteredUnknown(why: metered.source))
            case .unmetered:
                break
            }
        }
        // Offline, nothing waits for the network: no jitter, no catalog update.
        var policy = policy
        if options.policy.offlineBy != nil { policy.jitterSeconds = 0 }

        // The catalog first (after the jitter: it is network use); the run then goes on over
        // whichever catalog is trusted at that point.
        var engine = self
        var jittered = false
        if let url = policy.catalogURL {
            if let offline = options.policy.offlineBy {
                summary.append("offline (\(offline)): catalog update skipped")
                onEvent(.offline(by: offline, what: "the catalog update from \(url)"))
            } else if policy.dryRun {
                onEvent(.wouldUpdateCatalog(url: url))
            } else {
                try jitter(policy, onEvent: onEvent, cancellation: cancellation, modelId: "catalog update")
                jittered = true
                do throws(LocalModelError) {
                    let update = try updateCatalog(from: url, keys: policy.catalogKeys, options: options, cancellation: cancellation)
                    if case .accepted(let version, _, _) = update.outcome {
                        engine = LocalModelEngine(layout: layout, catalog: update.catalog, probe: self.probe, memoryShare: memoryShare)
                        summary.append("catalog version \(version) accepted")
                    }
                    onEvent(.catalogUpdated(update.outcome, url: url))
                } catch {
                    if case .cancelled = error { throw error }
                    summary.append("catalog update failed (\(error.code.rawValue)); catalog version \(catalog.catalogVersion) used")
                    onEvent(.catalogUpdateFailed(error, url: url, inUse: catalog.catalogVersion))
                }
            }
        }
        return try engine.prefetchModels(policy: policy, conditions: probe, options: options, cancellation: cancellation,
                                         jittered: jittered, summary: &summary, fetched: &fetched,
                                         onEvent: onEvent, onDownload: onDownload)
    }

    private func jitter(_ policy: PrefetchPolicy, onEvent: (PrefetchEvent) -> Void, cancellation: CancellationFlag,
                        modelId: String) throws(LocalModelError) {
        guard policy.jitterSeconds > 0 && !policy.dryRun else { return }
        let delay = Double.random(in: 0...policy.jitterSeconds)
        onEvent(.waiting(seconds: delay))
        let until = SystemClock.monotonicSeconds() + delay
        while SystemClock.monotonicSeconds() < until {
            if cancellation.isCancelled { throw .cancelled(modelId: modelId, keptBytes: 0) }
            Threads.sleep(microseconds: 100_000)
        }
    }

    /// The downloads of a prefetch, over this engine's catalog.
    private func prefetchModels(policy: PrefetchPolicy, conditions probe: PrefetchConditionsProbe, options: DownloadOptions,
                                cancellation: CancellationFlag, jittered: Bool, summary: inout [String], fetched: inout [String],
                                onEvent: @escaping (PrefetchEvent) -> Void,
                                onDownload: @escaping (DownloadEvent) -> Void) throws(LocalModelError) -> PrefetchOutcome {
        let (targets, why) = try prefetchTargets(includeVoice: policy.includeVoice)
        if let why {
            summary.append(why); onEvent(.nothingToDo(why))
            return .finished(fetched: [])
        }
        if !jittered { try jitter(policy, onEvent: onEvent, cancellation: cancellation, modelId: targets[0].id) }

        var budgetLeft = policy.maxBytes
        for model in targets {
            let status: ModelStatus
            do { status = try self.status(of: model.id) } catch { throw .wrap(error) }
            let missing = max(0, model.downloadBytes - status.fit.presentBytes)
            if let left = budgetLeft, missing > left {
                let reason = "needs \(missing) more bytes, \(left) left of --max-bytes; left for a later run (its \(status.fit.presentBytes) bytes on disk are kept)"
                summary.append("\(model.id) skipped: " + reason); onEvent(.skipped(modelId: model.id, reason: reason))
                continue
            }
            let freeAfter = status.fit.availableBytes - status.fit.requiredBytes
            if freeAfter < policy.minFreeMb << 20 {
                let reason = "would leave \(max(0, freeAfter) >> 20) MiB free, under the --min-free-mb \(policy.minFreeMb) floor"
                summary.append("\(model.id) skipped: " + reason); onEvent(.skipped(modelId: model.id, reason: reason))
                continue
            }
            if policy.dryRun {
                onEvent(.wouldFetch(modelId: model.id, missingBytes: missing))
                budgetLeft = budgetLeft.map { $0 - missing }
                continue
            }
            onEvent(.fetching(modelId: model.id, missingBytes: missing))
            // The window is watched while the download runs: when it closes, the download
            // stops as an interrupt does (partial data kept) and the run ends cleanly.
            let flag = CancellationFlag()
            let watch = WindowWatch()
            Threads.start(name: "gl-prefetch") {
                while !watch.isDone {
                    if cancellation.isCancelled { flag.cancel() }
                    if let window = policy.window, window.secondsLeft(atSecondOfDay: probe.secondOfDay()) == nil {
                        watch.closed()
                        flag.cancel()
                    }
                    Threads.sleep(microseconds: 100_000)
                }
            }
            defer { watch.done() }
            do throws(LocalModelError) {
                let path = try downloadBlocking(modelId: model.id, options: options, cancellation: flag, onEvent: onDownload)
                fetched.append(model.id)
                summary.append("\(model.id) fetched")
                onEvent(.fetched(modelId: model.id, path: path))
                budgetLeft = budgetLeft.map { $0 - missing }
            } catch {
                switch error {
                case .cancelled(_, let kept) where watch.didClose:
                    guard let window = policy.window else { throw error }
                    summary.append("\(model.id): the window \(window) closed; \(kept) bytes kept")
                    onEvent(.windowClosed(modelId: model.id, window: window, keptBytes: kept))
                    return .finished(fetched: fetched)
                case .busy:
                    let reason = "another process is downloading it"
                    summary.append("\(model.id) skipped: " + reason); onEvent(.skipped(modelId: model.id, reason: reason))
                case .transfer(let failure, _) where failure.offlineSwitch != nil:
                    let by = failure.offlineSwitch ?? ""
                    // The network is off: an outcome of the run, not its failure.
                    summary.append("offline (\(by)): \(model.id) not fetched")
                    onEvent(.offline(by: by, what: model.id))
                    return .finished(fetched: fetched)
                default:
                    summary.append("\(model.id) failed: \(error.code.rawValue)")
                    throw error
                }
            }
        }
        return .finished(fetched: fetched)
    }
}

/// The window watcher's state, shared by the download thread and the watcher.
private final class WindowWatch: @unchecked Sendable {
    // @unchecked: both flags are read and written under `lock`.
    private let lock = Threads.Lock()
    private var finished = false
    private var windowClosed = false

    var isDone: Bool { lock.withLock { finished } }
    var didClose: Bool { lock.withLock { windowClosed } }
    func done() { lock.withLock { finished = true } }
    func closed() { lock.withLock { windowClosed = true } }
}
