import Foundation
import GlassesTestSupport
import Testing

/// LocalModelKit's folders depend one way (docs/ARCHITECTURE.md, "Folders and their
/// layers"): a file uses the types declared in folders of a lower layer, never those of its
/// own layer's other folders or of a higher one. The engine's folders share the top layer:
/// they extend one class, `LocalModelEngine`. `LocalModelError.swift` is the error
/// vocabulary any layer throws (it names the causes its cases carry), so it is left out both
/// ways. What is checked is what a reader can check too: each type a file names (outside
/// comments and string literals) against the folder that declares it at the top level.
/// Members added by an extension elsewhere, and free functions, are not seen.
@Suite(.networkGuard)
struct FolderLayerTests {
    /// Each folder's layer, from the bottom; `(root)` is Engine.swift and EngineSetup.swift.
    static let layers: [String: Int] = [
        "System": 0, "Formats": 0,
        "Integrity": 1,
        "Catalog": 2,
        "Records": 3,
        "Store": 4,
        "Selection": 5, "Transfer": 5, "Unpack": 5,
        "Delivery": 6,
        "(root)": 7, "Download": 7, "Hub": 7, "Maintenance": 7, "Prefetch": 7,
    ]
    /// The engine's layer: its folders may use one another.
    static let engine = 7
    /// Files every layer may use, and whose own uses are not checked.
    static let vocabulary: Set<String> = ["LocalModelError.swift"]

    struct SourceFile: Equatable {
        var path: String
        var text: String
        var folder: String { path.contains("/") ? String(path.split(separator: "/")[0]) : "(root)" }
    }

    static var sourceRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/LocalModelKit")
    }

    /// Every Swift file of LocalModelKit, by path below Sources/LocalModelKit.
    static func sourceFiles() throws -> [SourceFile] {
        let root = sourceRoot.path
        let walker = try #require(FileManager.default.enumerator(atPath: root))
        var files: [SourceFile] = []
        for case let path as String in walker where path.hasSuffix(".swift") {
            files.append(SourceFile(path: path, text: try String(contentsOfFile: root + "/" + path, encoding: .utf8)))
        }
        return files.sorted { $0.path < $1.path }
    }

    /// The code of a file without its comments and string literals (a type named in a
    /// sentence is not a use).
    static func code(_ text: String) -> String {
        text.replacing(/"""[\s\S]*?"""/, with: "\"\"")
            .replacing(/"(?:\\.|[^"\\\n])*"/, with: "\"\"")
            .replacing(/\/\*[\s\S]*?\*\//, with: "")
            .replacing(/\/\/[^\n]*/, with: "")
    }

    /// Types declared at the top level of a file (not private to it).
    static func declaredTypes(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line in
            guard let match = line.firstMatch(of: /^(?:@\w+(?:\([^)]*\))?\s+)*((?:(?:public|package|internal|private|fileprivate|final|indirect)\s+)*)(?:class|struct|enum|protocol|typealias|actor)\s+([A-Z]\w*)/),
                  !match.1.contains("private") else { return nil }
            return String(match.2)
        }
    }

    /// Each use of a type against the layers, as `path: Type (Folder, layer n) in Folder (layer m)`.
    static func violations(in files: [SourceFile]) -> [String] {
        var owner: [String: SourceFile] = [:]
        var ambiguous: Set<String> = []
        for file in files {
            for name in declaredTypes(file.text) {
                if let other = owner[name], other.folder != file.folder { ambiguous.insert(name) }
                owner[name] = owner[name] ?? file
            }
        }
        var found: [String] = []
        for file in files where !vocabulary.contains(file.path) {
            guard let layer = layers[file.folder] else { continue }
            let names = Set(code(file.text).matches(of: /\b[A-Z][A-Za-z0-9_]*\b/).map { String($0.output) })
            for name in names.sorted() where !ambiguous.contains(name) {
                guard let declared = owner[name], declared.folder != file.folder, !vocabulary.contains(declared.path),
                      let used = layers[declared.folder] else { continue }
                if used < layer || (used == engine && layer == engine) { continue }
                found.append("\(file.path): \(name) (\(declared.folder), layer \(used)) from \(file.folder) (layer \(layer))")
            }
        }
        return found
    }

    @Test("every folder of LocalModelKit has a layer, and each uses only the types of the layers below it")
    func foldersPointOneWay() throws {
        let files = try Self.sourceFiles()
        #expect(files.count > 50, "the sources were found at \(Self.sourceRoot.path)")
        let unknown = Set(files.map(\.folder)).subtracting(Self.layers.keys)
        #expect(unknown.isEmpty, "folders without a layer (give them one here and in docs/ARCHITECTURE.md): \(unknown.sorted())")
        let found = Self.violations(in: files)
        #expect(found.isEmpty, "uses against the layers (docs/ARCHITECTURE.md, \"Folders and their layers\"):\n\(found.joined(separator: "\n"))")
    }

    @Test("the check sees a use against the layers, and not a name in a comment or a string")
    func checkSeesAViolation() {
        let files = [
            SourceFile(path: "Download/DownloadRun.swift", text: "final class DownloadRun {}\n"),
            SourceFile(path: "Records/Records.swift", text: "package final class Records: Sendable {}\n"),
            SourceFile(path: "Catalog/Catalog.swift", text: "public struct CatalogModel {}\nprivate struct Local {}\n"),
            SourceFile(path: "Delivery/FilesDelivery.swift",
                       text: "/// See `DownloadRun.adoptStoredCopies` and Records.\nstruct FilesDelivery {\n    func fetch(in run: DownloadRun, _ m: CatalogModel) { print(\"Records\") }\n}\n"),
            SourceFile(path: "Catalog/Rules.swift", text: "enum Rules { static func f(_ r: Records) {} } // Local\n"),
            SourceFile(path: "Download/Download.swift", text: "extension DownloadRun { func f(_ r: Records, _ m: CatalogModel) {} }\n"),
            SourceFile(path: "LocalModelError.swift", text: "enum LocalModelError: Error { case records(Records) }\n"),
        ]
        #expect(Self.violations(in: files) == [
            "Delivery/FilesDelivery.swift: DownloadRun (Download, layer 7) from Delivery (layer 6)",
            "Catalog/Rules.swift: Records (Records, layer 3) from Catalog (layer 2)",
        ])
    }
}
