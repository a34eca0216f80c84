import Foundation
import GlassesCore
import GlassesLocalVoice
import GlassesTestSupport
import Testing
@testable import GlassesLocal
@testable import LocalModelKit

/// The public facades over a real store in a temporary folder. Serialized: the facades
/// are process-wide by design (one shared engine), so these tests take turns.
@Suite(.serialized, .ownThreads)
struct FacadeTests {
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
        #expect(choice.cloudReason != .localTierNotRegistered)
        #expect(choice.cloudReason != .weightsNotPresent, "a rung is installed now: \(choice)")
    }

    @Test func voiceFacadeReportsTheBundle() throws {
        defer { cleanUp() }
        ExtentosLocalVoice.register()
        #expect(ExtentosLocalVoice.isRegistered)
        #expect(KokoroVoiceModel.totalBytes == 369_304_124)
        #expect(!KokoroVoiceModel.isInstalled())
        #expect(ExtentosLocalVoice.modelDirectory == nil)
        try markInstalled(KokoroVoiceModel.modelId, kind: .voice)
        #expect(KokoroVoiceModel.isInstalled())
        #expect(ExtentosLocalVoice.modelDirectory?.path == FileIO.absolutePath(store) + "/voices/kokoro-en-v0_19")
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
