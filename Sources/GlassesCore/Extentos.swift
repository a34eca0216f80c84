/// The SDK handle: one for the app's lifetime.
///
/// This package carries the part of the handle the local tiers touch: the configuration it
/// was created with, whether each local tier is available to it, and the local tier's
/// answer to "which model serves the next request".
public protocol ExtentosGlasses: AnyObject, Sendable {
    /// The configuration this instance was created with.
    var config: ExtentosConfig { get }
    /// The declared capability footprint (from the configuration).
    var usedCapabilities: [DeclaredCapability] { get }
    /// `#fileID:#line` of the `Extentos.create(...)` call that made this instance.
    var createdAt: String { get }
    /// Whether this instance serves LLM requests on the device (`ExtentosLocalTier`).
    var localTier: LocalTierStatus { get }
    /// Whether this instance speaks with the on-device voice (`ExtentosLocalVoice`).
    var localVoice: LocalTierStatus { get }
    /// Which local model serves the next request, or why the cloud must. An instance
    /// created without the local tier answers cloud with `noEligibleRungs` (detail
    /// `localTierNotRegistered`).
    func autoChoice() -> AutoChoice
}

/// The SDK entry point.
///
/// Register the local tiers first, then create the instance:
///
/// ```swift
/// @main
/// struct MyApp: App {
///     let glasses: any ExtentosGlasses      // no initializer here: it would run before init()
///
///     init() {
///         ExtentosLocalTier.register()
///         ExtentosLocalVoice.register()
///         glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
///     }
/// }
/// ```
public enum Extentos {
    /// Creates the SDK instance with the local tiers registered so far.
    public static func create(config: ExtentosConfig = ExtentosConfig(),
                              fileID: String = #fileID, line: Int = #line) -> any ExtentosGlasses {
        make(config: config, site: "\(fileID):\(line)", registry: .shared)
    }

    static func make(config: ExtentosConfig, site: String, registry: TierRegistry) -> Instance {
        let tiers = registry.tiersForNewInstance(site: site, strict: config.strictRegistrationOrder)
        return Instance(config: config, createdAt: site, tiers: tiers, registry: registry)
    }

    /// `create(config: ExtentosConfig())`.
    public static func `default`(fileID: String = #fileID, line: Int = #line) -> any ExtentosGlasses {
        create(config: ExtentosConfig(), fileID: fileID, line: line)
    }

    /// What the SDK noticed about its use in this process (a local tier registered after
    /// an instance was created, …), oldest first. Each was also printed to standard error.
    public static var diagnostics: [ExtentosDiagnostic] {
        TierRegistry.shared.diagnostics
    }

    final class Instance: ExtentosGlasses {
        let config: ExtentosConfig
        let createdAt: String
        let tiers: TierRegistry.Tiers
        let registry: TierRegistry

        init(config: ExtentosConfig, createdAt: String, tiers: TierRegistry.Tiers, registry: TierRegistry) {
            self.config = config
            self.createdAt = createdAt
            self.tiers = tiers
            self.registry = registry
        }

        var usedCapabilities: [DeclaredCapability] { config.usedCapabilities }
        var localTier: LocalTierStatus { registry.status(of: .models, in: tiers) }
        var localVoice: LocalTierStatus { registry.status(of: .voice, in: tiers) }

        func autoChoice() -> AutoChoice {
            guard let tier = tiers.models else { return .cloud(CloudFallbackDetail.localTierNotRegistered) }
            return tier.autoChoice()
        }
    }
}
