import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// P11, the store is a boundary: links planted inside the store are removed, never
/// followed or moved, and nothing outside it is created, written, renamed or deleted.
/// Model `s1` has `s.bin` and `sub/t.bin`; each test plants a link where the store keeps
/// partial data, staging trees, installed files, locks or its records, pointing at
/// files and folders beside the store, then runs the built command.
@Suite("Reliability: the store is a boundary (planted links)", .ownThreads, .networkGuard)
struct StoreBoundaryTests {
    static let id = "s1"
    static let folder = "boundary"
    static let files = [("s.bin", 300 * 1024), ("sub/t.bin", 4096)]

    /// A world with `s1` on the mirror, its catalog, and outside victims: a file with
    /// known bytes and an empty folder, both beside the store.
    struct Setup {
        let w: World
        let catalog: String
        var victimFile: String { w.outer + "/victim.bin" }
        var victimFolder: String { w.outer + "/victim-folder" }
        let victimBytes = Data("the outside file; must never change\n".utf8)

        init() throws {
            w = try World()
            try w.addModel(StoreBoundaryTests.folder, files: StoreBoundaryTests.files)
            catalog = try w.filesCatalog(StoreBoundaryTests.folder, id: StoreBoundaryTests.id)
            try victimBytes.write(to: URL(fileURLWithPath: w.outer + "/victim.bin"))
            try FileManager.default.createDirectory(atPath: w.outer + "/victim-folder", withIntermediateDirectories: true)
        }

        /// Everything beside the store (types, sizes), to compare before and after.
        func outside() -> [String] { ArchiveSafetyTests.snapshot(w.outer) }

        func link(_ path: String, to target: String) throws {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try #require(symlink(target, path) == 0, "symlink \(path) → \(target): \(String(cString: strerror(errno)))")
        }

        /// The outside file and folder are as they were; the download installed every file.
        func expectUntouchedAndInstalled(_ before: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
            #expect(FileManager.default.contents(atPath: victimFile) == victimBytes, "the outside file was written through a link",
                    sourceLocation: sourceLocation)
            #expect(outside() == before, "something beside the store changed: \(outside()) vs \(before)", sourceLocation: sourceLocation)
            w.expectInstalledMatchesMirror(StoreBoundaryTests.id, folder: StoreBoundaryTests.folder, sourceLocation: sourceLocation)
            #expect(Disk.links(under: w.store).isEmpty, "no link is left in the store: \(Disk.links(under: w.store))",
                    sourceLocation: sourceLocation)
            let v = try w.run(["verify", StoreBoundaryTests.id], catalog: catalog, sourceLocation: sourceLocation)
            #expect(v.status == 0, "\(v)", sourceLocation: sourceLocation)
        }

        /// `history` records that a link was removed.
        func expectRemovalRecorded(sourceLocation: SourceLocation = #_sourceLocation) throws {
            let h = try w.run(["history"], catalog: catalog, sourceLocation: sourceLocation)
            #expect(h.status == 0 && h.stdout.contains("symbolic link"), "the history says a link was removed\n\(h)",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("a partial file that is a link to an outside file: removed, the download installs every file, the outside file is unchanged")
    func partialFileLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        try s.link(s.w.partialRoot + "/s1/s.bin", to: s.victimFile)
        let before = s.outside()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        try s.expectUntouchedAndInstalled(before)
        try s.expectRemovalRecorded()
    }

    @Test("a partial folder that is a link to an outside folder: nothing is written there")
    func partialFolderLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        try s.link(s.w.partialRoot + "/s1", to: s.victimFolder)
        let before = s.outside()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        #expect(Disk.tree(s.victimFolder).isEmpty, "files were written into the outside folder: \(Disk.tree(s.victimFolder))")
        try s.expectUntouchedAndInstalled(before)
        try s.expectRemovalRecorded()
    }

    @Test("a staging folder that is a link: start-up repair removes it (never moves it into .partial); the download works")
    func stagingFolderLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        // A store that exists (start-up repair runs where there are records).
        let made = try s.w.run(["gc"], catalog: s.catalog)
        try #require(made.status == 0, "\(made)")
        try Data("keep".utf8).write(to: URL(fileURLWithPath: s.victimFolder + "/keep.txt"))
        try s.link(s.w.stagingRoot + "/s1", to: s.victimFolder)
        let before = s.outside()
        let list = try s.w.run(["list"], catalog: s.catalog)
        #expect(list.status == 0, "\(list)")
        #expect(!Disk.exists(s.w.partialRoot + "/s1") && !Disk.exists(s.w.stagingRoot + "/s1"),
                "the link was removed, not moved: \(s.w.leftovers)")
        #expect(s.outside() == before, "the outside folder changed: \(s.outside())")
        try s.expectRemovalRecorded()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        try s.expectUntouchedAndInstalled(before)
    }

    @Test("an installed file replaced by a link: repair removes the link, the next download fetches that file, the outside file is unchanged")
    func installedFileLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        let first = try s.w.run(["download", Self.id], catalog: s.catalog)
        try #require(first.status == 0, "\(first)")
        let installed = s.w.installFolder(Self.id) + "/s.bin"
        try FileManager.default.removeItem(atPath: installed)
        try s.link(installed, to: s.victimFile)
        let before = s.outside()
        #expect(try !s.w.isInstalled(Self.id, catalog: s.catalog), "a model with a linked file is not installed")
        #expect(Disk.links(under: s.w.store).isEmpty, "repair removed the link instead of carrying it: \(Disk.links(under: s.w.store))")
        try s.expectRemovalRecorded()
        s.w.nginx.clearLog()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        #expect(s.w.nginx.accessLog().map(\.path).allSatisfy { $0.hasSuffix("/s.bin") },
                "only the linked file is fetched again: \(s.w.nginx.accessLog())")
        try s.expectUntouchedAndInstalled(before)
    }

    @Test("an installed subfolder replaced by a link to an outside copy: not installed, never verified through the link, fetched again")
    func installedFolderLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        let first = try s.w.run(["download", Self.id], catalog: s.catalog)
        try #require(first.status == 0, "\(first)")
        // The outside copy has the right bytes: a check through the link would pass.
        let sub = s.w.installFolder(Self.id) + "/sub"
        try FileManager.default.moveItem(atPath: sub, toPath: s.victimFolder + "/sub")
        try s.link(sub, to: s.victimFolder + "/sub")
        let before = s.outside()
        let v = try s.w.run(["verify", Self.id], catalog: s.catalog)
        #expect(v.status != 0, "a file reached through a link does not verify\n\(v)")
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        try s.expectUntouchedAndInstalled(before)
    }

    @Test("store folders (.partial, .locks) that are links to outside folders: replaced by real ones, nothing written outside")
    func storeFolderLinks() throws {
        let s = try Setup(); defer { s.w.remove() }
        let locks = s.w.outer + "/victim-locks"
        try FileManager.default.createDirectory(atPath: locks, withIntermediateDirectories: true)
        try s.link(s.w.partialRoot, to: s.victimFolder)
        try s.link(s.w.store + "/.locks", to: locks)
        let before = s.outside()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        #expect(Disk.tree(locks).isEmpty && Disk.tree(s.victimFolder).isEmpty, "nothing is written in the outside folders")
        try s.expectUntouchedAndInstalled(before)
        try s.expectRemovalRecorded()
    }

    @Test("a lock file that is a dangling link: the outside target is never created")
    func lockFileLink() throws {
        let s = try Setup(); defer { s.w.remove() }
        let target = s.w.outer + "/created-through-lock"
        try s.link(s.w.store + "/.locks/s1.lock", to: target)
        let before = s.outside()
        let r = try s.w.run(["download", Self.id], catalog: s.catalog)
        #expect(r.status == 0, "\(r)")
        #expect(!Disk.exists(target), "the lock file's link target was created outside the store")
        try s.expectUntouchedAndInstalled(before)
    }

    @Test("records.sqlite3 that is a link (dangling, or to an outside database): refused with a clear message, nothing created or written outside",
          arguments: [false, true])
    func recordsLink(targetExists: Bool) throws {
        let s = try Setup(); defer { s.w.remove() }
        let target = s.w.outer + "/outside.sqlite3"
        if targetExists {
            // A real database outside: made by the command in a store of its own.
            let other = s.w.outer + "/other-store"
            let store = s.w.store
            s.w.store = other
            let made = try s.w.run(["gc"], catalog: s.catalog)
            s.w.store = store
            try #require(made.status == 0, "\(made)")
            try FileManager.default.copyItem(atPath: other + "/records.sqlite3", toPath: target)
            try FileManager.default.removeItem(atPath: other)
        }
        try FileManager.default.createDirectory(atPath: s.w.store, withIntermediateDirectories: true)
        try s.link(s.w.store + "/records.sqlite3", to: target)
        let before = s.outside()
        let bytesBefore = FileManager.default.contents(atPath: target)
        for command in [["list"], ["download", Self.id], ["doctor"]] {
            let r = try s.w.run(command, catalog: s.catalog)
            #expect(r.status != 0, "\(r)")
            #expect((r.stdout + r.stderr).contains("records.sqlite3 is a symbolic link"), "the message names the link\n\(r)")
        }
        #expect(s.outside() == before, "nothing is created beside the store: \(s.outside()) vs \(before)")
        #expect(FileManager.default.contents(atPath: target) == bytesBefore, "the outside database is unchanged")
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!Disk.exists(target + suffix), "SQLite created \(target + suffix) outside the store")
        }
    }
}
