import Foundation
import GlassesCore
import GlassesLocalVoice
import GlassesTestSupport
import Testing
@testable import GlassesLocal
@testable import LocalModelKit

/// The public facades over a real store in a temporary folder. Serialized: the facades
/// are process-wide by design (one shared engine), so these tests take turns.
@Suite(.serialized, .ownThreads, .networkGuard)
struct FacadeTests {
    @Test("the engine's decision reaches the app as upstream's AutoChoice: every reason and detail mapped by name, the shortfall carried")
    func decisionMapsOntoUpstream() {
        for reason in CloudReason.allCases {
            let choice = AutoChoice(AutoDecision(modelId: nil, cloudReason: reason, downloadTarget: "t", steps: []))
            #expect(choice.cloudReason?.rawValue == reason.rawValue && !choice.isLocal && choice.downloadTarget == "t")
        }
        for detail in CloudDetail.allCases {
            let shortfall = StorageShortfall(modelId: "big", requiredMb: 5000, availableMb: 1000)
            let choice = AutoChoice(AutoDecision(modelId: nil, cloudReason: detail.reason, cloudDetail: detail, downloadTarget: nil,
                                                 storageShortfall: shortfall, steps: []))
            #expect(choice.cloudDetail?.rawValue == detail.rawValue && choice.cloudReason?.rawValue == detail.reason.rawValue)
            #expect(choice.storageShortfall == AutoChoice.StorageShortfall(modelId: "big", requiredMb: 5000, availableMb: 1000))
        }
        let local = AutoChoice(AutoDecision(modelId: "m", cloudReason: nil, downloadTarget: nil, steps: []))
        #expect(local.isLocal && local.modelId == "m" && local.cloudReason == nil)
    }

    let store: String

    init() throws {
        store = FileManager.default.temporaryDirectory.appendingPathComponent("glasses-facade-\(UUID().uuidString)").path
        ExtentosLocalTier.configure(storeDirectory: store)
        LocalTierRegistry.resetForTesting()
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: store) }

    /// Marks a model installed the way a finished download leaves it: folder + committed record.
    func markInstalled(_ id: String, kind: ModelKind) throws {
        let engine = try ExtentosLocalTier.sharedEngine()
        let records = try engine.open().records
        let path = engine.layout.installPath(id: id, kind: kind)
        try FileIO.createDirectory(path)
        try records.write { ctx in
            try ctx.upsert(InstallRecord(modelId: id, kind: kind, state: .installed, catalogVersion: 1, path: path,
                                         totalBytes: 1, createdAt: ctx.now, updatedAt: ctx.now, installedAt: ctx.now))
        }
    }

    @Test func modelsListTheShippedCatalogWithSizes() {
        defer { cleanUp() }
        // Upstream's models() is the LLM ladder: a model picker never offers the voice.
        #expect(ExtentosLocalTier.models().map(\.id) == ["local-qwen3-0.6b", "local-qwen25-1.5b", "local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b"])
        let models = ExtentosLocalTier.allModels()
        #expect(models.map(\.id) == ["local-qwen3-0.6b", "local-qwen25-1.5b", "local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b", "kokoro-en-v0_19"])
        let eight = models.first { $0.id == "local-qwen3-8b" }
        #expect(eight?.requiredMb == 5800)
        #expect(eight?.autoEligible == true)
        #expect(eight?.downloadBytes == 4_623_782_544)
        #expect(eight?.kind == .llm)
        let voice = models.first { $0.id == "kokoro-en-v0_19" }
        #expect(voice?.kind == .voice)
        #expect(voice?.downloadBytes == 319_625_534)
        #expect(voice?.installedBytes == 369_304_124)
        #expect(voice?.totalBytes == 369_304_124, "upstream's totalBytes is the size on disk once installed")
        #expect(models.allSatisfy { !$0.isInstalled })
        // A read-only start-up query leaves no trace on disk.
        #expect(!FileManager.default.fileExists(atPath: store))
        #expect(ExtentosLocalTier.storeProblem == nil)
    }

    /// What local-qwen3-1.7b needs: 984,013,244 bytes to download + 32 MiB + 1 % margin.
    static let qwen17Needs: Int64 = 984_013_244 + 32 * 1_048_576 + 9_840_132

    /// The byte rule DeviceFitTests checks in the engine, through the facade: requiredMb is
    /// rounded up, availableMb down, and fits compares the bytes. Two stores on filesystems
    /// of their own, one page above and one page below the need: in both, requiredMb is
    /// availableMb + 1, so only the bytes can tell that the first fits and the second not.
    @Test func deviceFitReadsTheStoreFilesystemAndComparesBytes() throws {
        defer { cleanUp() }
        let mib: Int64 = 1 << 20
        let page = PrivateTmpfs.pageSize
        let roomy = (Self.qwen17Needs + page - 1) / page * page
        for (size, fits) in [(roomy, true), (roomy - page, false)] {
            let fs = try PrivateTmpfs(size: size)
            defer { fs.remove() }
            ExtentosLocalTier.configure(storeDirectory: fs.path + "/store")
            let available = fs.availableBytes
            #expect(available == size, "an empty tmpfs of \(size) bytes has them all free")
            let fit = ExtentosLocalTier.deviceFit(for: "local-qwen3-1.7b")
            #expect(fit.modelId == "local-qwen3-1.7b")
            #expect(fit.requiredMb == Int((Self.qwen17Needs + mib - 1) / mib), "rounded up")
            #expect(fit.availableMb == Int(available / mib), "rounded down")
            #expect(fit.requiredMb == fit.availableMb + 1, "the MiB figures alone cannot decide: \(fit)")
            #expect(fit.fits == fits && fit.fits == (Self.qwen17Needs <= available),
                    "fits compares bytes: \(Self.qwen17Needs) needed, \(available) available: \(fit)")
            #expect(ExtentosLocalTier.storeProblem == nil)
            #expect(!FileManager.default.fileExists(atPath: fs.path + "/store"), "asking for a fit creates no store")
        }
    }

    @Test func deviceFitOfAnUnknownIdNeedsNothingAndDoesNotFit() {
        defer { cleanUp() }
        let fit = ExtentosLocalTier.deviceFit(for: "no-such-model")
        #expect(fit.requiredMb == 0)
        #expect(fit.fits == false)
        #expect(fit.availableMb > 0)
    }

    @Test func installedModelNeedsNoSpaceAndIsChosen() throws {
        defer { cleanUp() }
        try markInstalled("local-qwen3-1.7b", kind: .llm)
        #expect(ExtentosLocalTier.models().first { $0.id == "local-qwen3-1.7b" }?.isInstalled == true)
        #expect(ExtentosLocalTier.deviceFit(for: "local-qwen3-1.7b").requiredMb == 0)
        #expect(ExtentosLocalTier.deviceFit(for: "local-qwen3-1.7b").fits)
    }

    @Test func anInstanceCreatedAfterRegisterAnswersWithTheTier() throws {
        defer { cleanUp() }
        ExtentosLocalTier.register()
        let glasses = Extentos.create(config: ExtentosConfig(usedCapabilities: [.microphone, .speaker]))
        #expect(glasses.localTier == .available)
        #expect(glasses.usedCapabilities == [.microphone, .speaker])
        #expect(Extentos.diagnostics.isEmpty)
        // The handle asks the tier each time: an install shows up in its next answer.
        #expect(glasses.autoChoice() == ExtentosLocalTier.autoChoice())
        try markInstalled("local-qwen3-1.7b", kind: .llm)
        let choice = glasses.autoChoice()
        #expect(choice == ExtentosLocalTier.autoChoice())
        #expect(choice.cloudDetail != .localTierNotRegistered)
        #expect(choice.cloudReason != .weightsNotPresent, "a rung is installed now: \(choice)")
    }

    @Test func voiceFacadeReportsTheBundle() throws {
        defer { cleanUp() }
        ExtentosLocalVoice.register()
        #expect(ExtentosLocalVoice.isRegistered)
        #expect(KokoroVoiceModel.totalBytes == 369_304_124)
        #expect(!KokoroVoiceModel.isInstalled())
        // As upstream: the folder before the voice is installed, so an app can seed it;
        // asking neither creates it nor the store.
        let folder = FileIO.absolutePath(store) + "/voices/kokoro-en-v0_19"
        #expect(ExtentosLocalVoice.modelDirectory?.path == folder)
        #expect(!FileManager.default.fileExists(atPath: store))
        try markInstalled(KokoroVoiceModel.modelId, kind: .voice)
        #expect(KokoroVoiceModel.isInstalled())
        #expect(ExtentosLocalVoice.modelDirectory?.path == folder)
        // Deleting it leaves the folder's address as it was.
        try KokoroVoiceModel.delete()
        #expect(!KokoroVoiceModel.isInstalled())
        #expect(ExtentosLocalVoice.modelDirectory?.path == folder)
    }

    @Test func deleteAnswersFalseForAnUnknownIdAndForAModelNotInstalled() throws {
        defer { cleanUp() }
        #expect(try ExtentosLocalTier.delete(modelId: "no-such-model") == false, "upstream: false, not an error")
        #expect(try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b") == false)
        try markInstalled("local-qwen3-1.7b", kind: .llm)
        #expect(try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b") == true)
        #expect(try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b") == false)
    }

    @Test func anUnknownIdIsUpstreamsErrorAndEveryOtherFailureTheEnginesTypedOne() async throws {
        defer { cleanUp() }
        await #expect(throws: ExtentosLocalTier.LocalTierError.unknownModel("no-such-model")) {
            try await ExtentosLocalTier.download(modelId: "no-such-model")
        }
        // Another process holds the model's lock: busy, as the engine's own error with its
        // stable code and exit status (never a new LocalTierError case).
        try markInstalled("local-qwen3-1.7b", kind: .llm)
        let engine = try ExtentosLocalTier.sharedEngine()
        let lock = try #require(try engine.layout.tryModelLock("local-qwen3-1.7b"))
        defer { lock.unlock() }
        do {
            try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b")
            Issue.record("delete went ahead while the model's lock was held")
        } catch let error as ExtentosLocalTier.EngineError {
            #expect(error == .busy(modelId: "local-qwen3-1.7b"))
            #expect(error.code == .busy && error.exitStatus == 7)
        }
    }

    @Test func registerHasUpstreamsTypeAndTheDiagnosticNamesItsCall() throws {
        defer { cleanUp() }
        let setUp = ExtentosLocalTier.register, setUpVoice = ExtentosLocalVoice.register
        let upstreamShaped: [() -> Void] = [setUp, setUpVoice]
        upstreamShaped.forEach { $0() }
        #expect(LocalTierRegistry.isRegistered(.models) && ExtentosLocalVoice.isRegistered)
        LocalTierRegistry.resetForTesting()
        let early = Extentos.default(); let createLine = #line
        ExtentosLocalTier.register(); let line = #line
        let diagnostic = try #require(Extentos.diagnostics.first)
        #expect(diagnostic.createSite == "GlassesLocalTests/FacadeTests.swift:\(createLine)")
        #expect(diagnostic.registerSite == "GlassesLocalTests/FacadeTests.swift:\(line)")
        #expect(early.localTier == .unavailable(.registeredAfterCreate(registerSite: "GlassesLocalTests/FacadeTests.swift:\(line)")))
        LocalTierRegistry.resetForTesting()
    }

    /// Upstream's seam: register() sets LocalTierRegistry.autoResolver, which answers what
    /// autoChoice() answers, in upstream's two cases; served remotely, every rung's weights
    /// count as present, and nothing but the device's memory decides.
    @Test func registerSetsUpstreamsAutoResolver() throws {
        defer { cleanUp() }
        // A ladder of rungs that fit any machine's memory: the answer cannot depend on it.
        try FileIO.createDirectory(store)
        let catalog = store + "/tiny-ladder.json"
        let hash = String(repeating: "ab", count: 32)
        let rungs = [("tiny-small", 1), ("tiny-large", 2)].map { id, mb in
            """
            {"id": "\(id)", "kind": "llm", "displayName": "\(id)", "requiredMb": \(mb), "autoEligible": true,
             "files": [{"path": "w.bin", "size": 10, "sha256": "\(hash)"}],
             "sources": [{"type": "files", "baseURL": "https://models.invalid/\(id)/"}]}
            """
        }
        try Data("""
            {"schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-11-30T00:00:00Z", "models": [\(rungs.joined(separator: ","))]}
            """.utf8).write(to: URL(fileURLWithPath: catalog))
        ExtentosLocalTier.configure(storeDirectory: store, catalogFile: catalog)
        #expect(LocalTierRegistry.autoResolver == nil)
        ExtentosLocalTier.register()
        let resolver = try #require(LocalTierRegistry.autoResolver)
        let choice = ExtentosLocalTier.autoChoice()
        #expect(choice.cloudReason == .weightsNotPresent && choice.downloadTarget == "tiny-large", "nothing installed: \(choice)")
        #expect(resolver(false) == .cloud(reason: .weightsNotPresent, downloadTarget: "tiny-large"))
        #expect(resolver(true) == .local(modelId: "tiny-large"), "served remotely, the device's class rung runs")
        try markInstalled("tiny-small", kind: .llm)
        #expect(resolver(false) == .local(modelId: "tiny-small"), "a smaller installed rung serves now")
        #expect(ExtentosLocalTier.autoChoice().downloadTarget == "tiny-large", "the upgrade AutoChoice names, the resolution leaves out")
        LocalTierRegistry.resetForTesting()
        #expect(LocalTierRegistry.autoResolver == nil)
    }

    /// A device with no store yet: deleting what is not there answers false (the voice:
    /// returns), without an error and without creating the store.
    @Test func deletingBeforeAnyStoreCreatesNothing() throws {
        defer { cleanUp() }
        #expect(try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b") == false)
        #expect(try ExtentosLocalTier.delete(modelId: "no-such-model") == false)
        try KokoroVoiceModel.delete()
        #expect(!FileManager.default.fileExists(atPath: store), "nothing was created to answer")
        // In a store that exists, a model with nothing on disk: still false, no lock file made.
        try markInstalled("local-qwen3-4b", kind: .llm)
        #expect(try ExtentosLocalTier.delete(modelId: "local-qwen3-1.7b") == false)
        try KokoroVoiceModel.delete()
        let locks = (try? FileManager.default.contentsOfDirectory(atPath: store + "/.locks")) ?? []
        #expect(!locks.contains { $0.hasPrefix("local-qwen3-1.7b") || $0.hasPrefix(KokoroVoiceModel.modelId) }, "\(locks)")
    }

    @Test func aDamagedStoreIsReportedAndListsNothingInstalled() throws {
        defer { cleanUp() }
        try FileIO.createDirectory(store)
        try FileIO.writeFileAtomically(Array(repeating: 0x5A, count: 8192), toPath: store + "/records.sqlite3")
        let models = ExtentosLocalTier.allModels()
        #expect(models.count == 6)
        #expect(models.allSatisfy { !$0.isInstalled })
        let problem = try #require(ExtentosLocalTier.storeProblem)
        #expect(problem.contains("records.sqlite3"))
        #expect(problem.contains("Move it aside"))
    }
}
