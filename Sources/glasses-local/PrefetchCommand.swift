import LocalModelKit

/// `glasses-local prefetch`: what cron or a systemd timer runs at night, so the model
/// `autoChoice()` wants is on disk when the app starts. One file over the engine's
/// `prefetch` (itself over the one download path); plain lines, JSON lines with --json,
/// nothing but failures with --quiet.
enum PrefetchCommand {
    /// The policy a run keeps to, and the transfer options.
    struct Options: OptionGroup {
        let minFreeMb = Option("--min-free-mb", value: "N", help: "Never leave less than N MiB free after a download.", .digits(0...(1 << 40)))
        let maxBytes = Option("--max-bytes", value: "N", help: "Fetch at most N bytes in this run; a bigger model waits (its partial data is kept).", .digits(0...(1 << 50)))
        let window = Option("--window", value: "HH:MM-HH:MM", help: "Only in this local-time window (across midnight works); a download still running when it closes stops cleanly.",
                            ValueParser(accepts: "HH:MM-HH:MM in local time (22:00-06:00 runs across midnight)") { (text: String) throws(Refusal) -> TimeWindow in
                                guard let window = TimeWindow(text) else { throw .notAccepted }
                                return window
                            })
        let requireAC = Flag("--require-ac", help: "Only on mains power (a machine without a battery counts as on mains).")
        let maxLoad = Option("--max-load", value: "L", help: "Only while the 1-minute load average is under L.", .number(accepts: "0…10000") { $0 >= 0 && $0 <= 10_000 })
        let requireUnmetered = Flag("--require-unmetered", help: "Only on a connection NetworkManager does not call metered (yes or guess-yes); without NetworkManager the state is unknown, counted as unmetered, and the run says so.")
        let jitter = Option("--jitter", value: "S", help: "Wait a random 0…S seconds before any network use.", .seconds(0...86_400, accepts: "0…86400"))
        let rateLimit = Option("--rate-limit", value: "BYTES_PER_S", help: "At most this many bytes a second.",
                               .digits(1024...Int64.max, accepts: "a whole number of bytes a second, at least 1024"))
        let includeVoice = Flag("--include-voice", help: "Also the voice model.")
        let dryRun = Flag("--dry-run", help: "Say what would happen and why; touch nothing.")
        let transfer = TransferOptions()
    }
    static let options = Options()

    static let command = Command(
        "prefetch", abstract: "Download what autoChoice wants, unattended, within a policy (for cron or a systemd timer).",
        discussion: "Downloads autoChoice's download target (and the voice with --include-voice), or nothing, saying why. Each condition that stops a run is one line naming it and the value seen. With EXTENTOS_CATALOG_URL set, the signed catalog there is fetched first (as catalog update does); a failed update is a warning and the run goes on with the catalog already trusted. Offline (--offline, EXTENTOS_OFFLINE=1, HF_HUB_OFFLINE=1, TRANSFORMERS_OFFLINE=1) it fetches nothing, skips the catalog update and exits 0 with an offline line. Overrides for tests: EXTENTOS_NOW, EXTENTOS_POWER_SUPPLY_DIR, EXTENTOS_LOADAVG, EXTENTOS_METERED=yes|no.",
        options: options,
        exits: [ExitCase(.ok, "Done; or nothing to do; or a condition stopped it; or the window closed mid-download (the partial data is kept); or another prefetch is running.")]
            + downloadExits.map { $0.status == .temporary ? ExitCase(.temporary, "A transient failure: the scheduler retries later.") : $0 },
        run: run)

    static func policy(_ context: CommandContext) throws(CLIError) -> PrefetchPolicy {
        let inv = context.invocation
        var policy = PrefetchPolicy()
        policy.minFreeMb = inv[options.minFreeMb] ?? 0
        policy.maxBytes = inv[options.maxBytes]
        policy.window = inv[options.window]
        policy.requireAC = inv[options.requireAC]
        policy.requireUnmetered = inv[options.requireUnmetered]
        policy.maxLoad = inv[options.maxLoad]
        policy.jitterSeconds = inv[options.jitter] ?? 0
        policy.includeVoice = inv[options.includeVoice]
        policy.dryRun = inv[options.dryRun]
        if let url = context.environment["EXTENTOS_CATALOG_URL"], !url.isEmpty {
            if let problem = CatalogRules.urlProblem(url) { throw .usage("EXTENTOS_CATALOG_URL \(URLOrigin.redacted(url)): \(problem)", of: inv.command) }
            policy.catalogURL = url
            policy.catalogKeys = context.trustedKeys()
        }
        return policy
    }

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let policy = try policy(context)
        var options = try TransferCommands.options(context)
        if let rate = context.invocation[Self.options.rateLimit] { options.policy.maxBytesPerSecond = rate }
        let engine = try context.engine()
        let probe = PrefetchConditionsProbe(environment: context.environment)
        let c = context.console
        for problem in probe.overrideProblems() where !c.quiet { c.err("warning: \(problem)") }
        func line(_ event: String, _ text: String, _ fields: [(String, JSONValue)] = []) {
            if c.json {
                c.printJSON(.object([("event", .string(event))] + fields + [("message", .string(text))]))
            } else if !c.quiet {
                c.out("prefetch: " + text)
            }
        }
        let interrupt = InterruptHandler()
        do {
            let outcome = try engine.prefetch(policy: policy, conditions: probe, options: options, cancellation: interrupt.flag,
                onEvent: { event in
                    switch event {
                    case .stopped(let why): line("stopped", "not now: " + why)
                    case .nothingToDo(let why): line("nothing", "nothing to fetch: " + why)
                    case let .skipped(id, reason): line("skipped", "\(id) skipped: \(reason)", [("modelId", .string(id))])
                    case let .wouldFetch(id, missing):
                        line("would-fetch", "would fetch \(id) (\(Format.bytes(missing)) missing)", [("modelId", .string(id)), ("missingBytes", .int(missing))])
                    case .waiting(let s): line("jitter", "waiting \(Format.fixed(s, decimals: 1)) s first (--jitter)", [("seconds", .double(s))])
                    case let .fetching(id, missing):
                        line("fetching", "fetching \(id) (\(Format.bytes(missing)) missing)", [("modelId", .string(id)), ("missingBytes", .int(missing))])
                    case let .fetched(id, path): line("fetched", "\(id) installed in \(path)", [("modelId", .string(id)), ("path", .string(path))])
                    case let .catalogUpdated(.accepted(version, previous, signer), url):
                        line("catalog", "catalog version \(version) accepted from \(url) (signed by \(signer)); it was \(previous)",
                             [("outcome", "accepted"), ("catalogVersion", JSONValue(version))])
                    case let .catalogUpdated(.upToDate(version), _):
                        line("catalog", "catalog version \(version) is current", [("outcome", "upToDate"), ("catalogVersion", JSONValue(version))])
                    case let .catalogUpdateFailed(error, url, inUse):
                        // A warning, not the run's failure: the trusted catalog is used.
                        if c.json {
                            c.printJSON(.object([("event", "catalog-update-failed"), ("url", .string(url)), ("catalogVersion", JSONValue(inUse))] + CLIError(error).fields))
                        } else if !c.quiet {
                            c.err("prefetch: warning: the catalog update from \(url) failed; catalog version \(inUse) is used: \(error)")
                        }
                    case .wouldUpdateCatalog(let url): line("would-update-catalog", "would update the catalog from \(url) first", [("url", .string(url))])
                    case .meteredUnknown(let why):
                        line("metered-unknown", "the metered state is unknown (\(why)); going on as on an unmetered connection", [("reason", .string(why))])
                    case let .offline(by, what):
                        line("offline", "offline (\(by)): \(what) not fetched; nothing uses the network", [("offline", .string(by))])
                    case let .windowClosed(id, window, kept):
                        line("window-closed", "the window \(window) closed; \(id) stopped cleanly, \(Format.bytes(kept)) kept for the next run",
                             [("modelId", .string(id)), ("keptBytes", .int(kept))])
                    }
                },
                onDownload: { event in
                    switch event {
                    case let .retry(file, attempt, cause, _): line("retry", "\(file): \(cause); retry \(attempt)")
                    case let .restarted(file, reason): line("restart", "\(file): starting over (\(reason))")
                    case let .sourceFallback(failed, reason): line("fallback", "source \(failed) failed (\(reason)); trying the next")
                    case .skippedExtras(let entries): line("extras-skipped", "skipped \(entries.count) archive entries the catalog does not list")
                    case let .adopted(files, bytes): line("already-in-store", "\(files.count) file(s) (\(Format.bytes(bytes))) already in the store: linked, not downloaded")
                    case let .foundLocally(files, bytes, total, place): line("found-locally", Format.foundLocally(files.count, of: total, bytes: bytes, in: place))
                    case .usedLocalCopies(let used):
                        line("local-copies-used", Format.usedLocalCopies(used), Format.usedLocalCopiesFields(used).map { ($0.key, $0.value) })
                    case .phase, .progress, .stall, .fileCompleted, .done: break
                    }
                })
            if outcome == .alreadyRunning { line("already-running", "another prefetch is running; this one does nothing") }
            return .ok
        } catch {
            let cli = CLIError(error)
            if c.json { c.printJSON(.object([("event", "error")] + cli.fields)) }
            c.err("Error: \(cli.message)")
            return cli.exitCode
        }
    }
}
