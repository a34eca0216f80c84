import Dispatch
import Glibc
import GlassesTestSupport
import Synchronization
import Testing
@testable import GlassesCore

/// The register-before-create contract, on private registries (the process-wide one is
/// exercised in child processes by GlassesLocalTests/SeamOrderTests).
@Suite(.networkGuard)
struct RegistryTests {
    /// A tier that answers a fixed choice: the seam's contract is "ask the registered tier".
    struct FixedTier: LocalModelTier {
        var choice: AutoChoice
        func autoChoice() -> AutoChoice { choice }
    }

    struct Voice: LocalVoiceTier {
        func isInstalled() -> Bool { false }
    }

    /// Collects what the registry would print to standard error.
    final class Reports: Sendable {
        let lines = Mutex<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        func registry(environment: [String: String] = [:]) -> TierRegistry {
            TierRegistry(environment: { environment[$0] }, report: { line in self.lines.withLock { $0.append(line) } })
        }
    }

    static let local = AutoChoice(modelId: "local-qwen3-4b", cloudReason: nil, downloadTarget: "local-qwen3-8b")

    @Test func registerThenCreateUsesTheTier() {
        let reports = Reports()
        let registry = reports.registry()
        #expect(registry.register(models: FixedTier(choice: Self.local), site: "App/App.swift:10") == .registered)
        let glasses = Extentos.make(config: ExtentosConfig(), site: "App/App.swift:11", registry: registry)
        #expect(glasses.localTier == .available)
        #expect(glasses.localVoice == .unavailable(.notRegistered))
        #expect(glasses.autoChoice() == Self.local)
        #expect(glasses.createdAt == "App/App.swift:11")
        #expect(registry.diagnostics.isEmpty)
        #expect(reports.all.isEmpty)
    }

    @Test func createThenRegisterIsReportedOnceNamingTheCreateCall() throws {
        let reports = Reports()
        let registry = reports.registry()
        let early = Extentos.make(config: ExtentosConfig(), site: "MyApp/MyApp.swift:14", registry: registry)
        let outcome = registry.register(models: FixedTier(choice: Self.local), site: "MyApp/MyApp.swift:21")
        guard case .late(let diagnostic, strict: false) = outcome else {
            Issue.record("expected a late registration, got \(outcome)")
            return
        }
        #expect(diagnostic.code == .registeredAfterCreate)
        #expect(diagnostic.tier == .models)
        #expect(diagnostic.createSite == "MyApp/MyApp.swift:14")
        #expect(diagnostic.registerSite == "MyApp/MyApp.swift:21")
        #expect(diagnostic.instancesAffected == 1)
        // What happened, what it means, and the fix — all in the one message.
        let message = diagnostic.message
        #expect(message.contains("ExtentosLocalTier.register() ran at MyApp/MyApp.swift:21"))
        #expect(message.contains("after Extentos.create(...) at MyApp/MyApp.swift:14"))
        #expect(message.contains("serves every local model from the cloud"))
        #expect(message.contains("noEligibleRungs (cloudDetail localTierNotRegistered)"))
        #expect(!message.contains("#fileID"), "a call that named its site needs no advice on naming it")
        #expect(message.contains("declare the handle without an initializer"))
        #expect(message.contains("assign it in init() after the register() calls"))
        #expect(message.contains("EXTENTOS_STRICT_ORDER=1"))
        #expect(reports.all == [message])
        #expect(registry.diagnostics == [diagnostic])

        // The early instance keeps serving from the cloud and says why.
        #expect(early.localTier == .unavailable(.registeredAfterCreate(registerSite: "MyApp/MyApp.swift:21")))
        #expect(early.autoChoice() == .cloud(.localTierNotRegistered))
        // A later instance has the tier.
        let later = Extentos.make(config: ExtentosConfig(), site: "MyApp/MyApp.swift:30", registry: registry)
        #expect(later.localTier == .available)
        #expect(later.autoChoice() == Self.local)

        // Registering again changes nothing and prints nothing more.
        #expect(registry.register(models: FixedTier(choice: .cloud(.weightsNotPresent)), site: "MyApp/MyApp.swift:40") == .alreadyRegistered)
        #expect(reports.all.count == 1)
        #expect(later.autoChoice() == Self.local, "the first registration stays")
    }

    @Test func neverRegisteredIsNotADiagnostic() {
        let reports = Reports()
        let registry = reports.registry()
        let glasses = Extentos.make(config: ExtentosConfig(), site: "A.swift:1", registry: registry)
        #expect(glasses.localTier == .unavailable(.notRegistered))
        // Upstream's reason, with this package's detail beside it.
        #expect(glasses.autoChoice().cloudReason == .noEligibleRungs)
        #expect(glasses.autoChoice().cloudDetail == .localTierNotRegistered)
        #expect(glasses.autoChoice() == .cloud(CloudFallbackDetail.localTierNotRegistered))
        #expect(registry.diagnostics.isEmpty)
        #expect(reports.all.isEmpty)
    }

    @Test func severalEarlyInstancesAreCountedAndTheFirstIsNamed() throws {
        let reports = Reports()
        let registry = reports.registry()
        for line in [5, 6, 7] { _ = Extentos.make(config: ExtentosConfig(), site: "A.swift:\(line)", registry: registry) }
        registry.register(models: FixedTier(choice: Self.local), site: "A.swift:9")
        let diagnostic = try #require(registry.diagnostics.first)
        #expect(diagnostic.createSite == "A.swift:5")
        #expect(diagnostic.instancesAffected == 3)
        #expect(diagnostic.message.contains("That instance and 2 others created before A.swift:9 serve every local model"))
    }

    @Test func theVoiceTierHasItsOwnDiagnostic() throws {
        let reports = Reports()
        let registry = reports.registry()
        registry.register(models: FixedTier(choice: Self.local), site: "A.swift:1")
        let glasses = Extentos.make(config: ExtentosConfig(), site: "A.swift:2", registry: registry)
        registry.register(voice: Voice(), site: "A.swift:3")
        #expect(glasses.localTier == .available)
        #expect(glasses.localVoice == .unavailable(.registeredAfterCreate(registerSite: "A.swift:3")))
        let diagnostic = try #require(registry.diagnostics.first)
        #expect(registry.diagnostics.count == 1)
        #expect(diagnostic.tier == .voice)
        #expect(diagnostic.message.contains("ExtentosLocalVoice.register() ran at A.swift:3"))
        #expect(diagnostic.message.contains("cloud voice"))
    }

    /// Creates and registrations racing on many threads: every instance ends up either
    /// with the tier or counted in the one diagnostic, never both, never neither.
    @Test func racingCreatesAndRegistrationsStayConsistent() async {
        for _ in 0..<20 {
            let reports = Reports()
            let registry = reports.registry()
            let instances = await withTaskGroup(of: [Extentos.Instance].self) { group in
                for t in 0..<8 {
                    group.addTask {
                        if t % 2 == 0 {
                            for _ in 0..<50 { registry.register(models: FixedTier(choice: Self.local), site: "R.swift:\(t)") }
                            return []
                        }
                        return (0..<50).map { _ in Extentos.make(config: ExtentosConfig(), site: "C.swift:\(t)", registry: registry) }
                    }
                }
                var all: [Extentos.Instance] = []
                for await batch in group { all += batch }
                return all
            }
            let without = instances.filter { !$0.localTier.isAvailable }
            #expect(instances.count == 200)
            #expect(registry.diagnostics.count == (without.isEmpty ? 0 : 1))
            #expect(registry.diagnostics.first?.instancesAffected ?? 0 == without.count)
            #expect(reports.all.count == registry.diagnostics.count)
            #expect(without.allSatisfy { $0.autoChoice() == AutoChoice.cloud(.localTierNotRegistered) })
            #expect(instances.filter { $0.localTier.isAvailable }.allSatisfy { $0.autoChoice() == Self.local })
        }
    }

    @Test func autoChoiceKeepsItsFieldsConsistent() {
        let local = AutoChoice(modelId: "m", cloudReason: .weightsNotPresent, downloadTarget: nil)
        #expect(local.isLocal)
        #expect(local.cloudReason == nil, "a local answer carries no cloud reason")
        let shortfall = AutoChoice.StorageShortfall(modelId: "big", requiredMb: 5000, availableMb: 900)
        let cloud = AutoChoice.cloud(CloudFallbackDetail.insufficientStorage, storageShortfall: shortfall)
        #expect(!cloud.isLocal)
        #expect(cloud.modelId == nil)
        #expect(cloud.cloudReason == .weightsNotPresent, "the detail's upstream reason")
        #expect(cloud.cloudDetail == .insufficientStorage)
        #expect(cloud.storageShortfall == shortfall)
        let localWithDetail = AutoChoice(modelId: "m", cloudReason: nil, downloadTarget: "big", cloudDetail: .insufficientStorage,
                                         storageShortfall: shortfall)
        #expect(localWithDetail.cloudDetail == nil, "a local answer carries no cloud detail")
        #expect(localWithDetail.storageShortfall == shortfall, "the shortfall is about the download, whatever serves")
    }

    /// Apps switch over CloudFallbackReason without a default: exactly upstream's four cases,
    /// and every finer detail maps onto one of them.
    @Test func cloudReasonsAreUpstreamsFour() {
        #expect(CloudFallbackReason.allCases.map(\.rawValue) == ["belowQualityFloor", "insufficientMemoryNow", "weightsNotPresent", "noEligibleRungs"])
        #expect(CloudFallbackDetail.insufficientStorage.reason == .weightsNotPresent)
        #expect(CloudFallbackDetail.localTierNotRegistered.reason == .noEligibleRungs)
    }

    /// A register call that names no site (upstream's plain `register()`) is named from the
    /// call stack: here, this test's own line, the first frame outside the SDK's modules.
    @Test func aLateRegistrationIsNamedFromTheCallStack() throws {
        let reports = Reports()
        let registry = reports.registry()
        let early = Extentos.make(config: ExtentosConfig(), site: "MyApp/MyApp.swift:14", registry: registry)
        _ = Extentos.make(config: ExtentosConfig(), site: "MyApp/MyApp.swift:15", registry: registry)
        let outcome = registry.register(models: FixedTier(choice: Self.local), site: nil); let line = #line
        guard case .late(let diagnostic, strict: false) = outcome else {
            Issue.record("expected a late registration")
            return
        }
        let site = "GlassesCoreTests/RegistryTests.swift:\(line)"
        #expect(diagnostic.registerSite == site)
        #expect(diagnostic.createSite == "MyApp/MyApp.swift:14")
        let message = diagnostic.message
        #expect(message.contains("ExtentosLocalTier.register() ran at \(site), after Extentos.create(...) at MyApp/MyApp.swift:14 had already created an instance."), "\(message)")
        #expect(message.contains("That instance and 1 other created before \(site) serve every local model from the cloud"), "\(message)")
        #expect(!message.contains("could not name"), "\(message)")
        #expect(reports.all == [message])
        #expect(early.localTier == .unavailable(.registeredAfterCreate(registerSite: site)))
        #expect("\(early.localTier)" == "unavailable: registered at \(site), after this instance was created")
    }

    /// Sites the call stack could not name (a build without symbols): the message says what
    /// happened without them, and why they are missing.
    @Test func sitesThatCannotBeNamedAreLeftOutAndSaidSo() {
        let neither = TierRegistry.lateDiagnostic(.models, missed: .init(firstSite: .named(""), count: 2), registerSite: "")
        #expect(neither.message.contains("ExtentosLocalTier.register() ran after Extentos.create(...) had already created an instance."), "\(neither.message)")
        #expect(neither.message.contains("That instance and 1 other created before it serve"), "\(neither.message)")
        #expect(neither.message.contains("could not name either call"), "\(neither.message)")
        let noRegister = TierRegistry.lateDiagnostic(.voice, missed: .init(firstSite: .named("A/A.swift:3"), count: 1), registerSite: "")
        #expect(noRegister.message.contains("ExtentosLocalVoice.register() ran after Extentos.create(...) at A/A.swift:3"), "\(noRegister.message)")
        #expect(noRegister.message.contains("could not name the register call"), "\(noRegister.message)")
        #expect(noRegister.createSite == "A/A.swift:3" && noRegister.registerSite == "")
    }

    @Test func callSitesAreTheAppsFrame() {
        #expect(CallSite.module(ofMangled: "$s11GlassesCore8ExtentosO6create6configAA0A7GlassesCAA0A6ConfigV_tFZ") == "GlassesCore")
        #expect(CallSite.module(ofMangled: "$s10seam_probe7LateAppVACycfC") == "seam_probe")
        #expect(CallSite.module(ofMangled: "main") == nil)
        #expect(CallSite.module(ofMangled: "$s99short") == nil)
        #expect(CallSite.describe(path: "/Users/me/MyApp/MyApp/ContentView.swift", line: 12) == "MyApp/ContentView.swift:12")
        // Captured here: the first frame outside the SDK is this test.
        let site = CallSite.here(); let line = #line
        #expect(site.text == "GlassesCoreTests/RegistryTests.swift:\(line)")
        #expect(CallSite.unknown.text == "")
    }

    /// Capturing the call stack while another thread maps and unmaps files (a records
    /// connection's `-shm`, any app's `mmap`) must not read memory that is gone: the image
    /// list is read through `process_vm_readv`, which fails where a plain load would crash
    /// the app. (Before: SIGSEGV in the image map's ELF-header probe within a few hundred
    /// captures.)
    @Test func capturingWhileAnotherThreadUnmapsFilesIsSafe() throws {
        let path = "/tmp/callsite-stress-\(getpid()).bin"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        try #require(fd >= 0)
        defer { close(fd); unlink(path) }
        try #require(ftruncate(fd, 1 << 16) == 0)
        let stop = Atomic<Bool>(false)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            while !stop.load(ordering: .relaxed) {
                // ELF-looking bytes at the start, so a probe reads further into the mapping.
                guard let map = mmap(nil, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else { continue }
                map.storeBytes(of: 0x464c_457f as UInt32, as: UInt32.self)
                usleep(50)
                munmap(map, 1 << 16)
                usleep(50)
            }
        }
        defer { stop.store(true, ordering: .relaxed); done.wait() }
        var last = CallSite.unknown
        for _ in 0..<1_000 { last = CallSite.here() }
        let site = CallSite.here(); let line = #line
        #expect(site.text == "GlassesCoreTests/RegistryTests.swift:\(line)")
        #expect(!last.text.isEmpty)
    }

    /// Upstream's seam: an optional resolver anyone may set and read.
    @Test func theAutoResolverSeamHasUpstreamsShape() {
        let resolver: (@Sendable (_ servedRemotely: Bool) -> AutoResolution)? = { remote in
            remote ? .local(modelId: "local-qwen3-4b") : .cloud(reason: .weightsNotPresent, downloadTarget: "local-qwen3-4b")
        }
        let before = LocalTierRegistry.autoResolver
        defer { LocalTierRegistry.autoResolver = before }
        LocalTierRegistry.autoResolver = resolver
        #expect(LocalTierRegistry.autoResolver?(true) == .local(modelId: "local-qwen3-4b"))
        #expect(LocalTierRegistry.autoResolver?(false) == .cloud(reason: .weightsNotPresent, downloadTarget: "local-qwen3-4b"))
        LocalTierRegistry.autoResolver = nil
        #expect(LocalTierRegistry.autoResolver == nil)
    }

    @Test func theDefaultConfigurationIsTheDocumentedOne() {
        let config = ExtentosConfig()
        #expect(config.appId == nil)
        #expect(config.transport == .auto)
        #expect(config.usedCapabilities.isEmpty, "empty by default, as the iOS SDK documents")
        #expect(!config.debug)
        #expect(!config.strictRegistrationOrder)
        #expect(TierRegistry.isTrue("1") && TierRegistry.isTrue("TRUE") && !TierRegistry.isTrue("0") && !TierRegistry.isTrue(nil))
    }
}
