import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// P9 with real processes: many `glasses-local download` of one model while another
/// process deletes it over and over. Every process ends 0 or 7 (busy), SQLite's busy
/// state never reaches a user, the store ends consistent, the records database intact.
@Suite("Reliability: concurrent glasses-local processes", .ownThreads, .networkGuard)
struct ConcurrencyTests {
    static let id = "shared"
    static let files: [(String, Int)] = [("weights.bin", 512 << 10), ("extra/tokens.bin", 64 << 10)]

    @Test("N downloads of one model (kept N at a time) while another process deletes it in a loop, until every outcome was seen",
          arguments: [3, 8])
    func downloadsWhileDeleting(processes: Int) throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(Self.id, files: Self.files)
        let slow = try w.filesCatalog(Self.id, id: Self.id, slow: true)
        let fast = try w.filesCatalog(Self.id, id: Self.id)

        // `processes` slots, each restarted as soon as its process exits, while the test thread
        // runs `delete` in a loop. Not a time window: it goes on until each outcome happened
        // (an install, a download refused as busy, a delete that got in between), then drains;
        // the round cap only bounds a product that never produces one of them.
        var slots: [CLIProcess?] = Array(repeating: nil, count: processes)
        var downloads: [CLIResult] = []
        var deletes: [CLIResult] = []
        func seenEverything() -> Bool {
            downloads.count >= processes
                && downloads.contains { $0.status == 0 && $0.stdout.contains("installed in") }
                && downloads.contains { $0.status == 7 }
                && deletes.contains { $0.status == 0 && $0.stdout.contains("deleted,") }
        }
        let maxRounds = 2_000
        func reap() {
            for n in slots.indices {
                guard let p = slots[n], !p.isRunning else { continue }
                downloads.append(p.wait())
                slots[n] = nil
            }
        }
        func refill() throws {
            for n in slots.indices where slots[n] == nil && !seenEverything() && deletes.count < maxRounds {
                slots[n] = try w.start(["download", Self.id], catalog: slow)
            }
        }
        try refill()
        while slots.contains(where: { $0 != nil }) {
            deletes.append(try w.run(["delete", Self.id], catalog: fast))
            reap()
            try refill()
        }
        #expect(seenEverything(), "\(downloads.count) downloads and \(deletes.count) deletes without every outcome")

        #expect(downloads.count >= processes, "every slot ran at least one download")
        for r in downloads {
            #expect(r.status == 0 || r.status == 7, "a download exits 0 or 7 (busy), never anything else\n\(r)")
            if r.status == 7 {
                #expect(r.stderr.contains("another process"), "busy says why and what to do\n\(r)")
            }
            Check.expectNoSQLiteBusy(r)
        }
        for r in deletes {
            #expect(r.status == 0 || r.status == 7, "a delete exits 0 or 7 (busy), never anything else\n\(r)")
            Check.expectNoSQLiteBusy(r)
        }
        let installs = downloads.filter { $0.status == 0 && $0.stdout.contains("installed in") }
        let busy = downloads.filter { $0.status == 7 }
        let deleted = deletes.filter { $0.status == 0 && $0.stdout.contains("deleted,") }
        #expect(!installs.isEmpty, "at least one download installed the model (\(downloads.count) runs)")
        #expect(!busy.isEmpty, "downloads overlapped: some were refused as busy (\(downloads.count) runs)")
        #expect(!deleted.isEmpty, "the deleter got in between downloads (\(deletes.count) runs)")

        // The state is one of the two allowed, whichever came last.
        let installed = try w.expectAllOrNothing(Self.id, catalog: fast)
        if installed { w.expectInstalledMatchesMirror(Self.id, folder: Self.id) }
        // Every download ended installed or busy, every delete removed all: nothing half-done remains.
        #expect(w.leftovers.isEmpty, "no partial or staging data is left: \(w.leftovers)")
        try w.expectRecordsIntact(catalog: fast)

        // And it converges: one more download installs it, one more delete removes everything.
        let d = try w.run(["download", Self.id], catalog: fast)
        #expect(d.status == 0, "\(d)")
        w.expectInstalledMatchesMirror(Self.id, folder: Self.id)
        let del = try w.run(["delete", Self.id], catalog: fast)
        #expect(del.status == 0 && del.stdout.contains("deleted,"), "\(del)")
        #expect(try !w.isInstalled(Self.id, catalog: fast))
        #expect(!Disk.exists(w.installFolder(Self.id)) && w.leftovers.isEmpty, "\(w.leftovers)")
        try w.expectRecordsIntact(catalog: fast)
    }

    @Test("two different models downloading at once both install and verify")
    func twoModelsAtOnce() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("alpha", files: [("weights.bin", 768 << 10), ("config.json", 500)])
        try w.addModel("beta", files: [("weights.bin", 640 << 10), ("vocab.txt", 3000)])
        let catalog = try w.mergedCatalog([try w.filesCatalog("alpha", id: "alpha", slow: true),
                                           try w.filesCatalog("beta", id: "beta", slow: true)])
        let a = try w.start(["download", "alpha"], catalog: catalog)
        let b = try w.start(["download", "beta"], catalog: catalog)
        // Both transfers are under way at the same time.
        #expect(a.waitUntil(timeout: 30) { (Disk.fileSize(w.partialRoot + "/alpha/weights.bin") ?? 0) > 0 })
        #expect(b.waitUntil(timeout: 30) { (Disk.fileSize(w.partialRoot + "/beta/weights.bin") ?? 0) > 0 })
        #expect(a.isRunning || b.isRunning)
        let ra = a.wait(), rb = b.wait()
        #expect(ra.status == 0, "\(ra)")
        #expect(rb.status == 0, "\(rb)")
        Check.expectNoSQLiteBusy(ra)
        Check.expectNoSQLiteBusy(rb)
        for id in ["alpha", "beta"] {
            w.expectInstalledMatchesMirror(id, folder: id)
            #expect(try w.isInstalled(id, catalog: catalog))
        }
        let v = try w.run(["verify"], catalog: catalog)
        #expect(v.status == 0 && v.stdout.contains("alpha: ok") && v.stdout.contains("beta: ok"), "\(v)")
        try w.expectRecordsIntact(catalog: catalog)
    }
}
