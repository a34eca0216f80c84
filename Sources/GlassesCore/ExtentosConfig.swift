/// A capability the app declares it uses. On iOS the declared footprint picks the
/// transport; here it is carried for the SDK and reported back by the handle.
public enum DeclaredCapability: String, Sendable, CaseIterable {
    /// The glasses' microphone, speaker, camera and display.
    case microphone, speaker, camera, display
}

/// How the SDK reaches the glasses. `.auto` walks the SDK's documented transport rules.
public enum ExtentosTransport: String, Sendable, CaseIterable {
    /// The SDK's rules choose; or Meta's glasses, the system's audio route, or the browser simulator.
    case auto, realMeta, systemAudio, browserSim
}

/// The SDK configuration. Every field has a default: `ExtentosConfig()` is a valid
/// development configuration.
///
/// ```swift
/// let config = ExtentosConfig(appId: "com.example.myapp", usedCapabilities: [.microphone, .speaker])
/// ```
public struct ExtentosConfig: Sendable, Equatable {
    /// The app's identifier (its bundle id); nil in development.
    public var appId: String?
    /// How the SDK reaches the glasses (default `.auto`).
    public var transport: ExtentosTransport
    /// The declared capability footprint. Empty by default, as in the iOS SDK: a voice-only
    /// app must declare `[.microphone, .speaker]`.
    public var usedCapabilities: [DeclaredCapability]
    /// The browser-simulator dev loop; not your build configuration.
    public var debug: Bool
    /// Stop the program (instead of printing a diagnostic) when a local tier's `register()`
    /// runs after this instance was created. `EXTENTOS_STRICT_ORDER=1` does the same for
    /// every instance, without a code change.
    public var strictRegistrationOrder: Bool

    /// A configuration; every field defaults as in the iOS SDK.
    public init(appId: String? = nil, transport: ExtentosTransport = .auto, usedCapabilities: [DeclaredCapability] = [],
                debug: Bool = false, strictRegistrationOrder: Bool = false) {
        self.appId = appId
        self.transport = transport
        self.usedCapabilities = usedCapabilities
        self.debug = debug
        self.strictRegistrationOrder = strictRegistrationOrder
    }
}
