import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// P8 with hostile archives served by nginx: each archive matches its catalog size and
/// SHA-256 (so the download succeeds and the extraction is what refuses). `download`
/// exits 4 naming the entry, nothing appears outside the store, nothing is installed.
@Suite("Reliability: hostile archives stay confined", .ownThreads, .networkGuard)
struct ArchiveSafetyTests {
    struct Hostile: CustomTestStringConvertible, Sendable {
        /// `Tests/Tools/hostile-archive.py` KIND.
        var kind: String
        /// What the error message must name.
        var names: String
        var testDescription: String { kind }
    }

    static let cases: [Hostile] = [
        Hostile(kind: "dotdot", names: "../x"),
        Hostile(kind: "absolute", names: "/tmp/glasses-local-x-"),
        Hostile(kind: "nested", names: "a/../../x"),
        Hostile(kind: "symlink", names: "model/out"),
        Hostile(kind: "hardlink", names: "model/passwd"),
        Hostile(kind: "device", names: "model/null"),
        Hostile(kind: "bomb", names: "weights.bin"),
        Hostile(kind: "entries", names: "entries"),
    ]

    static let script = PackageRoot.path() + "/Tests/Tools/hostile-archive.py"

    /// Everything under a folder (types and sizes) except the store, to compare before and after.
    static func snapshot(_ path: String) -> [String] {
        Disk.tree(path).filter { Disk.path(ofTreeLine: $0) != "store" && !Disk.path(ofTreeLine: $0).hasPrefix("store/") }
    }

    @Test("a hostile tar.bz2 whose hash matches the catalog: exit 4 naming the entry, nothing outside the store, nothing installed",
          arguments: cases)
    func hostileArchiveIsRefused(_ hostile: Hostile) throws {
        let w = try World(); defer { w.remove() }
        let id = "hostile"
        let payload = w.root + "/payload"
        try FileManager.default.createDirectory(atPath: payload, withIntermediateDirectories: true)
        try Disk.randomBytes(4096).write(to: URL(fileURLWithPath: payload + "/weights.bin"))
        try Data(#"{"layers": 2}"#.utf8).write(to: URL(fileURLWithPath: payload + "/config.json"))

        // Where an escape would land.
        let absolute = "/tmp/glasses-local-x-\(UUID().uuidString)"
        let victim = w.outer + "/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        var passwd = stat()
        #expect(lstat("/etc/passwd", &passwd) == 0)
        let target: String
        switch hostile.kind {
        case "absolute": target = absolute
        case "symlink": target = victim
        case "hardlink": target = "/etc/passwd"
        case "bomb": target = "64"
        case "entries": target = "3000"
        default: target = ""
        }

        let archive = "archives/\(hostile.kind).tar.bz2"
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let made = try World.tool("/usr/bin/env", ["python3", Self.script, hostile.kind, w.nginx.mirror + "/" + archive, payload, target])
        try #require(made.status == 0, "\(made)")
        let catalog = try w.archiveCatalog(id: id, archivePath: archive, files: try w.fileEntries(of: payload))

        let outerBefore = Self.snapshot(w.outer)
        let cwdBefore = Self.snapshot(w.cwd)
        let r = try w.run(["download", id], catalog: catalog)
        #expect(r.status == 4, "\(r)")
        #expect(r.stderr.contains("the archive of \(id)") && r.stderr.contains("was refused"), "\(r)")
        #expect(r.stderr.contains(hostile.names), "the message names the entry (\(hostile.names))\n\(r)")
        #expect(r.stderr.contains("Nothing was installed"), "\(r)")
        #expect(w.nginx.requests(for: archive).first?.status == 200, "the archive itself was fetched: \(w.nginx.accessLog())")

        // Nothing outside the store: its parent, the working folder, /tmp, /etc/passwd.
        let store = Disk.tree(w.store)
        #expect(Self.snapshot(w.outer) == outerBefore, "the store's parent folder changed: \(Self.snapshot(w.outer))")
        #expect(Self.snapshot(w.cwd) == cwdBefore, "the working folder changed: \(Self.snapshot(w.cwd))")
        #expect(Disk.tree(victim).isEmpty, "nothing was written through a link: \(Disk.tree(victim))")
        #expect(!Disk.exists(absolute), "\(absolute) was created")
        var after = stat()
        #expect(lstat("/etc/passwd", &after) == 0 && after.st_nlink == passwd.st_nlink && after.st_size == passwd.st_size,
                "/etc/passwd gained no link")
        let escaped = Disk.tree(w.root).map(Disk.path(ofTreeLine:)).filter { ($0 as NSString).lastPathComponent == "x" }
        #expect(escaped.isEmpty, "no `x` anywhere in the test's folder: \(escaped)")
        // Inside the store: only regular files and folders, nothing staged, nothing installed.
        #expect(store.allSatisfy { $0.hasPrefix("f ") || $0.hasPrefix("d ") }, "only files and folders in the store: \(store)")
        #expect(Disk.tree(w.stagingRoot).isEmpty, "the half-extracted tree is gone: \(Disk.tree(w.stagingRoot))")
        #expect(!Disk.exists(w.installFolder(id)), "no final folder")
        #expect(!Disk.exists(w.partialRoot + "/" + id), "no extracted files kept as partial data: \(w.leftovers)")
        #expect(try !w.isInstalled(id, catalog: catalog))

        // Asking again changes nothing.
        let again = try w.run(["download", id], catalog: catalog)
        #expect(again.status == 4 && again.stderr.contains(hostile.names), "\(again)")
        #expect(!Disk.exists(w.installFolder(id)) && Disk.tree(w.stagingRoot).isEmpty)
        #expect(try !w.isInstalled(id, catalog: catalog))
        try w.expectRecordsIntact(catalog: catalog)
    }

    /// A release tarball with extras beside the listed files, and its catalog.
    static func releaseWithExtras(_ w: World, extra: (name: String, size: Int)) throws -> (catalog: String, tree: String) {
        let src = w.root + "/release"
        let tree = src + "/voice-1.0"
        try FileManager.default.createDirectory(atPath: tree + "/voices", withIntermediateDirectories: true)
        try Disk.randomBytes(200_000).write(to: URL(fileURLWithPath: tree + "/model.onnx"))
        try Disk.randomBytes(3000).write(to: URL(fileURLWithPath: tree + "/voices/am_adam.bin"))
        let files = try w.fileEntries(of: tree)   // the catalog lists these, not the extras
        try Data("# Voice\n".utf8).write(to: URL(fileURLWithPath: tree + "/README.md"))
        try Disk.randomBytes(extra.size).write(to: URL(fileURLWithPath: tree + "/" + extra.name))
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let tar = try World.tool("/usr/bin/env", ["tar", "-cjf", w.nginx.mirror + "/archives/release.tar.bz2", "-C", src, "voice-1.0"])
        try #require(tar.status == 0, "\(tar)")
        let installed = w.root + "/expected"
        try FileManager.default.copyItem(atPath: tree, toPath: installed)
        try FileManager.default.removeItem(atPath: installed + "/README.md")
        try FileManager.default.removeItem(atPath: installed + "/" + extra.name)
        return (try w.archiveCatalog(id: "release", archivePath: "archives/release.tar.bz2", files: files), installed)
    }

    @Test("a release tarball's extras (README, LICENSE) are skipped and reported — a --json event and the history — and the model installs")
    func extrasAreSkipped() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, expected) = try Self.releaseWithExtras(w, extra: (name: "LICENSE", size: 1200))
        let r = try w.run(["download", "release", "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let events = r.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let skipped = events.first { $0["event"] as? String == "extras-skipped" }
        #expect((skipped?["entries"] as? [String])?.sorted() == ["LICENSE", "README.md"], "\(r.stdout)")
        w.expectInstalledMatches("release", source: expected)
        let history = try w.run(["history", "release"], catalog: catalog)
        #expect(history.stdout.contains("skipped 2 archive entries the catalog does not list"), "\(history)")
        let text = try w.run(["download", "release"], catalog: catalog)
        #expect(text.status == 0, "\(text)")
    }

    @Test("an unlisted entry too big to be an extra (17 MiB) is refused: exit 4, nothing installed")
    func bigExtraIsRefused() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, _) = try Self.releaseWithExtras(w, extra: (name: "weights-v2.bin", size: 17 << 20))
        let r = try w.run(["download", "release"], catalog: catalog)
        #expect(r.status == 4 && r.stderr.contains("weights-v2.bin") && r.stderr.contains("too big to be a release's extra"), "\(r)")
        #expect(!Disk.exists(w.installFolder("release")))
        #expect(Disk.tree(w.stagingRoot).isEmpty, "\(w.leftovers)")
    }
}
