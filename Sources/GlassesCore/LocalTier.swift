/// Why the cloud serves instead of an on-device model: the upstream SDK's four reasons,
/// exactly. Apps `switch` over it without a `default:`, so no case is ever added; the finer
/// reasons this package can tell apart are ``CloudFallbackDetail``, carried beside it in
/// ``AutoChoice/cloudDetail``.
///
/// ```swift
/// switch choice.cloudReason {
/// case nil: runLocally(choice.modelId)
/// case .belowQualityFloor, .noEligibleRungs: useCloud()
/// case .insufficientMemoryNow: useCloud(retryLater: true)
/// case .weightsNotPresent: offerDownload(choice.downloadTarget)
/// }
/// ```
public enum CloudFallbackReason: String, Sendable, CaseIterable, Equatable {
    /// No auto-eligible model fits the device's memory class.
    case belowQualityFloor
    /// The device's class allows a local model, but the memory available right now does not.
    case insufficientMemoryNow
    /// The right model (and every smaller usable one) is not downloaded. When no eligible
    /// model's download fits the free storage either, ``AutoChoice/cloudDetail`` is
    /// ``CloudFallbackDetail/insufficientStorage``.
    case weightsNotPresent
    /// No auto-eligible model can serve: the catalog has none, or the SDK instance was
    /// created without the local tier (``CloudFallbackDetail/localTierNotRegistered``).
    case noEligibleRungs
}

/// The finer reason behind a cloud answer, where this package knows more than
/// ``CloudFallbackReason``'s four cases say. Each refines exactly one of them (``reason``),
/// so an app that only knows the upstream reasons reads the same answer.
public enum CloudFallbackDetail: String, Sendable, CaseIterable, Equatable {
    /// Nothing usable is installed, and no eligible model's download fits the free storage
    /// (``AutoChoice/storageShortfall`` says how much is missing). Refines `weightsNotPresent`.
    case insufficientStorage
    /// The SDK instance was created without the local tier: `ExtentosLocalTier.register()`
    /// did not run before `Extentos.create(config:)`. Refines `noEligibleRungs`.
    case localTierNotRegistered

    /// The upstream reason this detail refines: what ``AutoChoice/cloudReason`` says with it.
    public var reason: CloudFallbackReason {
        switch self {
        case .insufficientStorage: return .weightsNotPresent
        case .localTierNotRegistered: return .noEligibleRungs
        }
    }
}

/// Which on-device model serves, or why the cloud must.
public struct AutoChoice: Sendable, Equatable {
    /// A download that does not fit the store's free storage: the fit of the model the
    /// device's memory class calls for, as `ExtentosLocalTier.deviceFit(for:)` would give it.
    public struct StorageShortfall: Sendable, Equatable {
        /// The model whose download does not fit (the device's class model).
        public let modelId: String
        /// Storage its install still needs, in MB (rounded up).
        public let requiredMb: Int
        /// Free storage for the store, in MB (rounded down), less than `requiredMb`.
        public let availableMb: Int

        /// A shortfall of `requiredMb` against `availableMb` for `modelId`.
        public init(modelId: String, requiredMb: Int, availableMb: Int) {
            self.modelId = modelId
            self.requiredMb = requiredMb
            self.availableMb = availableMb
        }
    }

    /// The local model to run now; nil when the cloud serves.
    public let modelId: String?
    /// Whether a local model serves (``modelId`` is set).
    public let isLocal: Bool
    /// Why the cloud serves (one of the upstream SDK's four reasons); nil when local.
    public let cloudReason: CloudFallbackReason?
    /// The model worth downloading: the device's class model when it is not installed (also
    /// when a smaller one serves now: an upgrade), or a smaller one that fits the storage.
    public let downloadTarget: String?
    /// The finer reason behind ``cloudReason``, when there is one; nil when local.
    public let cloudDetail: CloudFallbackDetail?
    /// Set when the device's class model is not installed and its download does not fit the
    /// free storage, whatever the answer: with ``CloudFallbackDetail/insufficientStorage``
    /// when nothing smaller can serve or be fetched, or beside a smaller ``downloadTarget``
    /// or local model. Nil when the download fits, or nothing needs downloading.
    public let storageShortfall: StorageShortfall?

    /// An answer with upstream's three fields (no finer detail).
    public init(modelId: String?, cloudReason: CloudFallbackReason?, downloadTarget: String?) {
        self.init(modelId: modelId, cloudReason: cloudReason, downloadTarget: downloadTarget, cloudDetail: nil, storageShortfall: nil)
    }

    /// An answer with its finer detail. A detail goes with the reason it refines (a bug
    /// otherwise); a local answer carries neither.
    public init(modelId: String?, cloudReason: CloudFallbackReason?, downloadTarget: String?,
                cloudDetail: CloudFallbackDetail?, storageShortfall: StorageShortfall?) {
        precondition(modelId != nil || cloudDetail == nil || cloudDetail?.reason == cloudReason,
                     "cloud detail \(String(describing: cloudDetail)) does not refine \(String(describing: cloudReason))")
        self.modelId = modelId
        self.isLocal = modelId != nil
        self.cloudReason = modelId == nil ? cloudReason : nil
        self.downloadTarget = downloadTarget
        self.cloudDetail = modelId == nil ? cloudDetail : nil
        self.storageShortfall = storageShortfall
    }

    /// The cloud serves, for `reason`.
    public static func cloud(_ reason: CloudFallbackReason, downloadTarget: String? = nil) -> AutoChoice {
        AutoChoice(modelId: nil, cloudReason: reason, downloadTarget: downloadTarget)
    }

    /// The cloud serves, for `detail` (and the upstream reason it refines).
    public static func cloud(_ detail: CloudFallbackDetail, downloadTarget: String? = nil,
                             storageShortfall: StorageShortfall? = nil) -> AutoChoice {
        AutoChoice(modelId: nil, cloudReason: detail.reason, downloadTarget: downloadTarget, cloudDetail: detail,
                   storageShortfall: storageShortfall)
    }
}

/// What `local-auto` resolves to on this device: upstream's verdict, with upstream's two
/// cases exactly (apps `switch` over it without a `default:`). ``LocalTierRegistry/autoResolver``
/// answers it; ``AutoChoice`` says the same with more beside it (the download target of a
/// local answer, ``AutoChoice/cloudDetail``).
public enum AutoResolution: Sendable, Equatable, Hashable {
    /// Run this model on the device.
    case local(modelId: String)
    /// Serve from the cloud, for `reason`; `downloadTarget` names the model worth fetching
    /// when fetching it would change the answer.
    case cloud(reason: CloudFallbackReason, downloadTarget: String?)
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
    /// The instance uses the tier.
    case available
    /// The instance serves from the cloud, for this reason.
    case unavailable(Unavailable)

    /// Why an instance cannot use a local tier.
    public enum Unavailable: Sendable, Equatable {
        /// `register()` has not run in this process.
        case notRegistered
        /// `register()` ran at `registerSite` (`Folder/File.swift:line` from the call stack; ""
        /// when the build has no symbols to name it with), after this instance was created:
        /// the instance keeps serving from the cloud. Create it after registering.
        case registeredAfterCreate(registerSite: String)
    }

    /// Whether the tier is available.
    public var isAvailable: Bool { self == .available }

    /// "available", or "unavailable: " and why.
    public var description: String {
        switch self {
        case .available: return "available"
        case .unavailable(.notRegistered): return "unavailable: not registered"
        case .unavailable(.registeredAfterCreate("")): return "unavailable: registered after this instance was created"
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
    /// What kind of problem it is.
    public enum Code: String, Sendable {
        /// A local tier's `register()` ran after `Extentos.create(...)`.
        case registeredAfterCreate
    }

    /// What kind of problem it is.
    public let code: Code
    /// The tier it is about.
    public let tier: LocalTierKind
    /// Where the first `Extentos.create(...)` that ran without the tier was called
    /// (`Folder/File.swift:line` from the call stack; the function's name in a build without
    /// debug information; "" without symbols).
    public let createSite: String
    /// Where the late `register()` was called, found the same way.
    public let registerSite: String
    /// How many instances were created without the tier.
    public let instancesAffected: Int
    /// The full text: what happened, what it means, how to fix it.
    public let message: String

    /// The ``message``.
    public var description: String { message }
}
