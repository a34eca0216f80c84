// An app written against the upstream swift-glasses 2.5 public API (the "Local tier"
// section of the iOS API reference, and upstream's sources for what the reference leaves
// out: `LocalTierRegistry.autoResolver`, `AutoResolution`, `Extentos.default()`), compiled
// unchanged against GlassesCore + GlassesLocal + GlassesLocalVoice. It uses only names the
// upstream SDK has, the way an app written for it does: exhaustive switches over upstream's
// enums with no `default:`, every call kept as an unannotated value (`let fetch =
// ExtentosLocalTier.download`: each base name has one declaration upstream),
// `DeviceFit.fits` read (upstream's is get-only), `KokoroVoiceModel.DownloadError`'s
// cases, a cancelled download caught as `CancellationError`. Building it is half of
// UpstreamAppTests; the other half runs it and reads what it printed, one `key=value` line each.
//
// Usage (store and catalog from EXTENTOS_MODELS_DIR / EXTENTOS_CATALOG):
//   upstream-app shipped               the facts of the shipped catalog, nothing downloaded,
//                                      and the calls an app makes before any store exists
//   upstream-app app <llm model id>    download, use and delete a model and the voice
//   upstream-app cancel <llm model id> start a download, cancel its task once bytes arrive,
//                                      then download again (the resume); the voice's too
//   upstream-app voice [<bundle dir>]  seed modelDirectory from <bundle dir> (if given), then
//                                      download the voice (an app's "get the better voice")
//   upstream-app seed <bundle dir>     seed modelDirectory and ask the start-up questions only
import Foundation
import GlassesCore
import GlassesLocal
import GlassesLocalVoice

struct GlassesApp {
    // Declared without an initializer and assigned in init(), after the register() calls,
    // as the reference says.
    let glasses: any ExtentosGlasses

    init() {
        // The bootstrap lines, kept as values the way an app's set-up table might.
        let registrations: [() -> Void] = [ExtentosLocalTier.register, ExtentosLocalVoice.register]
        for register in registrations { register() }
        let registerAgain: () -> Void = ExtentosLocalTier.register
        registerAgain()
        let sdk = SDK()
        sdk.setUp()
        sdk.setUpVoice()
        glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
    }
}

/// The SDK's calls kept as values, the way a set-up table or a dependency container holds
/// them: unannotated references, each naming one of upstream's declarations.
struct SDK {
    let setUp = ExtentosLocalTier.register
    let setUpVoice = ExtentosLocalVoice.register
    let make: (ExtentosConfig) -> ExtentosGlasses = Extentos.create
    let makeDefault: () -> ExtentosGlasses = Extentos.default
    let fetch = ExtentosLocalTier.download
    let remove = ExtentosLocalTier.delete
    let list = ExtentosLocalTier.models
    let choose = ExtentosLocalTier.autoChoice
    let fitFor = ExtentosLocalTier.deviceFit
    let fetchVoice = KokoroVoiceModel.download
    let removeVoice = KokoroVoiceModel.delete
    let voiceInstalled = KokoroVoiceModel.isInstalled
}

func say(_ key: String, _ value: Any?) {
    print("\(key)=\(value.map { "\($0)" } ?? "nil")")
}

/// The app's own wording for a fallback: upstream's four reasons, exhaustively.
func wording(_ reason: CloudFallbackReason?) -> String {
    guard let reason else { return "local" }
    switch reason {
    case .belowQualityFloor: return "belowQualityFloor"
    case .insufficientMemoryNow: return "insufficientMemoryNow"
    case .weightsNotPresent: return "weightsNotPresent"
    case .noEligibleRungs: return "noEligibleRungs"
    }
}

/// What `local-auto` resolves to through upstream's seam (the SDK's core asks it when an
/// assistant starts with `local-auto`), switched over exhaustively.
func wording(_ resolution: AutoResolution?) -> String {
    guard let resolution else { return "none" }
    switch resolution {
    case .local(let modelId): return "local \(modelId)"
    case .cloud(let reason, let downloadTarget): return "cloud \(wording(reason)) \(downloadTarget ?? "nil")"
    }
}

func showResolver(_ key: String) {
    let resolver: (@Sendable (_ servedRemotely: Bool) -> AutoResolution)? = LocalTierRegistry.autoResolver
    say("\(key).onDevice", wording(resolver?(false)))
    say("\(key).servedRemotely", wording(resolver?(true)))
}

/// What an app shows for a failure: upstream's two error types, each switched over
/// exhaustively, and Swift's cancellation.
func wording(_ error: any Error) -> String {
    if error is CancellationError { return "CancellationError" }
    if let error = error as? ExtentosLocalTier.LocalTierError {
        switch error {
        case .unknownModel(let id): return "unknownModel \(id)"
        }
    }
    if let error = error as? KokoroVoiceModel.DownloadError {
        switch error {
        case .documentsUnavailable: return "documentsUnavailable"
        case .httpStatus(let status, let path): return "httpStatus \(status) \(path)"
        case .integrityMismatch(let path): return "integrityMismatch \(path)"
        }
    }
    return "other: \(error)"
}

/// Progress fractions as they arrive (the callback is @Sendable).
final class Fractions: @unchecked Sendable {
    // @unchecked: `values` is only touched under `lock`.
    private let lock = NSLock()
    private var values: [Double] = []
    func add(_ value: Double) { lock.withLock { values.append(value) } }
    var last: Double? { lock.withLock { values.last } }
    var first: Double? { lock.withLock { values.first } }
}

/// A download the user abandons: started in a task, whose cancellation comes once bytes
/// have arrived; says what the task threw.
@MainActor
func abandon(_ key: String, _ download: @escaping (_ progress: @escaping @Sendable (Double) -> Void) async throws -> Void) async {
    let (arrivals, arrived) = AsyncStream.makeStream(of: Double.self)
    let task = Task {
        defer { arrived.finish() }
        try await download { fraction in arrived.yield(fraction) }
    }
    for await fraction in arrivals where fraction > 0 { break }
    task.cancel()
    do {
        try await task.value
        say(key, "finished before the cancellation")
    } catch {
        say(key, wording(error))
    }
}

func listModels() {
    // The model picker: upstream's LocalModelInfo fields.
    let models: [ExtentosLocalTier.LocalModelInfo] = ExtentosLocalTier.models()
    say("ladder", models.map(\.id).joined(separator: ","))
    for model in models {
        let row: (String, String, Int, Bool, Bool, Int64) = (model.id, model.displayName, model.requiredMb, model.isInstalled,
                                                             model.autoEligible, model.totalBytes)
        say("model", "\(row.0) \(row.2) \(row.3) \(row.4) \(row.5)")
    }
}

func showChoice(_ key: String) {
    let choice: ExtentosLocalTier.AutoChoice = ExtentosLocalTier.autoChoice()
    say("\(key).modelId", choice.modelId)
    say("\(key).isLocal", choice.isLocal)
    say("\(key).reason", wording(choice.cloudReason))
    say("\(key).downloadTarget", choice.downloadTarget)
}

func showFit(_ id: String) {
    let fit: ExtentosLocalTier.DeviceFit = ExtentosLocalTier.deviceFit(for: id)
    let canOffer: Bool = fit.fits && fit.availableMb >= fit.requiredMb
    say("fit", "\(fit.modelId) \(fit.requiredMb) \(fit.availableMb > 0) \(fit.fits) \(canOffer)")
    // Upstream's `fits` is get-only: its key path is not a writable one.
    say("fit.writable", (\ExtentosLocalTier.DeviceFit.fits as AnyKeyPath) is WritableKeyPath<ExtentosLocalTier.DeviceFit, Bool>)
}

func showVoice(_ key: String) {
    let directory: URL? = ExtentosLocalVoice.modelDirectory
    say("\(key).directory", directory?.path)
    say("\(key).installed", KokoroVoiceModel.isInstalled())
}

func downloadVoice() async {
    let fractions = Fractions()
    do {
        try await KokoroVoiceModel.download { fraction in fractions.add(fraction) }
        say("voice.download", "ok")
        say("voice.lastFraction", fractions.last)
    } catch {
        say("voice.download", wording(error))
    }
}

// The lines of issue 26 as an app writes them, verbatim (each failed to compile once).
let setUp = ExtentosLocalTier.register
let setUpVoice = ExtentosLocalVoice.register
let make: (ExtentosConfig) -> ExtentosGlasses = Extentos.create
let makeDefault: () -> ExtentosGlasses = Extentos.default
let fetch = ExtentosLocalTier.download
_ = LocalTierRegistry.autoResolver

let arguments = Array(CommandLine.arguments.dropFirst())
let sdk = SDK()
say("resolver.beforeRegister", LocalTierRegistry.autoResolver == nil ? "nil" : "set")
let app = GlassesApp()
_ = app.glasses
let another: ExtentosGlasses = sdk.makeDefault()
_ = sdk.make(ExtentosConfig(usedCapabilities: [.microphone]))
say("instances.localTier", "\(app.glasses.localTier) \(another.localTier)")

switch arguments.first ?? "" {
case "shipped":
    listModels()
    showChoice("choice")
    showFit("local-qwen3-1.7b")
    let voiceBytes: Int = KokoroVoiceModel.totalBytes
    say("voice.totalBytes", voiceBytes)
    showVoice("voice")
    let deleted: Bool = try ExtentosLocalTier.delete(modelId: "no-such-model")
    say("delete.unknown", deleted)
    showResolver("resolver")
    // A device with no store yet: the "free up space" buttons answer without an error, and
    // create nothing.
    say("delete.notInstalled", try sdk.remove("local-qwen3-1.7b"))
    do {
        try sdk.removeVoice()
        say("voice.delete", "ok")
    } catch {
        say("voice.delete", wording(error))
    }
    say("voice.installedAfterDelete", sdk.voiceInstalled())

case "app":
    let modelId = arguments.dropFirst().first ?? "local-qwen3-1.7b"
    listModels()
    showChoice("before")
    showFit(modelId)
    do {
        let fractions = Fractions()
        try await ExtentosLocalTier.download(modelId: modelId) { fraction in fractions.add(fraction) }
        say("download.lastFraction", fractions.last)
        // Again, with the default onProgress: nothing left to fetch.
        try await ExtentosLocalTier.download(modelId: modelId)
        say("download.again", "ok")
    } catch {
        say("download.error", wording(error))
    }
    showChoice("after")
    showResolver("resolver.after")
    say("after.installed", sdk.list().first { $0.id == modelId }?.isInstalled)
    do {
        try await ExtentosLocalTier.download(modelId: "no-such-model")
        say("unknown", "no error")
    } catch {
        say("unknown", wording(error))
    }

    let voiceBytes: Int = KokoroVoiceModel.totalBytes
    say("voice.totalBytes", voiceBytes)
    showVoice("voice.before")
    await downloadVoice()
    showVoice("voice.after")
    do {
        try KokoroVoiceModel.delete()
        showVoice("voice.deleted")
    } catch {
        say("voice.delete", wording(error))
    }

    try ExtentosLocalTier.delete(modelId: modelId)
    say("deleted.installed", ExtentosLocalTier.models().first { $0.id == modelId }?.isInstalled)
    let deletedAgain: Bool = try ExtentosLocalTier.delete(modelId: modelId)
    say("deleted.again", deletedAgain)
    say("deleted.unknown", try ExtentosLocalTier.delete(modelId: "no-such-model"))

case "cancel":
    let modelId = arguments.dropFirst().first ?? "local-qwen3-1.7b"
    await abandon("cancel") { progress in try await sdk.fetch(modelId, progress) }
    say("cancel.installed", sdk.list().first { $0.id == modelId }?.isInstalled)
    // Started again: it goes on from what the cancelled one kept.
    let fractions = Fractions()
    do {
        try await sdk.fetch(modelId) { fraction in fractions.add(fraction) }
        say("resume", "ok")
    } catch {
        say("resume", wording(error))
    }
    say("resume.firstFraction", fractions.first)
    say("resume.lastFraction", fractions.last)
    // The voice, abandoned the same way (when the catalog has one).
    if KokoroVoiceModel.totalBytes > 0 {
        await abandon("voice.cancel") { progress in try await sdk.fetchVoice(progress) }
        say("voice.cancel.installed", sdk.voiceInstalled())
    }

case "seed":
    // The app copies its own bundle into modelDirectory, then asks what it asks at start-up.
    guard let bundle = arguments.dropFirst().first, let folder = ExtentosLocalVoice.modelDirectory else { exit(2) }
    let fm = FileManager.default
    try fm.createDirectory(at: folder.deletingLastPathComponent(), withIntermediateDirectories: true)
    try fm.copyItem(at: URL(fileURLWithPath: bundle, isDirectory: true), to: folder)
    showVoice("voice.seeded")
    listModels()
    showChoice("choice")
    showFit("kokoro-en-v0_19")
    showResolver("resolver")

case "voice":
    showVoice("voice.before")
    if let bundle = arguments.dropFirst().first, let folder = ExtentosLocalVoice.modelDirectory {
        // Seeding the voice folder from the app's own copy of the bundle, as upstream allows.
        let fm = FileManager.default
        try fm.createDirectory(at: folder.deletingLastPathComponent(), withIntermediateDirectories: true)
        try fm.copyItem(at: URL(fileURLWithPath: bundle, isDirectory: true), to: folder)
        showVoice("voice.seeded")
    }
    await downloadVoice()
    showVoice("voice.after")

default:
    FileHandle.standardError.write(Data("usage: upstream-app shipped | app <llm model id> | cancel <llm model id> | voice [<bundle dir>] | seed <bundle dir>\n".utf8))
    exit(2)
}
