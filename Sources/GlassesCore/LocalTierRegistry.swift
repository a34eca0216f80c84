#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which local tiers are registered, which SDK instances were created without them, and
/// what the late registrations cost.
///
/// `register()` must run before `Extentos.create(config:)`: an instance takes its tiers
/// when it is created, the way the iOS SDK wires its transports. A registration that
/// comes later is kept (instances created afterwards see it) and reported once, naming the
/// earlier `create` call and the late `register` call (both found on the call stack:
/// ``CallSite``), on standard error and in ``Extentos/diagnostics``. Registering again, or
/// from many threads at once, changes nothing. Nothing here does I/O except that one
/// diagnostic (and naming its call sites).
final class TierRegistry: Sendable {
    struct Tiers: Sendable {
        var models: (any LocalModelTier)?
        var voice: (any LocalVoiceTier)?

        func has(_ kind: LocalTierKind) -> Bool {
            switch kind {
            case .models: return models != nil
            case .voice: return voice != nil
            }
        }
    }

    struct Missed {
        var firstSite: CallSite
        var count: Int
    }

    private struct State {
        var tiers = Tiers()
        /// Per registered tier: its `register` call site, "" when it could not be named.
        var registerSites: [LocalTierKind: String] = [:]
        /// Per tier: the instances created while it was not registered.
        var missed: [LocalTierKind: Missed] = [:]
        var strictInstances = 0
        var diagnostics: [ExtentosDiagnostic] = []
    }

    private let state = Locked(State())
    /// Reads the environment (injectable for tests); only consulted on a late registration.
    private let environment: @Sendable (String) -> String?
    /// Where a diagnostic goes (standard error in the process-wide registry).
    private let report: @Sendable (String) -> Void

    init(environment: @escaping @Sendable (String) -> String? = TierRegistry.processEnvironment,
         report: @escaping @Sendable (String) -> Void = TierRegistry.standardError) {
        self.environment = environment
        self.report = report
    }

    static let shared = TierRegistry()

    /// What a register call found.
    enum Outcome: Equatable {
        case registered
        case alreadyRegistered
        case late(ExtentosDiagnostic, strict: Bool)
    }

    /// - Parameter site: `#fileID:#line` of the app's `register` call; nil to find it on the
    ///   call stack, which is done only when the registration is late.
    @discardableResult
    func register(models tier: any LocalModelTier, site: String?) -> Outcome {
        register(.models, site: site) { $0.models = tier }
    }

    @discardableResult
    func register(voice tier: any LocalVoiceTier, site: String?) -> Outcome {
        register(.voice, site: site) { $0.voice = tier }
    }

    private func register(_ kind: LocalTierKind, site named: String?, install: (inout Tiers) -> Void) -> Outcome {
        // The calls are named from their stacks only when this registration is late: the
        // common, early case stays free of any I/O. Both are named here, outside the lock
        // (reading symbols takes a while); the stack is still this call's own.
        let earlyCreate = state.withLock { s in s.tiers.has(kind) ? nil : s.missed[kind]?.firstSite }
        let site = named ?? (earlyCreate != nil ? CallSite.here().text : "")
        _ = earlyCreate?.text
        let outcome: Outcome = state.withLock { s in
            guard !s.tiers.has(kind) else { return .alreadyRegistered }
            install(&s.tiers)
            s.registerSites[kind] = site
            guard let missed = s.missed[kind] else { return .registered }
            let diagnostic = Self.lateDiagnostic(kind, missed: missed, registerSite: site)
            s.diagnostics.append(diagnostic)
            return .late(diagnostic, strict: s.strictInstances > 0)
        }
        if case .late(let diagnostic, let strictConfig) = outcome {
            if strictConfig || Self.isTrue(environment("EXTENTOS_STRICT_ORDER")) {
                // Strict: stop here, with the same message (fatalError prints it to standard error).
                fatalError(diagnostic.message)
            }
            report(diagnostic.message)
        }
        return outcome
    }

    /// Whether every local tier is registered: then no instance created now can be the
    /// subject of a diagnostic, and `create` need not look at its call stack.
    var allRegistered: Bool {
        state.withLock { s in LocalTierKind.allCases.allSatisfy(s.tiers.has) }
    }

    /// The tiers a new instance gets; remembers the instance's call site for every tier it lacks.
    func tiersForNewInstance(site: CallSite, strict: Bool) -> Tiers {
        state.withLock { s in
            if strict { s.strictInstances += 1 }
            for kind in LocalTierKind.allCases where !s.tiers.has(kind) {
                if s.missed[kind] == nil {
                    s.missed[kind] = Missed(firstSite: site, count: 1)
                } else {
                    s.missed[kind]?.count += 1
                }
            }
            return s.tiers
        }
    }

    /// The status an instance created with `tiers` has now.
    func status(of kind: LocalTierKind, in tiers: Tiers) -> LocalTierStatus {
        if tiers.has(kind) { return .available }
        if let site = state.withLock({ $0.registerSites[kind] }) {
            return .unavailable(.registeredAfterCreate(registerSite: site))
        }
        return .unavailable(.notRegistered)
    }

    func isRegistered(_ kind: LocalTierKind) -> Bool {
        state.withLock { $0.tiers.has(kind) }
    }

    var diagnostics: [ExtentosDiagnostic] {
        state.withLock { $0.diagnostics }
    }

    func reset() {
        state.withLock { $0 = State() }
    }

    /// - Parameter registerSite: the late call's site, "" when it could not be named.
    static func lateDiagnostic(_ kind: LocalTierKind, missed: Missed, registerSite: String) -> ExtentosDiagnostic {
        let others = missed.count - 1
        let known = !registerSite.isEmpty
        let createSite = missed.firstSite.text
        let created = createSite.isEmpty ? "Extentos.create(...)" : "Extentos.create(...) at \(createSite)"
        let instances = others == 0 ? "That instance"
            : "That instance and \(others) other\(others == 1 ? "" : "s") created before \(known ? registerSite : "it")"
        let consequence: String
        switch kind {
        case .models:
            consequence = "\(instances) serve\(others == 0 ? "s" : "") every local model from the cloud: autoChoice() answers cloud with noEligibleRungs (cloudDetail localTierNotRegistered)."
        case .voice:
            consequence = "\(instances) speak\(others == 0 ? "s" : "") with the cloud voice: the on-device Kokoro voice is never used."
        }
        // The sites come from the call stack: a build without symbols cannot name them.
        let ran = known ? "ran at \(registerSite), after" : "ran after"
        let naming = known && !createSite.isEmpty ? "" : " (The call stack could not name \(known ? "the create call" : createSite.isEmpty ? "either call" : "the register call"): this build has no debug information for it; a debug build names it.)"
        let message = """
            Extentos: \(kind.registerCall) \(ran) \(created) had already created an instance. \
            \(consequence) \
            Fix: call \(kind.registerCall) before Extentos.create(...). In a SwiftUI App or any type whose stored property calls \
            Extentos.create(...), stored-property initializers run before init(): declare the handle without an initializer \
            (`let glasses: any ExtentosGlasses`) and assign it in init() after the register() calls. \
            Set EXTENTOS_STRICT_ORDER=1 (or ExtentosConfig.strictRegistrationOrder) to stop the program here instead.\(naming)
            """
        return ExtentosDiagnostic(code: .registeredAfterCreate, tier: kind, createSite: createSite,
                                  registerSite: registerSite, instancesAffected: missed.count, message: message)
    }

    static func isTrue(_ value: String?) -> Bool {
        guard let value else { return false }
        return ["1", "true", "yes", "on"].contains(value.lowercased())
    }

    @Sendable static func processEnvironment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    @Sendable static func standardError(_ message: String) {
        let line = Array((message + "\n").utf8)
        line.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                guard let base = buffer.baseAddress else { return }
                let n = write(2, base + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }
}

/// The registry the local-tier facades fill: upstream's seam (``autoResolver``), and this
/// package's register-before-create check beside it. Apps call `ExtentosLocalTier.register()`
/// and `ExtentosLocalVoice.register()`, which fill it.
public enum LocalTierRegistry {
    private static let resolver = Locked<(@Sendable (_ servedRemotely: Bool) -> AutoResolution)?>(nil)

    /// Resolves `local-auto` against this device: set by `ExtentosLocalTier.register()`, as
    /// upstream's is, and asked by the SDK's core when an assistant starts with `local-auto`.
    ///
    /// `servedRemotely` is true for a session whose models are served elsewhere (upstream's
    /// browser simulator, where the gateway hosts every rung): every rung's weights then
    /// count as present, so the answer turns on the device's memory class alone. Nil until a
    /// local tier registers one: `local-auto` is then served from the cloud.
    ///
    /// ```swift
    /// switch LocalTierRegistry.autoResolver?(false) {
    /// case .local(let modelId)?: runOnDevice(modelId)
    /// case .cloud(let reason, let downloadTarget)?: useCloud(reason, offer: downloadTarget)
    /// case nil: useCloud(.noEligibleRungs, offer: nil)
    /// }
    /// ```
    public static var autoResolver: (@Sendable (_ servedRemotely: Bool) -> AutoResolution)? {
        get { resolver.withLock { $0 } }
        set { resolver.withLock { $0 = newValue } }
    }

    /// Registers the LLM tier; `site` is the app's `register` call site (`#fileID:#line`),
    /// nil to have it found on the call stack when the registration comes late.
    public static func register(models tier: any LocalModelTier, site: String?) {
        TierRegistry.shared.register(models: tier, site: site)
    }

    /// Registers the voice tier; `site` as for ``register(models:site:)``.
    public static func register(voice tier: any LocalVoiceTier, site: String?) {
        TierRegistry.shared.register(voice: tier, site: site)
    }

    /// Whether that tier's `register()` has run in this process.
    public static func isRegistered(_ kind: LocalTierKind) -> Bool {
        TierRegistry.shared.isRegistered(kind)
    }

    /// Forgets every registration, instance, diagnostic and the resolver (tests only).
    public static func resetForTesting() {
        TierRegistry.shared.reset()
        autoResolver = nil
    }
}
