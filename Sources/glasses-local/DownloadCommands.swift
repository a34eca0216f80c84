import Dispatch
import FoundationEssentials
import LocalModelKit

/// How hard a transfer tries again: `download`, `verify`, `prefetch`, `voice download` and
/// `catalog update` share them (through `TransferOptions`, or alone).
struct RetryOptions: OptionGroup {
    let retries = Option("--retries", value: "N", help: "Attempts in a row without progress before giving up (default 6).", .integer(0...100))
    let retryDelay = Option("--retry-delay", value: "S", help: "First retry delay in seconds, doubled each time up to 60 (default 1).", .seconds(0...600))
}

/// The options of every command that downloads model files.
struct TransferOptions: OptionGroup {
    let parallel = Option("--parallel", value: "N", help: "Files fetched at once (default: 4, up to 16 when many files are small).", .integer(1...32))
    let retry = RetryOptions()

    static let shared = TransferOptions()
}

/// The statuses of a download, for `download`, `voice download` and `prefetch`.
let downloadExits: [ExitCase] = [
    ExitCase(.doesNotFit, "It cannot fit."),
    ExitCase(.integrity, "An integrity failure."),
    ExitCase(.busy, "Another process is installing the model."),
    ExitCase(.temporary, "The network or server failed for longer than the retry budget (retry later)."),
    ExitCase(.interrupted, "Interrupted (the partial data is kept)."),
]

/// SIGINT/SIGTERM/SIGHUP → cancel the transfer (partial data kept), then exit 130.
/// SIGHUP is a closed terminal or a dropped ssh session, whose default action would end
/// the process at once instead of stopping the transfer cleanly — unless the process was
/// started with SIGHUP ignored (`nohup`): then the user asked it to outlive the terminal,
/// and it does.
final class InterruptHandler: @unchecked Sendable {
    // @unchecked: `sources` is written once in init and only read in deinit; the flag is Sendable.
    let flag = CancellationFlag()
    private var sources: [DispatchSourceSignal] = []

    /// Read once, before any handler of ours changes the disposition.
    private static let hangupIgnoredAtStart = Signals.isIgnored(Signals.hangup)

    init() {
        for sig in [Signals.interrupt, Signals.terminate] + (Self.hangupIgnoredAtStart ? [] : [Signals.hangup]) {
            Signals.ignore(sig)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { [flag] in flag.cancel() }
            source.resume()
            sources.append(source)
        }
    }

    deinit {
        for source in sources { source.cancel() }
    }
}

/// Draws progress: a bar on a terminal, periodic lines otherwise, JSON lines with --json.
final class ProgressPrinter {
    enum Style { case bar, lines, json, none }
    let style: Style
    let console: Console
    let modelId: String
    private var lastLine = 0.0
    private var barShown = false
    /// Set by the `.done` event: nothing had to be fetched.
    private(set) var wasAlreadyInstalled = false
    /// Set by the `.usedLocalCopies` event: what came from the Hugging Face cache, for the
    /// summary line (printed whatever the progress style, unless --quiet or --json).
    private(set) var localCopies: LocalCopyUse?

    init(console: Console, modelId: String, noProgress: Bool) {
        self.console = console
        self.modelId = modelId
        if console.json { style = .json }
        else if console.quiet || noProgress { style = .none }
        else if ProcessEnvironment.isTerminal(2) { style = .bar }
        else { style = .lines }
    }

    func handle(_ event: DownloadEvent) {
        if case .done(_, let already) = event { wasAlreadyInstalled = already }
        if case .usedLocalCopies(let used) = event { localCopies = used }
        switch style {
        case .json: json(event)
        case .bar, .lines: human(event)
        case .none: break
        }
    }

    private func json(_ event: DownloadEvent) {
        let id = JSONValue.string(modelId)
        switch event {
        case .phase(let p): console.printJSON(["event": "phase", "modelId": id, "phase": .string(p.rawValue)])
        case let .progress(bytes, total, fraction, rate):
            console.printJSON(["event": "progress", "modelId": id, "bytes": .int(bytes), "total": .int(total),
                               "fraction": .double((fraction * 10000).rounded() / 10000), "bytesPerSecond": .int(Int64(rate))])
        case let .retry(file, attempt, cause, delay):
            console.printJSON(["event": "retry", "modelId": id, "file": .string(file), "attempt": JSONValue(attempt),
                               "cause": .string(cause), "delaySeconds": .double((delay * 100).rounded() / 100)])
        case .stall(let file): console.printJSON(["event": "stall", "modelId": id, "file": .string(file)])
        case let .restarted(file, reason):
            console.printJSON(["event": "restart", "modelId": id, "file": .string(file), "reason": .string(reason)])
        case .fileCompleted(let file): console.printJSON(["event": "file", "modelId": id, "file": .string(file)])
        case let .sourceFallback(failed, reason):
            console.printJSON(["event": "fallback", "modelId": id, "failedSource": .string(failed), "reason": .string(reason)])
        case .skippedExtras(let entries):
            console.printJSON(["event": "extras-skipped", "modelId": id, "entries": .array(entries.map(JSONValue.string))])
        case let .adopted(files, bytes):
            console.printJSON(["event": "already-in-store", "modelId": id, "files": .array(files.map(JSONValue.string)), "bytes": .int(bytes)])
        case let .foundLocally(files, bytes, total, place):
            console.printJSON(["event": "found-locally", "modelId": id, "files": .array(files.map(JSONValue.string)), "bytes": .int(bytes),
                               "total": .int(Int64(total)), "place": .string(place)])
        case .usedLocalCopies(let used):
            console.printJSON(.object([("event", "local-copies-used"), ("modelId", id)] + Format.usedLocalCopiesFields(used)))
        case let .done(path, already):
            console.printJSON(["event": already ? "skipped" : "done", "modelId": id, "path": .string(path), "exitCode": 0])
        }
    }

    private func human(_ event: DownloadEvent) {
        switch event {
        case .phase(let p):
            if p != .resolve && p != .download { clearBar(); console.err("\(modelId): \(p.rawValue)…") }
        case let .progress(bytes, total, fraction, rate):
            let eta = rate > 0 ? Format.duration(Double(total - bytes) / rate) : "--:--"
            let text = "\(Int(fraction * 100))%  \(Format.bytes(bytes)) / \(Format.bytes(total))  \(Format.bytes(Int64(rate)))/s  ETA \(eta)"
            if style == .bar {
                let width = 24
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
                console.errRedrawLine("\(modelId) [\(bar)] \(text)")
                barShown = true
            } else {
                let now = monotonicSeconds()
                if now - lastLine >= 5 || fraction >= 1 {
                    lastLine = now
                    console.out("\(modelId): \(text)")
                }
            }
        case let .retry(file, attempt, cause, delay):
            clearBar()
            console.err("\(modelId): \(file): \(cause); retry \(attempt) in \(Format.fixed(delay, decimals: 1)) s")
        case .stall(let file):
            clearBar()
            console.err("\(modelId): \(file): stalled, retrying")
        case let .restarted(file, reason):
            clearBar()
            console.err("\(modelId): \(file): starting over (\(reason))")
        case .fileCompleted: break
        case let .sourceFallback(failed, reason):
            clearBar()
            console.err("\(modelId): source \(failed) failed (\(reason)); trying the next source")
        case .skippedExtras(let entries):
            clearBar()
            console.err("\(modelId): skipped \(entries.count) archive entr\(entries.count == 1 ? "y" : "ies") the catalog does not list: \(entries.prefix(5).joined(separator: ", "))")
        case let .adopted(files, bytes):
            clearBar()
            console.err("\(modelId): \(files.count) file\(files.count == 1 ? "" : "s") (\(Format.bytes(bytes))) already in the store: linked, not downloaded")
        case let .foundLocally(files, bytes, total, place):
            clearBar()
            console.err("\(modelId): " + Format.foundLocally(files.count, of: total, bytes: bytes, in: place))
        case .usedLocalCopies:
            // Said in the summary, after the install (`TransferCommands.download`).
            break
        case .done: clearBar()
        }
    }

    func clearBar() {
        if barShown {
            console.errRedrawLine("")
            barShown = false
        }
    }
}

enum TransferCommands {
    /// `verify`'s options.
    struct VerifyOptions: OptionGroup {
        let repair = Flag("--repair", help: "Fetch the bad files again.")
        let transfer = TransferOptions()
    }
    static let verifyOptions = VerifyOptions()

    /// The commands that change the store, as values (name, help, options, run).
    static let commands: [Command] = [
        Command("download", abstract: "Download, verify and install models (resumable; Ctrl-C keeps the partial data).",
                discussion: "Every byte is checked against the catalog's SHA-256 while it streams; the model is installed with one rename and one records transaction. An interrupted download resumes at the byte where it stopped.",
                arguments: [Argument("id", "One or more model ids.", .many)], options: TransferOptions.shared,
                exits: downloadExits, run: download),
        Command("delete", abstract: "Delete installed models and their partial data; print the space freed.",
                arguments: [Argument("id", "One or more model ids.", .many)],
                exits: [ExitCase(.busy, "Refused while another process downloads the model.")], run: delete),
        Command("verify", abstract: "Re-hash installed models against the catalog (else the install-time hash).",
                discussion: "With --repair, only the bad files are fetched again.",
                arguments: [Argument("id", "Models to verify (default: every installed model).", .optionalMany)],
                options: verifyOptions, exits: [ExitCase(.integrity, "A file does not match.")], run: verify),
        Command("gc", abstract: "Remove orphaned partial and staging data, and temporary files an hour old that a killed write left; print the space freed.", run: gc),
    ]

    static func options(_ context: CommandContext) throws(CLIError) -> DownloadOptions {
        var policy = try context.setup().transferPolicy()
        let inv = context.invocation
        let transfer = TransferOptions.shared
        if let s = inv[GlobalOptions.shared.stallTimeout] { policy.stallTimeout = s }
        if let n = inv[transfer.parallel] {
            policy.parallelFiles = n
            policy.adaptiveParallelism = false
        }
        if let n = inv[transfer.retry.retries] { policy.retryBudget = n }
        if let s = inv[transfer.retry.retryDelay] { policy.baseBackoff = s }
        return DownloadOptions(policy: policy, mirror: inv[GlobalOptions.shared.mirror])
    }

    static func download(_ context: CommandContext) throws(CLIError) -> ExitCode {
        try download(context.invocation.positional, options: try options(context), context)
    }

    /// Downloads `ids` one after another with the progress output of `download` (a bar on a
    /// terminal, lines otherwise, JSON lines with --json); `voice download` uses it too.
    static func download(_ ids: [String], options: DownloadOptions, _ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let interrupt = InterruptHandler()
        var worst: CLIError?
        for id in ids {
            if interrupt.flag.isCancelled { break }
            let printer = ProgressPrinter(console: context.console, modelId: id, noProgress: context.invocation[GlobalOptions.shared.noProgress])
            let start = monotonicSeconds()
            do {
                let path = try engine.downloadBlocking(modelId: id, options: options, cancellation: interrupt.flag, onEvent: printer.handle)
                printer.clearBar()
                let seconds = monotonicSeconds() - start
                let size = engine.catalog.model(id: id)?.installedBytes ?? 0
                if let used = printer.localCopies { context.console.say("\(id): " + Format.usedLocalCopies(used)) }
                if printer.wasAlreadyInstalled {
                    context.console.say("\(id): already installed in \(path); nothing to download")
                } else {
                    context.console.say("\(id): installed in \(path) (\(Format.bytes(size)), \(Format.fixed(seconds, decimals: 1)) s)")
                }
            } catch {
                printer.clearBar()
                let cli = CLIError(error)
                if context.console.json {
                    context.console.printJSON(.object([("event", "error"), ("modelId", .string(id))] + cli.fields))
                }
                context.console.err("Error: \(cli.message)")
                if worst == nil { worst = cli }
                if case .cancelled = error { break }
            }
        }
        return worst?.exitCode ?? .ok
    }

    static func delete(_ context: CommandContext) throws(CLIError) -> ExitCode {
        try delete(context.invocation.positional, context)
    }

    /// Deletes `ids`, printing what each freed; `voice delete` uses it too.
    static func delete(_ ids: [String], _ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        var results: [JSONValue] = []
        var worst: CLIError?
        var total: Int64 = 0
        for id in ids {
            do {
                let result = try engine.delete(modelId: id)
                total += result.freedBytes
                results.append(["modelId": .string(id), "deleted": .bool(result.existed), "freedBytes": .int(result.freedBytes)])
                context.console.say(result.existed ? "\(id): deleted, \(Format.bytes(result.freedBytes)) freed" : "\(id): nothing to delete")
            } catch {
                let cli = CLIError(error)
                results.append(["modelId": .string(id), "error": cli.json])
                context.console.err("Error: \(cli.message)")
                if worst == nil { worst = cli }
            }
        }
        if context.console.json {
            // Each model's failure is in its entry; the first also as the command's `error`.
            var doc: [(key: String, value: JSONValue)] = [("models", .array(results)), ("freedBytes", .int(total))]
            if let worst { doc.append(("error", worst.json)) }
            context.console.printJSON(.object(doc))
        } else if ids.count > 1 {
            context.console.say("freed \(Format.bytes(total)) in all")
        }
        return worst?.exitCode ?? .ok
    }

    static func verify(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let options = try options(context)
        var ids = context.invocation.positional
        if ids.isEmpty {
            // Installed models, and bundles placed in an install folder (verify adopts them).
            ids = try context.attempt { try engine.models().filter { $0.isInstalled || $0.placedBundle }.map(\.model.id) }
            if ids.isEmpty {
                context.console.say("no installed models to verify")
                if context.console.json { context.console.printJSON(["models": []]) }
                return .ok
            }
        }
        let interrupt = InterruptHandler()
        var reports: [JSONValue] = []
        var worst: CLIError?
        var mismatch = false
        for id in ids {
            let printer = ProgressPrinter(console: context.console, modelId: id, noProgress: true)
            do {
                let report = try engine.verify(modelId: id, repair: context.invocation[verifyOptions.repair], options: options,
                                               cancellation: interrupt.flag, onEvent: printer.handle)
                if !report.ok { mismatch = true }
                reports.append(["modelId": .string(id), "ok": .bool(report.ok), "filesChecked": JSONValue(report.filesChecked),
                                "sizeOnly": JSONValue(report.sizeOnly),
                                "problems": .array(report.problems.map { ["path": .string($0.path), "detail": .string($0.detail)] }),
                                "repaired": .array(report.repaired.map { .string($0) }),
                                "readWithoutLock": report.readWithoutLock.map(JSONValue.string) ?? .null])
                if let reason = report.readWithoutLock {
                    context.console.err("note: \(id) was read without its lock: \(reason); a download running at the same time could make this answer stale.")
                }
                if report.problems.isEmpty {
                    let note = report.sizeOnly > 0 ? " (\(report.sizeOnly) size-checked only: no hash known)" : ""
                    context.console.say("\(id): ok, \(report.filesChecked) files verified\(note)")
                } else {
                    for p in report.problems { context.console.say("\(id): \(p.path): \(p.detail)\(report.repaired.contains(p.path) ? " — re-fetched" : "")") }
                    if report.ok {
                        context.console.say("\(id): repaired \(report.repaired.count) file(s)")
                    } else {
                        context.console.err("Error: \(id): \(report.problems.count) file(s) do not match. Run 'glasses-local verify \(id) --repair' to fetch them again.")
                    }
                }
            } catch {
                let cli = CLIError(error)
                reports.append(["modelId": .string(id), "error": cli.json])
                context.console.err("Error: \(cli.message)")
                if worst == nil { worst = cli }
            }
        }
        if mismatch && worst == nil {
            worst = CLIError(.integrityMismatch, message: "some installed files do not match; run 'glasses-local verify --repair' to fetch them again")
        }
        if context.console.json {
            // Each model's failure is in its entry; the first also as the command's `error`.
            var doc: [(key: String, value: JSONValue)] = [("models", .array(reports))]
            if let worst { doc.append(("error", worst.json)) }
            context.console.printJSON(.object(doc))
        }
        return worst?.exitCode ?? .ok
    }

    static func gc(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let engine = try context.engine()
        let report = try context.attempt { try engine.gc() }
        if context.console.json {
            context.console.printJSON(["removed": .array(report.removed.map { ["path": .string($0.path), "bytes": .int($0.bytes)] }),
                                       "freedBytes": .int(report.freedBytes)])
        } else if report.removed.isEmpty {
            context.console.say("nothing to collect")
        } else {
            for item in report.removed { context.console.say("removed \(item.path) (\(Format.bytes(item.bytes)))") }
            context.console.say("freed \(Format.bytes(report.freedBytes))")
        }
        return .ok
    }
}
