// An app written against the upstream swift-glasses 2.5 public API (the "Local tier"
// section of the iOS API reference), compiled unchanged against GlassesCore +
// GlassesLocal + GlassesLocalVoice. Nothing here may use a name the upstream SDK does not
// have. It prints what it saw, one `key=value` line each, for StoreTests' fixture test.
//
// Usage: upstream-app <llm model id>   (store and catalog from EXTENTOS_MODELS_DIR / EXTENTOS_CATALOG)
import Foundation
import GlassesCore
import GlassesLocal
import GlassesLocalVoice

struct GlassesApp {
    // Declared without an initializer and assigned in init(), after the register() calls,
    // as the reference says.
    let glasses: any ExtentosGlasses

    init() {
        ExtentosLocalTier.register()
        ExtentosLocalVoice.register()
        glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
    }
}

func say(_ key: String, _ value: Any?) {
    print("\(key)=\(value.map { "\($0)" } ?? "nil")")
}

/// The app's own wording for a fallback: the upstream SDK's four reasons, exhaustively.
func wording(_ reason: ExtentosLocalTier.CloudFallbackReason?) -> String {
    guard let reason else { return "local" }
    switch reason {
    case .belowQualityFloor: return "belowQualityFloor"
    case .insufficientMemoryNow: return "insufficientMemoryNow"
    case .weightsNotPresent: return "weightsNotPresent"
    case .noEligibleRungs: return "noEligibleRungs"
    }
}

let modelId = CommandLine.arguments.dropFirst().first ?? "local-qwen3-1.7b"
let app = GlassesApp()
_ = app.glasses

// The model picker: upstream's LocalModelInfo fields.
let models: [ExtentosLocalTier.LocalModelInfo] = ExtentosLocalTier.models()
for model in models {
    let row: (String, String, Int, Bool, Bool, Int64) = (model.id, model.displayName, model.requiredMb, model.isInstalled,
                                                         model.autoEligible, model.totalBytes)
    say("model", "\(row.0) \(row.2) \(row.3) \(row.4) \(row.5)")
}

let before: ExtentosLocalTier.AutoChoice = ExtentosLocalTier.autoChoice()
say("before.modelId", before.modelId)
say("before.isLocal", before.isLocal)
say("before.reason", wording(before.cloudReason))
say("before.downloadTarget", before.downloadTarget)

var fit: ExtentosLocalTier.DeviceFit = ExtentosLocalTier.deviceFit(for: modelId)
say("fit", "\(fit.modelId) \(fit.requiredMb) \(fit.availableMb > 0) \(fit.fits)")
fit.fits = fit.fits && fit.availableMb >= fit.requiredMb

do {
    final class Fractions: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [Double] = []
        func add(_ value: Double) { lock.withLock { values.append(value) } }
        var last: Double? { lock.withLock { values.last } }
    }
    let fractions = Fractions()
    try await ExtentosLocalTier.download(modelId: modelId) { fraction in
        fractions.add(fraction)
    }
    say("download.lastFraction", fractions.last)
    // Again, with the default onProgress: nothing left to fetch.
    try await ExtentosLocalTier.download(modelId: modelId)
    say("download.again", "ok")
} catch {
    say("download.error", error)
}

let after = ExtentosLocalTier.autoChoice()
say("after.modelId", after.modelId)
say("after.reason", wording(after.cloudReason))
say("after.installed", ExtentosLocalTier.models().first { $0.id == modelId }?.isInstalled)

do {
    try await ExtentosLocalTier.download(modelId: "no-such-model")
    say("unknown", "no error")
} catch ExtentosLocalTier.LocalTierError.unknownModel(let id) {
    say("unknown", id)
} catch {
    say("unknown", "other error: \(error)")
}

// The voice.
let voiceBytes: Int = KokoroVoiceModel.totalBytes
say("voice.totalBytes", voiceBytes)
say("voice.installedBefore", KokoroVoiceModel.isInstalled())
do {
    try await KokoroVoiceModel.download { fraction in _ = fraction }
    say("voice.installedAfter", KokoroVoiceModel.isInstalled())
    let directory: URL? = ExtentosLocalVoice.modelDirectory
    say("voice.directory", directory?.path)
    try KokoroVoiceModel.delete()
    say("voice.installedAfterDelete", KokoroVoiceModel.isInstalled())
    say("voice.directoryAfterDelete", ExtentosLocalVoice.modelDirectory?.path)
} catch {
    say("voice.error", error)
}

try ExtentosLocalTier.delete(modelId: modelId)
say("deleted.installed", ExtentosLocalTier.models().first { $0.id == modelId }?.isInstalled)
let deletedAgain: Bool = try ExtentosLocalTier.delete(modelId: modelId)
say("deleted.again", deletedAgain)
