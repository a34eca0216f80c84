import Foundation
import GlassesCore
import GlassesLocal
import LocalModelKit

/// The on-device voice (Kokoro) as the SDK sees it.
public enum ExtentosLocalVoice {
    /// Makes the on-device voice known to the SDK. Call it before `Extentos.create(config:)`:
    /// an instance created earlier keeps the cloud voice, and a diagnostic naming that
    /// `create` call is printed and kept in `Extentos.diagnostics`. Free: no I/O.
    ///
    /// Upstream's signature, so `let setUp: () -> Void = ExtentosLocalVoice.register` works;
    /// ``register(fileID:line:)`` has the diagnostic name the `register` call too.
    public static func register() {
        LocalTierRegistry.register(voice: Tier(), site: nil)
    }

    /// ``register()``, naming its call site for the late-registration diagnostic:
    /// `ExtentosLocalVoice.register(fileID: #fileID, line: #line)`.
    public static func register(fileID: String, line: Int) {
        LocalTierRegistry.register(voice: Tier(), site: "\(fileID):\(line)")
    }

    /// Whether ``register()`` ran.
    public static var isRegistered: Bool { LocalTierRegistry.isRegistered(.voice) }

    struct Tier: LocalVoiceTier {
        func isInstalled() -> Bool { KokoroVoiceModel.isInstalled() }
    }

    /// The installed voice bundle's folder, or nil when it is not installed.
    public static var modelDirectory: URL? {
        guard let engine = try? ExtentosLocalTier.sharedEngine(),
              let folder = engine.installedFolder(of: KokoroVoiceModel.modelId) else { return nil }
        return URL(fileURLWithPath: folder, isDirectory: true)
    }
}

/// The Kokoro English voice bundle (11 speakers), catalog id `kokoro-en-v0_19`.
public enum KokoroVoiceModel {
    /// The catalog id of the voice bundle.
    public static let modelId = "kokoro-en-v0_19"

    /// Bytes of the installed bundle (from the catalog; 0 if the catalog lacks it).
    public static var totalBytes: Int {
        guard let engine = try? ExtentosLocalTier.sharedEngine(),
              let model = engine.catalog.model(id: modelId) else { return 0 }
        return Int(model.installedBytes)
    }

    /// Deletes the voice bundle (files, partial data, record).
    public static func delete() throws {
        try ExtentosLocalTier.delete(modelId: modelId)
    }

    /// Downloads, verifies and installs the voice bundle; `progress` as in
    /// `ExtentosLocalTier.download(modelId:onProgress:)`.
    public static func download(progress: @escaping @Sendable (Double) -> Void) async throws {
        try await ExtentosLocalTier.download(modelId: modelId, onProgress: progress)
    }

    /// True only when every file was verified and the install committed.
    public static func isInstalled() -> Bool {
        guard let engine = try? ExtentosLocalTier.sharedEngine() else { return false }
        return (try? engine.status(of: modelId).isInstalled) ?? false
    }
}
