// A voice bundle placed in its install folder by hand (an app seeding upstream's
// `ExtentosLocalVoice.modelDirectory`) becomes an install once every file checks out:
// adopted through the one install path, recorded, and never fetched. The catalog's
// sources point at a host that does not exist, so any fetch would fail the test.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

@Suite("Placed voice bundles", .ownThreads, .networkGuard)
struct PlacedBundleTests {
    typealias S = StoreTestSupport

    static let big = [UInt8]((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    static let small = [UInt8]("tokens: a b c\n".utf8)

    /// A voice with one hashed file and one size-checked file (as most of Kokoro's are).
    static func voice() throws -> CatalogModel {
        CatalogModel(id: "kokoro", kind: .voice, displayName: "Test voice", requiredMb: 300, autoEligible: false, revision: nil,
                     files: [CatalogFile(path: "model.onnx", size: Int64(big.count), sha256: try SHA256Hasher.hash(big)),
                             CatalogFile(path: "espeak/tokens.txt", size: Int64(small.count), sha256: nil)],
                     sources: [.files(baseURL: "https://models.invalid/kokoro/")])
    }

    static let llm = S.filesModel("delta", files: [("model.bin", 1000)])

    static func engine(_ dir: String) throws -> LocalModelEngine {
        S.engine(root: dir + "/store", catalog: S.catalog([llm, try voice()]))
    }

    /// Places the bundle where upstream's modelDirectory points, as an app copying it would.
    static func place(_ engine: LocalModelEngine, big: [UInt8] = PlacedBundleTests.big, small: Bool = true) throws -> String {
        let folder = engine.layout.installPath(id: "kokoro", kind: .voice)
        try S.writeFile(folder + "/model.onnx", big)
        if small { try S.writeFile(folder + "/espeak/tokens.txt", Self.small) }
        return folder
    }

    static func notAdopted(_ engine: LocalModelEngine) throws -> [HistoryEvent] {
        try engine.history(modelId: "kokoro").filter { $0.kind == "verified" && ($0.detail ?? "").contains("not adopted") }
    }

    // The adoption takes the model's lock, releases it, and the download takes it again at
    // once: a program spawned meanwhile would hold a copy of the lock's descriptor between
    // its fork and exec (busy), hence .noSpawnsMeanwhile (Tests/Support/TestThreads.swift).
    @Test("a complete, matching bundle is adopted by status(of:): installed in place, recorded with its hashes and origin, never fetched",
          .noSpawnsMeanwhile)
    func adoptedByStatus() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine)
            #expect(try engine.status(of: "kokoro").isInstalled)
            // Where it was placed, untouched.
            #expect(try S.readFile(folder + "/model.onnx") == Self.big)
            #expect(try S.readFile(folder + "/espeak/tokens.txt") == Self.small)
            let record = try #require(try engine.record(of: "kokoro"))
            #expect(record.state == .installed)
            #expect(record.source == "placed in \(folder)")
            #expect(engine.layout.folder(of: record) == folder)
            let files = try #require(try engine.existingRecords()).files("kokoro")
            #expect(files.count == 2)
            #expect(files.allSatisfy { $0.verifiedSha256?.count == 64 }, "every file's hash is recorded, the size-checked one too")
            #expect(try engine.history(modelId: "kokoro").contains { $0.kind == "completed" && ($0.detail ?? "").contains("placed in") })
            // A later download has nothing to do (the source host does not exist).
            var events: [DownloadEvent] = []
            let path = try engine.downloadBlocking(modelId: "kokoro", options: DownloadOptions(), cancellation: CancellationFlag()) {
                events.append($0)
            }
            #expect(path == folder)
            #expect(events.last == .done(path: folder, alreadyInstalled: true))
            // And verify re-hashes it against the catalog's hash and the recorded ones.
            let report = try engine.verify(modelId: "kokoro")
            #expect(report.ok && report.sizeOnly == 0, "\(report)")
        }
    }

    @Test("models() (list) adopts it too; download adopts it with nothing fetched; verify adopts it", .noSpawnsMeanwhile,
          arguments: ["models", "download", "verify"])
    func adoptedByEveryEntryPoint(_ how: String) throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine)
            switch how {
            case "models":
                #expect(try engine.models().first { $0.model.id == "kokoro" }?.isInstalled == true)
            case "download":
                var events: [DownloadEvent] = []
                let path = try engine.downloadBlocking(modelId: "kokoro", options: DownloadOptions(), cancellation: CancellationFlag()) {
                    events.append($0)
                }
                #expect(path == folder)
                #expect(events.last == .done(path: folder, alreadyInstalled: true), "\(events)")
                let fractions = events.compactMap { event -> Double? in
                    if case .progress(_, _, let fraction, _) = event { return fraction }
                    return nil
                }
                #expect(fractions == [1.0], "exactly one 1.0, after the commit: \(events)")
            default:
                #expect(try engine.verify(modelId: "kokoro").ok)
            }
            #expect(try engine.record(of: "kokoro")?.state == .installed)
        }
    }

    @Test("a bundle whose SHA-256 does not match stays where it is, is noted once, and is not hashed again until a file changes")
    func mismatchIsLeftAlone() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            var wrong = Self.big
            wrong[1234] ^= 0xFF
            let folder = try Self.place(engine, big: wrong)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
            #expect(try engine.models().first { $0.model.id == "kokoro" }?.isInstalled == false)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
            #expect(try S.readFile(folder + "/model.onnx") == wrong, "never removed or moved by a check")
            #expect(try engine.record(of: "kokoro")?.state != .installed)
            let noted = try Self.notAdopted(engine)
            #expect(noted.count == 1, "checked once while unchanged: \(noted)")
            #expect(noted.first?.detail?.contains("model.onnx: SHA-256") == true, "\(noted)")
            // The app fixes the file: the next query checks again and adopts it.
            try S.writeFile(folder + "/model.onnx", Self.big)
            #expect(try engine.status(of: "kokoro").isInstalled)
            // A fresh engine (another process) on the same store agrees, from the records.
            #expect(try Self.engine(dir).status(of: "kokoro").isInstalled)
        }
    }

    @Test("an incomplete bundle (an app still copying) is left alone without a word; completing it installs it")
    func incompleteIsLeftAlone() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine, small: false)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
            try S.writeFile(folder + "/espeak/tokens.txt", Array(Self.small.dropLast()))
            #expect(try engine.status(of: "kokoro").isInstalled == false, "a file of the wrong size is not a bundle yet")
            #expect(try Self.notAdopted(engine).isEmpty)
            #expect(try engine.history(modelId: "kokoro").isEmpty, "nothing was hashed or recorded")
            // Opening the store (start-up repair) leaves the folder where the app put it.
            _ = try engine.open()
            #expect(FileIO.regularFileSize(folder + "/model.onnx") == Int64(Self.big.count))
            try S.writeFile(folder + "/espeak/tokens.txt", Self.small)
            #expect(try engine.status(of: "kokoro").isInstalled)
        }
    }

    @Test("a file placed as a symbolic link is never followed: not adopted")
    func linkIsNotFollowed() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine)
            try S.writeFile(dir + "/outside.onnx", Self.big)
            try FileIO.removeTree(folder + "/model.onnx")
            #expect(symlink(dir + "/outside.onnx", folder + "/model.onnx") == 0)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
        }
    }

    @Test("only a voice's folder is a place for bundles: an unrecorded model folder still goes to .partial")
    func onlyVoices() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            try S.writeFile(engine.layout.installPath(id: "delta", kind: .llm) + "/model.bin", count: 1000)
            #expect(try engine.status(of: "delta").isInstalled == false)
            _ = try engine.open()
            #expect(!FileIO.exists(engine.layout.installPath(id: "delta", kind: .llm)))
            #expect(FileIO.regularFileSize(engine.layout.partialPath(id: "delta") + "/model.bin") == 1000)
        }
    }

    @Test("delete removes a placed bundle, adopted or not")
    func deleteRemovesIt() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            var wrong = Self.big
            wrong[0] ^= 1
            let folder = try Self.place(engine, big: wrong)
            #expect(try engine.delete(modelId: "kokoro").existed)
            #expect(!FileIO.exists(folder))
        }
    }
}
