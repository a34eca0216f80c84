// Shared helpers for RecordsTests, StoreTests and DeviceFitTests: a temporary folder
// per test, a small in-code catalog, a fixed-memory probe whose storage is the real
// filesystem, and a way to run other programs (records-stress, flock, df).
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

enum StoreTestSupport {
    /// Runs `body` with a fresh temporary folder, removed afterwards (also on failure).
    static func withTempDir<T>(_ body: (String) throws -> T) throws -> T {
        let dir = try makeTempDir()
        defer { _ = try? FileIO.removeTree(dir) }
        return try body(dir)
    }

    static func makeTempDir() throws -> String {
        var template = Array((NSTemporaryDirectory() + "/lmk-store-tests-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw SystemError(errno: errno, "mkdtemp") }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return FileIO.absolutePath(path)
    }

    /// Writes `bytes` to `path`, creating the parent folders.
    static func writeFile(_ path: String, _ bytes: [UInt8]) throws {
        if let slash = path.lastIndex(of: "/") {
            try FileIO.createDirectory(String(path[..<slash]))
        }
        try FileIO.writeFileAtomically(bytes, toPath: path)
    }

    static func writeFile(_ path: String, count: Int, byte: UInt8 = 0x5A) throws {
        try writeFile(path, [UInt8](repeating: byte, count: count))
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        try FileIO.readFile(atPath: path, limit: 1 << 30)
    }

    // MARK: Catalog

    static let fakeHash = String(repeating: "ab", count: 32)

    /// A model fetched file by file.
    static func filesModel(_ id: String, kind: ModelKind = .llm, requiredMb: Int = 1000,
                           files: [(String, Int64)]) -> CatalogModel {
        CatalogModel(id: id, kind: kind, displayName: "Test \(id)", requiredMb: requiredMb, autoEligible: kind == .llm,
                     revision: nil,
                     files: files.map { CatalogFile(path: $0.0, size: $0.1, sha256: fakeHash) },
                     sources: [.files(baseURL: "https://models.invalid/\(id)/")])
    }

    /// A model fetched as one archive of `archiveSize` bytes.
    static func archiveModel(_ id: String, archiveSize: Int64, files: [(String, Int64)]) -> CatalogModel {
        CatalogModel(id: id, kind: .voice, displayName: "Test \(id)", requiredMb: 300, autoEligible: false,
                     revision: nil,
                     files: files.map { CatalogFile(path: $0.0, size: $0.1, sha256: nil) },
                     sources: [.archive(ArchiveSource(url: "https://models.invalid/\(id).tar.bz2", format: .tarBz2,
                                                      size: archiveSize, sha256: fakeHash, stripComponents: 1))])
    }

    static func catalog(version: Int = 1, _ models: [CatalogModel]) -> Catalog {
        Catalog(catalogVersion: version, generatedAt: "2025-01-01T00:00:00Z", models: models)
    }

    static func engine(root: String, catalog: Catalog) -> LocalModelEngine {
        LocalModelEngine(layout: StoreLayout(root: root), catalog: catalog, probe: Probe())
    }

    /// Records an `installed` model whose files exist in its final folder with the catalog sizes.
    static func install(_ model: CatalogModel, layout: StoreLayout, records: Records, catalogVersion: Int = 1) throws {
        let folder = layout.installPath(id: model.id, kind: model.kind)
        for file in model.files {
            try writeFile(folder + "/" + file.path, count: Int(file.size))
        }
        try records.write { ctx in
            try ctx.upsert(InstallRecord(modelId: model.id, kind: model.kind, state: .installed,
                                         catalogVersion: catalogVersion, path: folder, totalBytes: model.installedBytes,
                                         createdAt: ctx.now, updatedAt: ctx.now, installedAt: ctx.now))
            try ctx.setFiles(model.id, model.files.map {
                FileRecord(path: $0.path, size: $0.size, sha256: $0.sha256, bytesPresent: $0.size, verifiedSha256: fakeHash)
            })
            try ctx.append(.completed, modelId: model.id)
        }
    }

    // MARK: Processes

    /// Runs a program to completion and captures its output.
    static func run(_ executable: String, _ arguments: [String]) throws -> ChildResult {
        try ChildProcess.run(executable, arguments)
    }

    /// The first of `candidates` that is an executable file.
    static func tool(_ candidates: [String]) throws -> String {
        for path in candidates where access(path, X_OK) == 0 { return path }
        throw SystemError(message: "none of \(candidates) is an executable")
    }

    /// The built `records-stress` tool, found next to the test bundle.
    static func recordsStressBinary() throws -> String {
        guard let path = BuiltProduct.path("records-stress") else {
            throw SystemError(message: "records-stress not found next to the test bundle; it is a dependency of LocalModelKitTests and should be built")
        }
        return path
    }

    /// Polls `condition` for up to `seconds`.
    static func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// Memory is fixed (a phone's numbers); storage is the real filesystem, never faked.
    struct Probe: DeviceProbe {
        var physicalMb = 8192
        var availableMb = 4096

        func memory() -> MemoryReading {
            MemoryReading(physicalMb: physicalMb, availableMb: availableMb, source: "test")
        }

        func space(at path: String) throws(LocalModelError) -> FilesystemSpace {
            try SystemDeviceProbe(environment: [:]).space(at: path)
        }
    }
}
