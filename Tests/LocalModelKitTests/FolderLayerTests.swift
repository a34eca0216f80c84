import Foundation
import GlassesTestSupport
import LocalModelKit
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

    /// The code of a file without its comments and the text of its string literals (a type
    /// named in a sentence is not a use); the code of an interpolation, `\\(…)`, is kept.
    static func code(_ text: String) -> String {
        enum Context { case code(depth: Int), string(multiline: Bool, hashes: Int) }
        let b = Array(text.utf8)
        func at(_ i: Int) -> UInt8 { i < b.count ? b[i] : 0 }
        let quote = UInt8(ascii: "\""), slash = UInt8(ascii: "/"), star = UInt8(ascii: "*"), hash = UInt8(ascii: "#")
        let backslash = UInt8(ascii: "\\"), open = UInt8(ascii: "("), close = UInt8(ascii: ")"), newline = UInt8(ascii: "\n")
        var out: [UInt8] = []
        var stack: [Context] = [.code(depth: 0)]
        var i = 0
        while i < b.count {
            switch stack[stack.count - 1] {
            case .code(let depth):
                if b[i] == slash && at(i + 1) == slash {
                    while i < b.count && b[i] != newline { i += 1 }
                    continue
                }
                if b[i] == slash && at(i + 1) == star {
                    i += 2
                    while i < b.count && !(b[i] == star && at(i + 1) == slash) { i += 1 }
                    i += 2
                    out.append(32)
                    continue
                }
                var hashes = 0
                while at(i + hashes) == hash { hashes += 1 }
                if at(i + hashes) == quote {
                    let multiline = at(i + hashes + 1) == quote && at(i + hashes + 2) == quote
                    i += hashes + (multiline ? 3 : 1)
                    stack.append(.string(multiline: multiline, hashes: hashes))
                    out.append(32)
                    continue
                }
                if b[i] == open { stack[stack.count - 1] = .code(depth: depth + 1) }
                if b[i] == close {
                    if depth == 0 && stack.count > 1 {
                        stack.removeLast()   // the end of an interpolation
                        i += 1
                        out.append(32)
                        continue
                    }
                    stack[stack.count - 1] = .code(depth: max(0, depth - 1))
                }
                out.append(b[i])
                i += 1
            case let .string(multiline, hashes):
                if b[i] == backslash && (0..<hashes).allSatisfy({ at(i + 1 + $0) == hash }) {
                    if at(i + 1 + hashes) == open {
                        stack.append(.code(depth: 0))
                        i += 2 + hashes
                        out.append(32)
                    } else {
                        i += 2 + hashes
                    }
                    continue
                }
                let closing = multiline ? (b[i] == quote && at(i + 1) == quote && at(i + 2) == quote) : b[i] == quote
                let width = multiline ? 3 : 1
                if closing && (0..<hashes).allSatisfy({ at(i + width + $0) == hash }) {
                    stack.removeLast()
                    i += width + hashes
                    continue
                }
                if b[i] == newline && !multiline { stack.removeLast() }   // not a literal after all
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
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
            // Identifiers, split by hand: a regex's `\b` keeps `Type.member` as one Unicode word.
            let names = Set(code(file.text).utf8.split { !($0 == 95 || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0)) }
                .filter { (65...90).contains($0.first ?? 0) }.map { String(decoding: $0, as: UTF8.self) })
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

    /// The catalog loader (layer 2) cannot name `UserCatalog` (Store/, layer 4), so it spells
    /// the file's name; a rename there must not let a model take it as its id.
    @Test("the ids the catalog reserves name the user catalog's file")
    func reservedIdsNameTheUserCatalog() {
        #expect(CatalogLoader.reservedIds.contains(UserCatalog.fileName))
    }

    @Test("the check sees a use against the layers, in an interpolation too, and not a name in a comment or a string")
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
            SourceFile(path: "Records/RecordTypes.swift",
                       text: "enum RecordsError { var description: String { \"run \\(Recovery.command(\"x\")) (\\(1 + (2)))\" } }\nlet raw = #\"a \"Recovery\" b\"#\n"),
            SourceFile(path: "Maintenance/RecordsRecovery.swift", text: "struct Recovery {}\n"),
        ]
        #expect(Self.violations(in: files) == [
            "Delivery/FilesDelivery.swift: DownloadRun (Download, layer 7) from Delivery (layer 6)",
            "Catalog/Rules.swift: Records (Records, layer 3) from Catalog (layer 2)",
            "Records/RecordTypes.swift: Recovery (Maintenance, layer 7) from Records (layer 3)",
        ])
        #expect(!Self.code("let s = #\"a \"Recovery\" b\"#; let t = \"\"\"\nRecovery \\(x)\n\"\"\"").contains("Recovery"))
    }
}
