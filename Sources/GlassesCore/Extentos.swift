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
    /// Where `Extentos.create(config:)` (or `Extentos.default()`) was called to make this
    /// instance, `Folder/File.swift:line`, read from the call stack (the function's name in
    /// a build without debug information). Known for an instance created while a local tier
    /// was not registered, the one a register-before-create diagnostic can be about; "" for
    /// one created with every tier in place (its call stack is never looked at).
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
    ///
    /// Upstream's signature, so `let make: (ExtentosConfig) -> ExtentosGlasses =
    /// Extentos.create` compiles. While some local tier is not registered, the call's place
    /// is taken from the call stack (no symbols are read until a late `register()` needs
    /// them), so the register-before-create diagnostic can name it.
    public static func create(config: ExtentosConfig) -> ExtentosGlasses {
        let registry = TierRegistry.shared
        return make(config: config, site: registry.allRegistered ? .unknown : .here(), registry: registry)
    }

    static func make(config: ExtentosConfig, site: CallSite, registry: TierRegistry) -> Instance {
        let tiers = registry.tiersForNewInstance(site: site, strict: config.strictRegistrationOrder)
        return Instance(config: config, site: site, tiers: tiers, registry: registry)
    }

    /// An instance made at a named site (tests).
    static func make(config: ExtentosConfig, site: String, registry: TierRegistry) -> Instance {
        make(config: config, site: .named(site), registry: registry)
    }

    /// `create(config: ExtentosConfig())`, as upstream.
    public static func `default`() -> ExtentosGlasses {
        create(config: ExtentosConfig())
    }

    /// What the SDK noticed about its use in this process (a local tier registered after
    /// an instance was created, …), oldest first. Each was also printed to standard error.
    public static var diagnostics: [ExtentosDiagnostic] {
        TierRegistry.shared.diagnostics
    }

    final class Instance: ExtentosGlasses {
        let config: ExtentosConfig
        let site: CallSite
        let tiers: TierRegistry.Tiers
        let registry: TierRegistry

        init(config: ExtentosConfig, site: CallSite, tiers: TierRegistry.Tiers, registry: TierRegistry) {
            self.config = config
            self.site = site
            self.tiers = tiers
            self.registry = registry
        }

        var createdAt: String { site.text }

        var usedCapabilities: [DeclaredCapability] { config.usedCapabilities }
        var localTier: LocalTierStatus { registry.status(of: .models, in: tiers) }
        var localVoice: LocalTierStatus { registry.status(of: .voice, in: tiers) }

        func autoChoice() -> AutoChoice {
            guard let tier = tiers.models else { return .cloud(CloudFallbackDetail.localTierNotRegistered) }
            return tier.autoChoice()
        }
    }
}
