import Foundation
import GlassesTestSupport
import Testing

/// What docs/ARCHITECTURE.md says about where things happen, checked against the sources,
/// so that the map stays true (each claim names its section there). The folders' layers are
/// FolderLayerTests'; the public surface is Scripts/docs'.
@Suite(.networkGuard)
struct ArchitectureClaimsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Every Swift file under `Sources/<folder>`, as (path from Sources/, its code without
    /// comments and string literals: FolderLayerTests' reading).
    static func sources(_ folder: String) throws -> [(path: String, code: String)] {
        let base = root.appendingPathComponent("Sources")
        let start = base.appendingPathComponent(folder)
        guard let walk = FileManager.default.enumerator(atPath: start.path) else { return [] }
        var files: [(String, String)] = []
        for case let relative as String in walk where relative.hasSuffix(".swift") {
            let text = try String(contentsOf: start.appendingPathComponent(relative), encoding: .utf8)
            files.append((folder + "/" + relative, FolderLayerTests.code(text)))
        }
        return files.sorted { $0.0 < $1.0 }
    }

    static func imports(_ code: String, _ module: String) -> Bool {
        code.split(separator: "\n").contains { line in
            let words = line.split(separator: " ")
            guard let at = words.firstIndex(of: "import"), at + 1 < words.count else { return false }
            return words[at + 1] == module
        }
    }

    @Test("POSIX goes through System/ and nowhere else: no other file of the engine imports Glibc, Darwin or CSystem, or names a mode, an O_ flag or an errno constant")
    func posixStaysInSystem() throws {
        let files = try Self.sources("LocalModelKit")
        #expect(files.count > 50, "the sources were found (\(files.count) files)")
        let posixNames = ["st_mode", "S_IFMT", "S_IFREG", "S_IFDIR", "O_RDONLY", "O_WRONLY", "O_RDWR", "O_CREAT", "O_EXCL",
                          "O_NOFOLLOW", "O_DIRECTORY", "O_CLOEXEC", "EINTR", "EAGAIN", "ENOENT", "EEXIST", "ENOSPC", "EACCES"]
        var offenders: [String] = []
        for file in files where !file.path.hasPrefix("LocalModelKit/System/") {
            for module in ["Glibc", "Darwin", "Musl", "CSystem"] where Self.imports(file.code, module) {
                offenders.append("\(file.path) imports \(module)")
            }
            for name in posixNames where file.code.range(of: "\\b\(name)\\b", options: .regularExpression) != nil {
                offenders.append("\(file.path) names \(name)")
            }
        }
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
    }

    @Test("each C library is reached from one Swift file, the one ARCHITECTURE.md names")
    func oneFilePerCLibrary() throws {
        let owners = [
            "CSQLite": "LocalModelKit/Records/SQLite.swift", "CCurl": "LocalModelKit/Transfer/Curl.swift",
            "CArchive": "LocalModelKit/Unpack/Archive.swift", "CBZip2": "LocalModelKit/Unpack/BZip2.swift",
            "CCrypto": "LocalModelKit/Integrity/Crypto.swift", "CSDBus": "LocalModelKit/Prefetch/NetworkManagerBus.swift",
        ]
        var files: [(path: String, code: String)] = []
        for folder in ["LocalModelKit", "GlassesCore", "GlassesLocal", "GlassesLocalVoice", "glasses-local"] {
            files += try Self.sources(folder)
        }
        let map = try String(contentsOf: Self.root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        for (module, owner) in owners {
            let importers = files.filter { Self.imports($0.code, module) }.map(\.path)
            #expect(importers == [owner], "\(module) is imported by \(importers), the map says \(owner)")
            let named = String(owner.dropFirst("LocalModelKit/".count))
            #expect(map.contains("`\(named)`"), "ARCHITECTURE.md names \(named) as \(module)'s one file")
        }
    }

    @Test("the command reaches the store only through the engine: no file of glasses-local opens or queries the records, or runs SQL")
    func theCommandGoesThroughTheEngine() throws {
        let files = try Self.sources("glasses-local")
        #expect(!files.isEmpty)
        var offenders: [String] = []
        for file in files {
            for pattern in ["\\bRecords\\(", "\\bRecords\\.open", "\\.read\\s*\\{", "\\.write\\s*\\{", "SQLiteConnection", "\\.execute\\(", "\\.query\\("]
            where file.code.range(of: pattern, options: .regularExpression) != nil {
                offenders.append("\(file.path): \(pattern)")
            }
        }
        #expect(offenders.isEmpty, "\(offenders.joined(separator: "\n"))")
    }

    @Test("a command decides nothing itself: no file of glasses-local runs the autoChoice rule (the engine's explainAutoChoice gives the decision with its inputs and memory reading)")
    func theCommandDoesNotDecide() throws {
        let offenders = try Self.sources("glasses-local").filter {
            $0.code.contains("AutoChoiceRule") || $0.code.contains(".decide(")
        }.map(\.path)
        #expect(offenders.isEmpty, "\(offenders)")
    }

    @Test("a download reads the records once (A download, from request to record): the only records read under Download/ is DownloadRecorder's")
    func aDownloadReadsTheRecordsOnce() throws {
        var reads: [String] = []
        for file in try Self.sources("LocalModelKit/Download") {
            let count = file.code.components(separatedBy: "records.read").count - 1
            reads += Array(repeating: file.path, count: count)
        }
        #expect(reads == ["LocalModelKit/Download/DownloadRecorder.swift"], "\(reads)")
    }

    @Test("the engine does not import the SDK seam: GlassesCore is mapped in the facades, never used by LocalModelKit")
    func theEngineDoesNotImportTheSeam() throws {
        let importers = try Self.sources("LocalModelKit").filter { Self.imports($0.code, "GlassesCore") }.map(\.path)
        #expect(importers.isEmpty, "\(importers)")
    }

    @Test("every target that imports a module of this package declares it in Package.swift")
    func importsAreDeclared() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let ours = ["GlassesCore", "GlassesLocal", "GlassesLocalVoice", "LocalModelKit"]
        for target in ["GlassesLocal", "GlassesLocalVoice", "glasses-local"] {
            let used = Set(try Self.sources(target).flatMap { file in ours.filter { Self.imports(file.code, $0) } })
            // The target's declaration: from `name: "<target>"` to the end of its line.
            guard let at = manifest.range(of: "arget(name: \"\(target)\"") else { Issue.record("\(target) not in Package.swift"); continue }
            let line = manifest[at.lowerBound...].prefix { $0 != "\n" }
            for module in used where module != target {
                #expect(line.contains("\"\(module)\""), "\(target) imports \(module) but Package.swift does not declare it: \(line)")
            }
        }
    }
}
