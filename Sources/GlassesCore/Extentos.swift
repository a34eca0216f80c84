import Synchronization

/// What the app declares it uses (a subset of the SDK's capabilities).
public enum DeclaredCapability: String, Sendable, CaseIterable {
    case microphone, speaker, camera, display
}

/// The SDK configuration. Every field has a default: `ExtentosConfig()` is a valid
/// development configuration.
public struct ExtentosConfig: Sendable, Equatable {
    public var usedCapabilities: [DeclaredCapability]
    /// Whether the assistant may serve from an on-device model when the local tier is registered.
    public var preferLocalTier: Bool

    public init(usedCapabilities: [DeclaredCapability] = [.microphone, .speaker], preferLocalTier: Bool = true) {
        self.usedCapabilities = usedCapabilities
        self.preferLocalTier = preferLocalTier
    }
}

/// What the local tier answers the SDK when asked which model serves.
public struct LocalTierRoute: Sendable, Equatable {
    /// The local model to run, or nil when the cloud serves.
    public var modelId: String?
    /// The `CloudFallbackReason` case name when the cloud serves (e.g. "weightsNotPresent").
    public var cloudReason: String?

    public init(modelId: String?, cloudReason: String?) {
        self.modelId = modelId
        self.cloudReason = cloudReason
    }
}

/// A local tier plugged into the SDK (`ExtentosLocalTier.register()` provides one).
public protocol LocalTierProvider: Sendable {
    /// A short name for diagnostics ("GlassesLocal").
    var name: String { get }
    /// The route for the next request, computed now.
    func route() -> LocalTierRoute
}

/// Which local tiers are registered, and whether registration came in time.
///
/// `register()` must run before `Extentos.create(config:)`: the SDK snapshots its tiers
/// at creation, the way the iOS SDK wires its transports. A late registration is kept
/// (a later `create` sees it) and recorded as a misordering, which the created client
/// reports instead of silently ignoring the tier.
public enum LocalTierRegistry {
    private struct State {
        var providers: [String: any LocalTierProvider] = [:]
        var createdCount = 0
        var lateRegistrations: [String] = []
    }

    private static let state = Mutex(State())

    /// Registers (or replaces) a provider under its name.
    public static func register(_ provider: any LocalTierProvider) {
        state.withLock { s in
            if s.createdCount > 0 && s.providers[provider.name] == nil { s.lateRegistrations.append(provider.name) }
            s.providers[provider.name] = provider
        }
    }

    /// Whether a provider with this name is registered.
    public static func isRegistered(_ name: String) -> Bool {
        state.withLock { $0.providers[name] != nil }
    }

    /// Names registered after an `Extentos.create` had already run.
    public static var lateRegistrations: [String] {
        state.withLock { $0.lateRegistrations }
    }

    static func snapshotForCreate() -> [any LocalTierProvider] {
        state.withLock { s in
            s.createdCount += 1
            return s.providers.keys.sorted().compactMap { s.providers[$0] }
        }
    }

    /// Forgets everything (tests only).
    public static func resetForTesting() {
        state.withLock { $0 = State() }
    }
}

/// The SDK client as the local tier sees it.
public protocol ExtentosGlasses: Sendable {
    var config: ExtentosConfig { get }
    /// The local tiers registered when this client was created.
    var localTierNames: [String] { get }
    /// The route for the next assistant request: local model or cloud with a reason.
    func localRoute() -> LocalTierRoute
}

/// The SDK entry point.
public enum Extentos {
    /// Creates the SDK client. Call `ExtentosLocalTier.register()` first.
    public static func create(config: ExtentosConfig = ExtentosConfig()) -> any ExtentosGlasses {
        Client(config: config, tiers: LocalTierRegistry.snapshotForCreate())
    }

    private struct Client: ExtentosGlasses {
        let config: ExtentosConfig
        let tiers: [any LocalTierProvider]

        var localTierNames: [String] { tiers.map(\.name) }

        func localRoute() -> LocalTierRoute {
            guard config.preferLocalTier else { return LocalTierRoute(modelId: nil, cloudReason: nil) }
            guard let tier = tiers.first else {
                // Registered too late, or never: say which, so the app developer can fix the order.
                return LocalTierRoute(modelId: nil, cloudReason: "localTierNotRegistered")
            }
            return tier.route()
        }
    }
}
