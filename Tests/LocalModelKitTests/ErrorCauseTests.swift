// LocalModelError is the engine's one public error (docs/ARCHITECTURE.md, "Errors and exit
// statuses"): the causes its cases carry are plain values an app reads through public
// properties, never errors of their own. These tests use those properties only, on real
// failures: a damaged records file, an invalid catalog, a store under a regular file.
import Foundation
import GlassesTestSupport
import Testing
import LocalModelKit

@Suite("What LocalModelError's causes tell an app", .ownThreads, .networkGuard)
struct ErrorCauseTests {
    /// The error `body` throws, or nil (recorded as an issue) when it throws none.
    static func failure(_ body: () throws(LocalModelError) -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> LocalModelError? {
        do throws(LocalModelError) {
            try body()
            Issue.record("expected a LocalModelError", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    @Test("a damaged records file: .records carries the file's path and the way out; code recordsDamaged, exit 1")
    func damagedRecords() throws {
        try StoreTestSupport.withTempDir { dir in
            let store = dir + "/store"
            try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
            try StoreTestSupport.writeFile(store + "/records.sqlite3", Array(repeating: 0x42, count: 8192))
            let engine = try EngineSetup(environment: [:], storeDirectory: store).makeEngine()
            let error = try #require(Self.failure { () throws(LocalModelError) in _ = try engine.openStore() })
            #expect(error.code == .recordsDamaged && error.exitStatus == 1, "\(error)")
            guard case .records(let cause) = error else { Issue.record("expected .records, got \(error)"); return }
            #expect(cause.path == store + "/records.sqlite3", "\(cause)")
            #expect(cause.description.contains("Damaged-records") && error.description == cause.description, "\(error)")
        }
    }

    @Test("an invalid catalog: .invalidCatalog carries the file and every problem at its JSON path")
    func invalidCatalog() throws {
        try StoreTestSupport.withTempDir { dir in
            let path = dir + "/catalog.json"
            try Data(#"{"schemaVersion": 1, "catalogVersion": "seven", "generatedAt": "2025-01-01T00:00:00Z", "models": [{"id": "Bad Id"}]}"#.utf8)
                .write(to: URL(fileURLWithPath: path))
            let setup = EngineSetup(environment: [:], storeDirectory: dir + "/store", catalogFile: path)
            let error = try #require(Self.failure { () throws(LocalModelError) in _ = try setup.catalog() })
            #expect(error.code == .invalidCatalog && error.exitStatus == 6, "\(error)")
            guard case .invalidCatalog(let cause) = error else { Issue.record("expected .invalidCatalog, got \(error)"); return }
            #expect(cause.source == path)
            let paths = cause.issues.map(\.path)
            #expect(paths.contains("catalogVersion") || paths.contains("$.catalogVersion"), "\(paths)")
            #expect(paths.contains { $0.hasPrefix("models[0]") || $0.hasPrefix("$.models[0]") }, "\(paths)")
            #expect(cause.issues.allSatisfy { !$0.message.isEmpty && error.description.contains($0.description) }, "\(error)")
        }
    }

    @Test("a store folder under a regular file: .system carries the errno and the call, code io, exit 1")
    func storeUnderAFile() throws {
        try StoreTestSupport.withTempDir { dir in
            try StoreTestSupport.writeFile(dir + "/file", [1, 2, 3])
            let engine = try EngineSetup(environment: [:], storeDirectory: dir + "/file/store").makeEngine()
            let error = try #require(Self.failure { () throws(LocalModelError) in _ = try engine.openStore() })
            #expect(error.code == .io && error.exitStatus == 1, "\(error)")
            guard case .system(let cause, let modelId) = error else { Issue.record("expected .system, got \(error)"); return }
            #expect(modelId == nil)
            #expect(cause.errno == ENOTDIR && !cause.isOutOfSpace && !cause.isPermissionDenied && !cause.isNotFound, "\(cause)")
            #expect(cause.message.contains(dir + "/file") && error.description.contains(cause.message), "\(cause)")
        }
    }
}
