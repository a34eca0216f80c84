import Foundation
import GlassesTestSupport
import Testing

/// A store that moves: restored from a backup elsewhere, or `mv`ed to a bigger disk. Install
/// records hold folders relative to the store, so the installed state moves with it; a
/// store written before that (absolute paths, schema 2) is upgraded by a migration.
@Suite("A store that can move", .ownThreads, .networkGuard)
struct StoreMoveTests {
    static let files = [("a.bin", 300 * 1024), ("sub/b.bin", 4096)]

    /// Installs `mv1`, optionally rewrites its record as schema 2 wrote it (an absolute
    /// folder), moves the store, and checks the model is still installed, verifies, and
    /// that a download fetches nothing.
    func install(thenMoveAs oldSchema: Bool) throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("mv", files: Self.files)
        let catalog = try w.filesCatalog("mv", id: "mv1")
        let first = try w.run(["download", "mv1"], catalog: catalog)
        try #require(first.status == 0, "\(first)")
        if oldSchema {
            let script = """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                db.execute("UPDATE installs SET path = ? WHERE model_id = 'mv1'", (sys.argv[2],))
                db.execute("ALTER TABLE installs DROP COLUMN source")   # added by migration 4
                db.execute("DROP TABLE switch_files")                   # added by migration 5
                db.execute("DROP TABLE switches")
                db.execute("PRAGMA user_version = 2")
                db.commit()
                """
            let r = try World.tool("/usr/bin/env", ["python3", "-c", script, w.store + "/records.sqlite3", w.store + "/mv1"])
            try #require(r.status == 0, "\(r)")
        }
        let moved = w.outer + "/moved/store"
        try FileManager.default.createDirectory(atPath: w.outer + "/moved", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: w.store, toPath: moved)
        w.store = moved
        w.nginx.clearLog()

        #expect(try w.isInstalled("mv1", catalog: catalog), "the moved store still has mv1 installed")
        let info = try w.run(["info", "mv1", "--json"], catalog: catalog)
        #expect((try info.jsonObject()["installPath"] as? String) == moved + "/mv1", "\(info)")
        let verify = try w.run(["verify", "mv1"], catalog: catalog)
        #expect(verify.status == 0, "\(verify)")
        let again = try w.run(["download", "mv1"], catalog: catalog)
        #expect(again.status == 0 && again.stdout.contains("already installed"), "\(again)")
        #expect(w.nginx.accessLog().isEmpty, "not a byte is fetched again: \(w.nginx.accessLog())")
        #expect(w.leftovers.isEmpty, "start-up repair found nothing to salvage: \(w.leftovers)")
        w.expectInstalledMatchesMirror("mv1", folder: "mv")
    }

    @Test("install, mv the store: list shows the model installed, verify passes, nothing is fetched again")
    func movedStore() throws {
        try install(thenMoveAs: false)
    }

    @Test("a store written with absolute paths (schema 2), then moved: the migration keeps it installed")
    func movedOldStore() throws {
        try install(thenMoveAs: true)
    }
}
