// A voice bundle placed in its install folder by hand (an app seeding upstream's
// `ExtentosLocalVoice.modelDirectory`) becomes an install once every file checks out:
// adopted through the one install path, recorded, and never fetched. Only download, verify
// and adoptPlacedBundle adopt (hashing); queries report it from lstats and write nothing.
// The catalog's sources point at a host that does not exist, so any fetch would fail the test.
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

    /// Places a bundle whose model.onnx has the size the catalog says but not its bytes
    /// (byte `index` flipped); returns the folder and those bytes.
    static func placeMismatched(_ engine: LocalModelEngine, flipping index: Int) throws -> (folder: String, bytes: [UInt8]) {
        var wrong = big
        wrong[index] ^= 0x5A
        return (try place(engine, big: wrong), wrong)
    }

    static func notAdopted(_ engine: LocalModelEngine) throws -> [HistoryEvent] {
        try engine.history(modelId: "kokoro").filter { $0.kind == "verified" && ($0.detail ?? "").contains("not adopted") }
    }

    @Test("queries report a placed bundle from lstats alone: placed, not installed, nothing hashed, recorded or created")
    func queriesOnlyLook() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            // Its hash does not match: a query that hashed would know, and say it is not there.
            let (folder, wrong) = try Self.placeMismatched(engine, flipping: 77)
            let status = try engine.status(of: "kokoro")
            #expect(!status.isInstalled && status.placedBundle, "\(status)")
            #expect(status.fit.requiredBytes == 0 && status.fit.fits, "adopting it needs no room: \(status.fit)")
            let listed = try #require(try engine.models().first { $0.model.id == "kokoro" })
            #expect(!listed.isInstalled && listed.placedBundle)
            #expect(try engine.models().first { $0.model.id == "delta" }?.placedBundle == false, "only bundles in a voice's folder")
            // The store has only what was placed: no records, no lock, no history.
            #expect(try FileIO.listDirectory(engine.layout.root) == ["voices"])
            #expect(try S.readFile(folder + "/model.onnx") == wrong)
        }
    }

    // The adoption takes the model's lock, releases it, and the download takes it again at
    // once: a program spawned meanwhile would hold a copy of the lock's descriptor between
    // its fork and exec (busy), hence .noSpawnsMeanwhile (Tests/Support/TestThreads.swift).
    @Test("a complete, matching bundle is adopted by adoptPlacedBundle: installed in place, recorded with its hashes and origin, never fetched",
          .noSpawnsMeanwhile)
    func adoptedExplicitly() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro"))
            let status = try engine.status(of: "kokoro")
            #expect(status.isInstalled && !status.placedBundle, "\(status)")
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

    // Async, so not under .noSpawnsMeanwhile (a test holding the spawn gate across a
    // suspension would wait for threads that wait for it); it takes the model's lock once.
    @Test("adoptPlacedBundleInBackground hashes on a thread of its own and adopts it")
    func adoptedInBackground() async throws {
        let dir = try S.makeTempDir()
        defer { _ = try? FileIO.removeTree(dir) }
        let engine = try Self.engine(dir)
        let folder = try Self.place(engine)
        #expect(try await engine.adoptPlacedBundleInBackground(modelId: "kokoro"))
        #expect(try engine.record(of: "kokoro")?.state == .installed)
        #expect(try engine.record(of: "kokoro")?.source == "placed in \(folder)")
        #expect(try await engine.adoptPlacedBundleInBackground(modelId: "kokoro") == false, "installed already")
    }

    @Test("download adopts it with nothing fetched; verify adopts it", .noSpawnsMeanwhile, arguments: ["download", "verify"])
    func adoptedByEveryEntryPoint(_ how: String) throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let folder = try Self.place(engine)
            switch how {
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
            let (folder, wrong) = try Self.placeMismatched(engine, flipping: 1234)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro") == false)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro") == false)
            #expect(throws: LocalModelError.notInstalled(modelId: "kokoro")) { try engine.verify(modelId: "kokoro") }
            #expect(try S.readFile(folder + "/model.onnx") == wrong, "never removed or moved by a check")
            #expect(try engine.record(of: "kokoro")?.state != .installed)
            let noted = try Self.notAdopted(engine)
            #expect(noted.count == 1, "checked once while unchanged: \(noted)")
            #expect(noted.first?.detail?.contains("model.onnx: SHA-256") == true, "\(noted)")
            // Known not to match: queries no longer count it as placed.
            #expect(try engine.status(of: "kokoro").placedBundle == false)
            // The app fixes the file: placed again, and the next adoption checks it and installs it.
            try S.writeFile(folder + "/model.onnx", Self.big)
            #expect(try engine.status(of: "kokoro").placedBundle)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro"))
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
            #expect(try engine.status(of: "kokoro").placedBundle == false)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro") == false)
            try S.writeFile(folder + "/espeak/tokens.txt", Array(Self.small.dropLast()))
            #expect(try engine.status(of: "kokoro").placedBundle == false, "a file of the wrong size is not a bundle yet")
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro") == false)
            #expect(try Self.notAdopted(engine).isEmpty)
            #expect(try engine.history(modelId: "kokoro").isEmpty, "nothing was hashed or recorded")
            // Opening the store (start-up repair) leaves the folder where the app put it.
            _ = try engine.open()
            #expect(FileIO.regularFileSize(folder + "/model.onnx") == Int64(Self.big.count))
            try S.writeFile(folder + "/espeak/tokens.txt", Self.small)
            #expect(try engine.status(of: "kokoro").placedBundle)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro"))
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
            #expect(try engine.status(of: "kokoro").placedBundle == false)
            #expect(try engine.adoptPlacedBundle(modelId: "kokoro") == false)
            #expect(try engine.status(of: "kokoro").isInstalled == false)
        }
    }

    @Test("only a voice's folder is a place for bundles: an unrecorded model folder still goes to .partial")
    func onlyVoices() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            try S.writeFile(engine.layout.installPath(id: "delta", kind: .llm) + "/model.bin", count: 1000)
            #expect(try engine.status(of: "delta").isInstalled == false)
            #expect(try engine.status(of: "delta").placedBundle == false)
            #expect(try engine.adoptPlacedBundle(modelId: "delta") == false)
            _ = try engine.open()
            #expect(!FileIO.exists(engine.layout.installPath(id: "delta", kind: .llm)))
            #expect(FileIO.regularFileSize(engine.layout.partialPath(id: "delta") + "/model.bin") == 1000)
        }
    }

    @Test("delete removes a placed bundle, adopted or not")
    func deleteRemovesIt() throws {
        try S.withTempDir { dir in
            let engine = try Self.engine(dir)
            let (folder, _) = try Self.placeMismatched(engine, flipping: 0)
            #expect(try engine.delete(modelId: "kokoro").existed)
            #expect(!FileIO.exists(folder))
        }
    }
}
