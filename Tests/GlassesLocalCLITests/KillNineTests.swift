import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// P1 under a real `kill -9` at each phase of an install (`GLASSES_LOCAL_TEST_HOOK=hold@<point>` parks the
/// process at the phase; the test waits for `HOLD <point>` and kills it). Afterwards the
/// model is installed or absent, never in between; the next download finishes without
/// fetching again what was already on disk; the records database is intact.
@Suite("Reliability: kill -9 at each install phase", .ownThreads, .networkGuard)
struct KillNineTests {
    /// Runs `download` held at `point`, waits for the hold, and kills it with SIGKILL.
    static func killDownload(_ w: World, id: String, catalog: String, at point: String,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let p = try w.start(["download", id], catalog: catalog, env: ["GLASSES_LOCAL_TEST_HOOK": "hold@" + point])
        let held = p.waitForStderr("HOLD \(point)", timeout: 60)
        if !held { p.send(SIGKILL) }
        try #require(held, "download never reached \(point)\n\(p.wait())", sourceLocation: sourceLocation)
        #expect(p.killNine(), "the process died by SIGKILL", sourceLocation: sourceLocation)
    }

    /// What a user sees right after the crash, then after running `download` again.
    static func expectRecovery(_ w: World, id: String, catalog: String, point: String, expectInstalled: Bool,
                               refetch: Refetch, matches source: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let installed = try w.expectAllOrNothing(id, catalog: catalog, sourceLocation: sourceLocation)
        #expect(installed == expectInstalled,
                "after kill -9 at \(point) the model should be \(expectInstalled ? "installed" : "absent")", sourceLocation: sourceLocation)
        #expect(Disk.tree(w.stagingRoot).isEmpty, "start-up repaired the staging leftovers: \(w.leftovers)", sourceLocation: sourceLocation)

        w.nginx.clearLog()
        let again = try w.run(["download", id], catalog: catalog, sourceLocation: sourceLocation)
        #expect(again.status == 0, "\(again)", sourceLocation: sourceLocation)
        let log = w.nginx.accessLog()
        switch refetch {
        case .nothing:
            #expect(log.isEmpty, "what was verified on disk is not fetched again after kill -9 at \(point): \(log)", sourceLocation: sourceLocation)
        case .resume(let file, let size):
            let resumed = log.filter { $0.path.hasSuffix("/" + file) }
            #expect(resumed.count == 1 && (resumed.first?.rangeStart ?? 0) > 0 && resumed.first?.ifRange != nil && resumed.first?.status == 206,
                    "the download resumes \(file) with Range + If-Range: \(log)", sourceLocation: sourceLocation)
            let sent = log.reduce(Int64(0)) { $0 + $1.bytesSent }
            #expect(sent < size, "the resume fetched \(sent) bytes, less than the \(size) of \(file)", sourceLocation: sourceLocation)
        }
        w.expectInstalledMatches(id, source: source, sourceLocation: sourceLocation)
        let v = try w.run(["verify", id], catalog: catalog, sourceLocation: sourceLocation)
        #expect(v.status == 0, "\(v)", sourceLocation: sourceLocation)
        #expect(try w.isInstalled(id, catalog: catalog, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
        try w.expectRecordsIntact(catalog: catalog, sourceLocation: sourceLocation)
        // Whatever is left over, gc collects; the installed model stays.
        let gc = try w.run(["gc"], catalog: catalog, sourceLocation: sourceLocation)
        #expect(gc.status == 0, "\(gc)", sourceLocation: sourceLocation)
        #expect(w.leftovers.isEmpty, "after gc nothing is left in .partial or .staging: \(w.leftovers)", sourceLocation: sourceLocation)
        let v2 = try w.run(["verify", id], catalog: catalog, sourceLocation: sourceLocation)
        #expect(v2.status == 0, "\(v2)", sourceLocation: sourceLocation)
    }

    enum Refetch {
        case nothing
        case resume(file: String, size: Int64)
    }

    @Test("files model: kill -9 at a phase → installed or absent; download again → exit 0, verify 0, records ok",
          arguments: ["download", "hash", "install", "after-rename", "after-commit"])
    func filesModel(point: String) throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let fast = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        // Progress (where the `download` point sits) is reported every 100 ms: slow the transfer down.
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        if point == "hash" {
            // A resume base to hash: an interrupted, slowed download.
            let p = try w.start(["download", SampleModel.id], catalog: slow)
            try interruptAfter(p, wrote: 64 << 10, of: w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)")
        }
        try Self.killDownload(w, id: SampleModel.id, catalog: point == "download" ? slow : fast, at: point)
        let refetch: Refetch = point == "download" || point == "hash"
            ? .resume(file: SampleModel.big, size: Int64(SampleModel.bigSize)) : .nothing
        // From the rename on, the verified tree is in place and start-up repair finishes the install (P15).
        try Self.expectRecovery(w, id: SampleModel.id, catalog: fast, point: point, expectInstalled: ["after-rename", "after-commit"].contains(point),
                                refetch: refetch, matches: w.nginx.mirror + "/" + SampleModel.folder)
    }

    /// Version 1 installed from `u1`, and a version-2 catalog of the same model id whose
    /// `b.bin` changed (from `u2`).
    static func updateWorld() throws -> (w: World, v1: String, v2: String) {
        let w = try World()
        try w.addModel("u1", files: [("a.bin", 200 * 1024), ("b.bin", 90 * 1024)])
        let v1 = try w.filesCatalog("u1", id: "u")
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/u2", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: w.nginx.mirror + "/u1/a.bin", toPath: w.nginx.mirror + "/u2/a.bin")
        _ = try w.nginx.addRandomFile("u2/b.bin", size: 70 * 1024)
        let hashed = try String(contentsOfFile: try w.filesCatalog("u2", id: "u"), encoding: .utf8)
        let v2 = w.root + "/catalogs/u-v2.json"
        try hashed.replacingOccurrences(of: "\"catalogVersion\": 1,", with: "\"catalogVersion\": 2,").write(toFile: v2, atomically: true, encoding: .utf8)
        return (w, v1, v2)
    }

    @Test("an update killed after the new tree took the folder's name, before the records said so: start-up repair finishes it (installed v2, verify 0, nothing fetched)")
    func updateKilledAfterRename() throws {
        let (w, v1, v2) = try Self.updateWorld(); defer { w.remove() }
        try #require(try w.run(["download", "u"], catalog: v1).status == 0)
        try Self.killDownload(w, id: "u", catalog: v2, at: "after-rename")
        w.nginx.clearLog()
        let list = try w.run(["list", "--json"], catalog: v2)
        let u = try #require((try list.jsonObject()["models"] as? [[String: Any]])?.first { $0["id"] as? String == "u" }, "\(list)")
        #expect(u["isInstalled"] as? Bool == true && u["updateAvailable"] as? Bool == false, "the update is finished, not half-recorded: \(list)")
        let verify = try w.run(["verify", "u"], catalog: v2)
        #expect(verify.status == 0, "the records describe the files in the folder\n\(verify)")
        w.expectInstalledMatches("u", source: w.nginx.mirror + "/u2")
        let history = try w.run(["history", "u"], catalog: v2)
        #expect(history.stdout.contains("finished an interrupted install"), "\(history)")
        let again = try w.run(["download", "u"], catalog: v2)
        #expect(again.status == 0 && again.stdout.contains("already installed"), "\(again)")
        #expect(w.nginx.accessLog().isEmpty, "nothing fetched again: \(w.nginx.accessLog())")
        #expect(Disk.tree(w.stagingRoot).isEmpty, "no .replaced left: \(w.leftovers)")
        try w.expectRecordsIntact(catalog: v2)
    }

    @Test("an update killed with the old tree moved aside and the new one not yet in place: repair restores v1 (verify 0), keeps v2's verified files, and the next download fetches nothing")
    func updateKilledBetweenRenames() throws {
        let (w, v1, v2) = try Self.updateWorld(); defer { w.remove() }
        try #require(try w.run(["download", "u"], catalog: v1).status == 0)
        try Self.killDownload(w, id: "u", catalog: v2, at: "aside")
        w.nginx.clearLog()
        let verify = try w.run(["verify", "u"], catalog: v2)
        #expect(verify.status == 0, "v1 is back in place and verifies against its records\n\(verify)")
        w.expectInstalledMatches("u", source: w.nginx.mirror + "/u1")
        let again = try w.run(["download", "u"], catalog: v2)
        #expect(again.status == 0, "\(again)")
        #expect(w.nginx.accessLog().isEmpty, "the update's verified files were kept: \(w.nginx.accessLog())")
        w.expectInstalledMatches("u", source: w.nginx.mirror + "/u2")
        try w.expectRecordsIntact(catalog: v2)
    }

    @Test("a delete killed after its records write: the model is absent at once, and repair finishes removing its files")
    func deleteKilledAfterRecording() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        try #require(try w.run(["download", SampleModel.id], catalog: catalog).status == 0)
        let p = try w.start(["delete", SampleModel.id], catalog: catalog, env: ["GLASSES_LOCAL_TEST_HOOK": "hold@delete-recorded"])
        let held = p.waitForStderr("HOLD delete-recorded", timeout: 60)
        if !held { p.send(SIGKILL) }
        try #require(held, "\(p.wait())")
        // While the delete is held: the records already say absent, and the files are all there.
        #expect(Disk.exists(w.installFolder(SampleModel.id)))
        #expect(p.killNine())
        #expect(try !w.isInstalled(SampleModel.id, catalog: catalog))
        #expect(!Disk.exists(w.installFolder(SampleModel.id)), "repair finished the delete")
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
        let history = try w.run(["history", SampleModel.id], catalog: catalog)
        #expect(history.stdout.contains("finished an interrupted delete"), "\(history)")
        try w.expectRecordsIntact(catalog: catalog)
    }

    @Test("kill -9 while a new store's records are built: the temporary database is left; gc keeps it while it could be a write in progress, removes it once an hour old, and the store works")
    func recordsCreationKilled() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let p = try w.start(["download", SampleModel.id], catalog: catalog, env: ["GLASSES_LOCAL_TEST_HOOK": "hold@migrate"])
        let held = p.waitForStderr("HOLD migrate", timeout: 60)
        if !held { p.send(SIGKILL) }
        try #require(held, "\(p.wait())")
        #expect(p.killNine())
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: w.store).filter { $0.hasPrefix(".records.sqlite3.tmp-") }
        try #require(leftovers.count == 1, "the temporary database the kill left: \(leftovers)")
        let leftover = w.store + "/" + leftovers[0]
        #expect(!Disk.exists(w.store + "/records.sqlite3"), "never linked into place")
        // A user's own file with a similar name is not ours to remove.
        let foreign = w.store + "/.notes.tmp-Keep"
        try Data("mine".utf8).write(to: URL(fileURLWithPath: foreign))

        let fresh = try w.run(["gc"], catalog: catalog)
        #expect(fresh.status == 0, "\(fresh)")
        #expect(Disk.exists(leftover) && !fresh.stdout.contains(leftovers[0]), "a young temporary may be a write in progress: \(fresh)")

        let twoHoursAgo = Date().addingTimeInterval(-7200)
        for path in [leftover, foreign] {
            try FileManager.default.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: path)
        }
        let old = try w.run(["gc"], catalog: catalog)
        #expect(old.status == 0, "\(old)")
        #expect(!Disk.exists(leftover) && old.stdout.contains("removed \(leftover)"), "\(old)")
        #expect(Disk.exists(foreign), "a name createTemporary never makes is left alone")
        let d = try w.run(["download", SampleModel.id], catalog: catalog)
        #expect(d.status == 0, "\(d)")
        try w.expectRecordsIntact(catalog: catalog)
        let history = try w.run(["history"], catalog: catalog)
        #expect(history.stdout.contains("gc removed 1 item(s)"), "\(history)")
    }

    @Test("archive model: kill -9 at a phase (unpack included) → installed or absent; download again → exit 0, verify 0, records ok",
          arguments: ["download", "unpack", "install", "after-rename", "after-commit"])
    func archiveModel(point: String) throws {
        let w = try World(); defer { w.remove() }
        let source = try ArchiveModel.make(in: w)
        let size = try #require(Disk.fileSize(w.nginx.mirror + "/" + ArchiveModel.archivePath))
        try Self.killDownload(w, id: ArchiveModel.id, catalog: point == "download" ? source.slowCatalog : source.catalog, at: point)
        let refetch: Refetch = point == "download" ? .resume(file: "arch.tar.bz2", size: size) : .nothing
        try Self.expectRecovery(w, id: ArchiveModel.id, catalog: source.catalog, point: point, expectInstalled: ["after-rename", "after-commit"].contains(point),
                                refetch: refetch, matches: source.tree)
    }
}
