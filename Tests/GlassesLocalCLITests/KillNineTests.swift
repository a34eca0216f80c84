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
@Suite("Reliability: kill -9 at each install phase", .ownThreads)
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
        try Self.expectRecovery(w, id: SampleModel.id, catalog: fast, point: point, expectInstalled: point == "after-commit",
                                refetch: refetch, matches: w.nginx.mirror + "/" + SampleModel.folder)
    }

    @Test("archive model: kill -9 at a phase (unpack included) → installed or absent; download again → exit 0, verify 0, records ok",
          arguments: ["download", "unpack", "install", "after-rename", "after-commit"])
    func archiveModel(point: String) throws {
        let w = try World(); defer { w.remove() }
        let source = try ArchiveModel.make(in: w)
        let size = try #require(Disk.fileSize(w.nginx.mirror + "/" + ArchiveModel.archivePath))
        try Self.killDownload(w, id: ArchiveModel.id, catalog: point == "download" ? source.slowCatalog : source.catalog, at: point)
        let refetch: Refetch = point == "download" ? .resume(file: "arch.tar.bz2", size: size) : .nothing
        try Self.expectRecovery(w, id: ArchiveModel.id, catalog: source.catalog, point: point, expectInstalled: point == "after-commit",
                                refetch: refetch, matches: source.tree)
    }
}
