/// Why the cloud serves instead of an on-device model.
public enum CloudFallbackReason: String, Sendable, CaseIterable, Equatable {
    /// No auto-eligible model fits the device's memory class.
    case belowQualityFloor
    /// The device's class allows a local model, but the memory available right now does not.
    case insufficientMemoryNow
    /// The right model (and every smaller usable one) is not downloaded.
    case weightsNotPresent
    /// The catalog has no auto-eligible models.
    case noEligibleRungs
    /// Nothing usable is installed, and no eligible model's download fits the free storage.
    case insufficientStorage
    /// The SDK instance was created without the local tier: `ExtentosLocalTier.register()`
    /// did not run before `Extentos.create(config:)`.
    case localTierNotRegistered
}

/// Which on-device model serves, or why the cloud must.
public struct AutoChoice: Sendable, Equatable {
    /// The local model to run now; nil when the cloud serves.
    public let modelId: String?
    public let isLocal: Bool
    public let cloudReason: CloudFallbackReason?
    /// The model worth downloading: the device's class model when it is not installed (also
    /// when a smaller one serves now: an upgrade), or a smaller one that fits the storage.
    public let downloadTarget: String?

    public init(modelId: String?, cloudReason: CloudFallbackReason?, downloadTarget: String?) {
        self.modelId = modelId
        self.isLocal = modelId != nil
        self.cloudReason = modelId == nil ? cloudReason : nil
        self.downloadTarget = downloadTarget
    }

    /// The cloud serves, for `reason`.
    public static func cloud(_ reason: CloudFallbackReason, downloadTarget: String? = nil) -> AutoChoice {
        AutoChoice(modelId: nil, cloudReason: reason, downloadTarget: downloadTarget)
    }
}

/// The two local tiers an app can register.
public enum LocalTierKind: String, Sendable, CaseIterable {
    /// `ExtentosLocalTier` (GlassesLocal): the on-device LLM ladder.
    case models
    /// `ExtentosLocalVoice` (GlassesLocalVoice): the on-device Kokoro voice.
    case voice

    /// The call an app makes to register this tier.
    public var registerCall: String {
        switch self {
        case .models: return "ExtentosLocalTier.register()"
        case .voice: return "ExtentosLocalVoice.register()"
        }
    }
}

/// Whether an SDK instance can use a local tier.
public enum LocalTierStatus: Sendable, Equatable, CustomStringConvertible {
    case available
    case unavailable(Unavailable)

    public enum Unavailable: Sendable, Equatable {
        /// `register()` has not run in this process.
        case notRegistered
        /// `register()` ran at `registerSite`, after this instance was created: the
        /// instance keeps serving from the cloud. Create it after registering.
        case registeredAfterCreate(registerSite: String)
    }

    public var isAvailable: Bool { self == .available }

    public var description: String {
        switch self {
        case .available: return "available"
        case .unavailable(.notRegistered): return "unavailable: not registered"
        case .unavailable(.registeredAfterCreate(let site)): return "unavailable: registered at \(site), after this instance was created"
        }
    }
}

/// The local LLM tier as the SDK sees it (`ExtentosLocalTier.register()` provides one).
public protocol LocalModelTier: Sendable {
    /// The answer for the next request, computed now.
    func autoChoice() -> AutoChoice
}

/// The on-device voice as the SDK sees it (`ExtentosLocalVoice.register()` provides one).
public protocol LocalVoiceTier: Sendable {
    /// Whether the voice bundle is installed and verified.
    func isInstalled() -> Bool
}

/// Something the SDK noticed about how the app uses it, readable at `Extentos.diagnostics`.
public struct ExtentosDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// A local tier's `register()` ran after `Extentos.create(...)`.
        case registeredAfterCreate
    }

    public let code: Code
    public let tier: LocalTierKind
    /// `#fileID:#line` of the first `Extentos.create(...)` that ran without the tier.
    public let createSite: String
    /// `#fileID:#line` of the late `register()`.
    public let registerSite: String
    /// How many instances were created without the tier.
    public let instancesAffected: Int
    /// The full text: what happened, what it means, how to fix it.
    public let message: String

    public var description: String { message }
}
