import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `glasses-local mirror DIR` only reads the store and never writes outside `DIR`: a `DIR`
/// that is the store or inside it is refused, a `DIR` that contains the store never
/// writes into it, links under `DIR` are never followed, files are replaced through
/// exclusive random temporary names, and a second run changes nothing.
///
/// Model `pf` (`weights.bin`, `sub/config.json`) is installed at `<store>/pf` from the
/// nginx folder `pf`, so its per-file source's URL path (`/pf/`) is its store folder's name.
@Suite("mirror only reads the store and never writes outside DIR", .ownThreads, .networkGuard)
struct MirrorBoundaryTests {
    static let files = [("weights.bin", 64 * 1024), ("sub/config.json", 700)]

    /// A world with `pf` served from `<mirror>/<folder>` and installed.
    struct Setup {
        let w: World
        let catalog: String

        init(folder: String = "pf") throws {
            w = try World()
            do {
                try w.addModel(folder, files: MirrorBoundaryTests.files)
                catalog = try w.filesCatalog(folder, id: "pf")
                let d = try w.run(["download", "pf"], catalog: catalog)
                try #require(d.status == 0, "\(d)")
                // A first read settles what opening the records creates (its WAL files).
                let l = try w.run(["list"], catalog: catalog)
                try #require(l.status == 0, "\(l)")
            } catch {
                w.remove()
                throw error
            }
        }

        /// Every entry of the store (its records aside) with its type, size and inode, and
        /// unless `contentOnly` its link count and change time: a file deleted, replaced or
        /// added shows here, and without `contentOnly` a file unlinked and linked again too.
        /// (`contentOnly` when the mirror may have linked an earlier file before refusing.)
        func storeState(contentOnly: Bool = false) -> [String] {
            Disk.tree(w.store).filter { !Disk.path(ofTreeLine: $0).hasPrefix("records.sqlite3") }.map { line in
                var st = stat()
                guard lstat(w.store + "/" + Disk.path(ofTreeLine: line), &st) == 0 else { return line + " (gone)" }
                if contentOnly || (st.st_mode & S_IFMT) == S_IFDIR { return "\(line) ino \(st.st_ino)" }
                return "\(line) ino \(st.st_ino) links \(st.st_nlink) ctime \(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
            }
        }

        /// The install survived: `verify` exits 0 and the files are the served ones.
        func expectInstallIntact(sourceLocation: SourceLocation = #_sourceLocation) throws {
            let v = try w.run(["verify", "pf"], catalog: catalog, sourceLocation: sourceLocation)
            #expect(v.status == 0, "the install must survive the mirror\n\(v)", sourceLocation: sourceLocation)
            #expect(try w.isInstalled("pf", catalog: catalog, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
        }
    }

    /// Where, relative to the store, the refused `DIR` is.
    enum InsideStore: String, CaseIterable, CustomTestStringConvertible {
        case storeRoot = "the store itself"
        case modelFolder = "the model's folder"
        case subfolder = "a folder inside the model's folder"
        case notYetThere = "a folder not yet made inside the store"
        case throughLink = "a link outside the store leading into it"
        var testDescription: String { rawValue }
    }

    @Test("DIR is the store or inside it: refused naming DIR and the store, nothing in the store changes, the install still verifies",
          arguments: InsideStore.allCases)
    func dirInsideTheStore(_ place: InsideStore) throws {
        let s = try Setup(); defer { s.w.remove() }
        let dir: String
        switch place {
        case .storeRoot: dir = s.w.store
        case .modelFolder: dir = s.w.store + "/pf"
        case .subfolder: dir = s.w.store + "/pf/sub"
        case .notYetThere: dir = s.w.store + "/site/mirror"
        case .throughLink:
            // A string comparison with the store's path sees nothing here.
            try #require(symlink(s.w.store + "/pf", s.w.root + "/looks-outside") == 0)
            dir = s.w.root + "/looks-outside"
        }
        let before = s.storeState()
        let r = try s.w.run(["mirror", dir], catalog: s.catalog)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains(dir) && r.stderr.contains(s.w.store), "the error names DIR and the store\n\(r)")
        #expect(r.stderr.contains("inside the store") && r.stderr.contains("Choose a folder outside the store"), "\(r)")
        #expect(s.storeState() == before, "mirror changed the store")
        #expect(!Disk.exists(s.w.store + "/site"), "DIR was created inside the store")
        try s.expectInstallIntact()
    }

    @Test("DIR contains the store and the URL path leads into it: refused at the store, nothing written into it",
          arguments: ["store/pf", "store"])
    func dirContainsTheStore(_ folder: String) throws {
        // The URL path is /store/pf/ (the install folder) or /store/ (the store root).
        let s = try Setup(folder: folder); defer { s.w.remove() }
        let before = s.storeState()
        let r = try s.w.run(["mirror", s.w.outer], catalog: s.catalog)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains(s.w.store) && r.stderr.contains("is the store"), "the error says the path reached the store\n\(r)")
        #expect(s.storeState() == before, "mirror wrote into the store")
        try s.expectInstallIntact()
    }

    /// A link planted where mirror writes, and what it points at.
    enum PlantedLink: String, CaseIterable, CustomTestStringConvertible {
        case modelFolder = "DIR/pf → an outside folder"
        case subfolder = "DIR/pf/sub → an outside folder"
        case finalFile = "DIR/pf/weights.bin → an outside file"
        var testDescription: String { rawValue }
    }

    @Test("a link planted under DIR where mirror writes: refused naming the link, the outside is untouched", arguments: PlantedLink.allCases)
    func plantedLinkUnderDir(_ planted: PlantedLink) throws {
        let s = try Setup(); defer { s.w.remove() }
        let dir = s.w.root + "/site"
        let victimFolder = s.w.root + "/victim-folder"
        let victimFile = s.w.root + "/victim.bin"
        let victimBytes = Data("outside; must never change\n".utf8)
        try FileManager.default.createDirectory(atPath: victimFolder, withIntermediateDirectories: true)
        try victimBytes.write(to: URL(fileURLWithPath: victimFile))
        let link: String
        let target: String
        switch planted {
        case .modelFolder: link = dir + "/pf"; target = victimFolder
        case .subfolder: link = dir + "/pf/sub"; target = victimFolder
        case .finalFile: link = dir + "/pf/weights.bin"; target = victimFile
        }
        try FileManager.default.createDirectory(atPath: (link as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try #require(symlink(target, link) == 0)
        let before = s.storeState(contentOnly: true)

        let r = try s.w.run(["mirror", dir], catalog: s.catalog)
        #expect(r.status == 1, "\(r)")
        #expect(r.stderr.contains(link) && r.stderr.contains("links under \(dir) are never followed"), "\(r)")
        #expect(Disk.tree(victimFolder).isEmpty, "written through the link: \(Disk.tree(victimFolder))")
        #expect(FileManager.default.contents(atPath: victimFile) == victimBytes, "the outside file was changed")
        #expect(Disk.links(under: dir).contains(String(link.dropFirst(dir.count + 1))), "the planted link is left as it was")
        #expect(s.storeState(contentOnly: true) == before)
        try s.expectInstallIntact()
    }

    @Test("links planted at the old predictable temporary names (.tmp-<pid>) while copying to another filesystem: never used, the outside is untouched")
    func plantedTemporaryNames() throws {
        let s = try Setup(); defer { s.w.remove() }
        // Another filesystem: no hard links, so every file is copied through a temporary name.
        let fs = try TmpfsMount(at: s.w.root + "/fs", sizeMb: 8); defer { fs.unmount() }
        let dir = fs.path + "/site"
        let victimFile = s.w.root + "/victim.bin"
        let victimBytes = Data("outside; must never change\n".utf8)
        try victimBytes.write(to: URL(fileURLWithPath: victimFile))
        // Links at `<destination>.tmp-<pid>` for the pids the next processes will get.
        let last = try #require(Int(try String(contentsOfFile: "/proc/sys/kernel/ns_last_pid", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        var planted = 0
        for path in ["pf/weights.bin", "pf/sub/config.json"] {
            let full = dir + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            for pid in (last + 1)...(last + 400) {
                try #require(symlink(victimFile, full + ".tmp-\(pid)") == 0)
                planted += 1
            }
        }

        for run in 1...2 {
            let r = try s.w.run(["mirror", dir, "--json"], catalog: s.catalog)
            #expect(r.status == 0, "run \(run): \(r)")
            let report = (try r.jsonObject()["models"] as? [[String: Any]])?.first
            #expect(report?["copied"] as? Int == 2, "run \(run), another filesystem: copies\n\(r)")
            s.w.expectInstalledMatches("pf", source: s.w.nginx.mirror + "/pf", installFolder: dir + "/pf")
        }
        #expect(FileManager.default.contents(atPath: victimFile) == victimBytes, "the outside file was written through a planted link")
        #expect(Disk.links(under: dir).count == planted, "the planted links are left as they were")
        #expect(Disk.regularFiles(under: dir) == ["pf/sub/config.json", "pf/weights.bin"], "no temporary file is left behind")
        try s.expectInstallIntact()
    }

    @Test("a second mirror into the same DIR changes nothing: exit 0, every file already in place, the same inodes, the store untouched")
    func secondRunIsIdempotent() throws {
        let s = try Setup(); defer { s.w.remove() }
        let dir = s.w.root + "/site"
        let first = try s.w.run(["mirror", dir, "--json"], catalog: s.catalog)
        try #require(first.status == 0, "\(first)")
        let firstReport = (try first.jsonObject()["models"] as? [[String: Any]])?.first
        #expect(firstReport?["linked"] as? Int == 2 && firstReport?["unchanged"] as? Int == 0, "\(first)")
        let before = s.storeState()
        func inodes() -> [UInt64] {
            ["pf/weights.bin", "pf/sub/config.json"].map { path in
                var st = stat()
                return lstat(dir + "/" + path, &st) == 0 ? UInt64(st.st_ino) : 0
            }
        }
        let mirrored = inodes()

        let second = try s.w.run(["mirror", dir, "--json"], catalog: s.catalog)
        #expect(second.status == 0, "\(second)")
        let report = (try second.jsonObject()["models"] as? [[String: Any]])?.first
        #expect(report?["linked"] as? Int == 0 && report?["copied"] as? Int == 0 && report?["unchanged"] as? Int == 2, "\(second)")
        #expect(inodes() == mirrored && !mirrored.contains(0), "the mirror's files are the same inodes")
        #expect(s.storeState() == before, "a second run unlinked and re-linked the store's files")
        let human = try s.w.run(["mirror", dir], catalog: s.catalog)
        #expect(human.status == 0 && human.stdout.contains("2 already in place"), "\(human)")
        try s.expectInstallIntact()
    }
}
