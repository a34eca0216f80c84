import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A stored catalog that no longer matches what was accepted (one flipped byte, a removed
/// file) never wedges the store: it is set aside, doctor names it, what is installed keeps
/// working on the built-in catalog, nothing is downloaded by a catalog the store has moved
/// past, and `catalog update` from a genuine catalog restores normal operation. The floor
/// (the highest version seen) lives in the records: no file in `.catalog/` lowers it.
@Suite("Signed catalogs: a damaged stored catalog", .ownThreads, .networkGuard)
struct CatalogTamperTests {
    /// Catalog version `version` with one downloadable model under a built-in id (so the
    /// built-in catalog, standing in, still lists it), published and signed.
    static func publishDownloadable(_ p: CatalogUpdateTests.Publisher, version: Int, id: String) throws -> String {
        try p.w.addModel("tq", files: [("weights.bin", 64 * 1024), ("config.json", 300)])
        let made = try p.w.filesCatalog("tq", id: id)
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: made))) as? [String: Any])
        doc["catalogVersion"] = version
        let text = String(decoding: try JSONSerialization.data(withJSONObject: doc, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self)
        return try p.publish("cat/catalog.json", text)
    }

    /// Flips one byte of a model's display name: still valid JSON, no longer what was signed.
    static func flipByte(_ path: String) throws {
        var bytes = try #require(FileManager.default.contents(atPath: path))
        let needle = Data("\"displayName\"".utf8)
        let at = try #require(bytes.range(of: needle)).upperBound + 3
        bytes[at] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: path))
    }

    @Test("one flipped byte: set aside and named by doctor; list, info, verify, auto and delete keep working; downloads wait; catalog update (same version, then newer) restores it")
    func flippedByteIsSetAsideAndRecovered() throws {
        let p = try CatalogUpdateTests.Publisher(); defer { p.w.remove() }
        let id = "local-qwen3-0.6b"
        let url = try Self.publishDownloadable(p, version: 31, id: id)
        let accepted = try p.update(url)
        try #require(accepted.status == 0, "\(accepted)")
        let installed = try p.w.run(["download", id], catalog: nil, env: p.env)
        try #require(installed.status == 0, "\(installed)")

        let stored = p.w.store + "/.catalog/31.json"
        try Self.flipByte(stored)
        let tampered = try #require(FileManager.default.contents(atPath: stored))

        // Reading installed state keeps working, on the built-in catalog, and says why.
        let list = try p.w.run(["list", "--json"], catalog: nil, env: p.env)
        #expect(list.status == 0, "a flipped byte must not wedge the store\n\(list)")
        #expect(list.stderr.contains("catalog version 31") && list.stderr.contains("stands in"), "\(list)")
        let models = (try? list.jsonObject()["models"] as? [[String: Any]]) ?? []
        #expect(models.first { $0["id"] as? String == id }?["isInstalled"] as? Bool == true, "still installed: \(list)")

        // The tampered file is set aside, kept byte for byte, and never read again.
        #expect(!FileManager.default.fileExists(atPath: stored), "the damaged file is no longer where catalogs are read")
        let aside = (try? FileManager.default.contentsOfDirectory(atPath: p.w.store + "/.catalog/damaged")) ?? []
        let asideCatalog = try #require(aside.first { !$0.hasSuffix(".sig") && $0.hasPrefix("31.json") }, "\(aside)")
        #expect(FileManager.default.contents(atPath: p.w.store + "/.catalog/damaged/" + asideCatalog) == tampered)
        #expect(aside.contains(asideCatalog + ".sig"), "its signature goes with it: \(aside)")
        #expect(try p.history().contains("set aside"), "the history says so")

        // doctor names the file and the way out.
        let doctor = try p.w.run(["doctor", "--json"], catalog: nil, env: p.env)
        #expect(doctor.status == 1, "\(doctor)")
        let doc = try doctor.jsonObject()
        let storeCatalog = doc["storeCatalog"] as? [String: Any]
        #expect(storeCatalog?["missingVersion"] as? Int == 31, "\(doctor)")
        #expect((storeCatalog?["setAside"] as? [String])?.contains { $0.hasSuffix("/damaged/" + asideCatalog) } == true, "\(doctor)")
        let human = try p.w.run(["doctor"], catalog: nil, env: p.env)
        #expect(human.stdout.contains(asideCatalog) && human.stdout.contains("catalog update"), "\(human)")

        for args in [["info", id], ["verify", id], ["auto", "--explain"]] {
            let r = try p.w.run(args, catalog: nil, env: p.env)
            #expect(r.status == 0, "\(args) reads installed state: \(r)")
        }
        // Nothing is fetched by a catalog the store has moved past.
        p.w.nginx.clearLog()
        let refetch = try p.w.run(["verify", id, "--repair", "--json"], catalog: nil, env: p.env)
        #expect(refetch.status == 6 && refetch.stdout.contains("\"catalogUnavailable\""), "\(refetch)")
        let download = try p.w.run(["download", "kokoro-en-v0_19", "--json"], catalog: nil, env: p.env)
        #expect(download.status == 6 && download.stdout.contains("\"catalogUnavailable\""), "\(download)")
        #expect(p.w.nginx.accessLog().isEmpty, "no request was made: \(p.w.nginx.accessLog())")

        // The genuine catalog of the same version restores it.
        let restore = try p.update(url)
        #expect(restore.status == 0, "\(restore)")
        let after = try p.w.run(["list"], catalog: nil, env: p.env)
        #expect(after.status == 0 && after.stdout.contains("Catalog version 31") && !after.stderr.contains("stands in"), "\(after)")
        #expect(try p.w.run(["doctor"], catalog: nil, env: p.env).status == 0)

        // Damaged again, a newer catalog restores it too.
        try Self.flipByte(stored)
        #expect(try p.w.run(["list"], catalog: nil, env: p.env).stderr.contains("stands in"))
        let newer = try p.update(try Self.publishDownloadable(p, version: 36, id: id))
        #expect(newer.status == 0 && newer.stdout.contains("catalog version 36 accepted"), "\(newer)")
        let final = try p.w.run(["verify", id], catalog: nil, env: p.env)
        #expect(final.status == 0 && !final.stderr.contains("stands in"), "\(final)")

        // delete works while the built-in catalog stands in.
        try FileManager.default.removeItem(atPath: p.w.store + "/.catalog/36.json")
        let delete = try p.w.run(["delete", id], catalog: nil, env: p.env)
        #expect(delete.status == 0 && delete.stdout.contains("deleted"), "\(delete)")
    }

    @Test("while the built-in catalog stands in, a model installed from the damaged catalog that the built-in one does not list stays listed, verifies and deletes; a built-in id is not offered the older built-in entry as an update")
    func installedModelsOutliveTheirCatalog() throws {
        let p = try CatalogUpdateTests.Publisher(); defer { p.w.remove() }
        let builtIn = "local-qwen3-0.6b"
        try p.w.addModel("corp", files: [("weights.bin", 48 * 1024)])
        try p.w.addModel("tq", files: [("weights.bin", 64 * 1024), ("config.json", 300)])
        let merged = try p.w.mergedCatalog([try p.w.filesCatalog("corp", id: "corp-model"), try p.w.filesCatalog("tq", id: builtIn)])
        var doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: merged))) as? [String: Any])
        doc["catalogVersion"] = 31
        let url = try p.publish("cat/catalog.json", String(decoding: try JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys]), as: UTF8.self))
        try #require(try p.update(url).status == 0)
        for id in ["corp-model", builtIn] {
            let r = try p.w.run(["download", id], catalog: nil, env: p.env)
            try #require(r.status == 0, "\(r)")
        }
        try Self.flipByte(p.w.store + "/.catalog/31.json")

        let list = try p.w.run(["list", "--json"], catalog: nil, env: p.env)
        #expect(list.status == 0 && list.stderr.contains("stands in"), "\(list)")
        let models = (try? list.jsonObject()["models"] as? [[String: Any]]) ?? []
        let corp = models.first { $0["id"] as? String == "corp-model" }
        #expect(corp?["isInstalled"] as? Bool == true, "a model only the damaged catalog had is still installed: \(list)")
        let qwen = models.first { $0["id"] as? String == builtIn }
        #expect(qwen?["isInstalled"] as? Bool == true && qwen?["updateAvailable"] as? Bool == false,
                "the older built-in entry is not an update of what version 31 installed: \(String(describing: qwen))")
        for args in [["verify", "corp-model"], ["info", "corp-model"]] {
            let r = try p.w.run(args, catalog: nil, env: p.env)
            #expect(r.status == 0, "\(args): installed models keep working (P14)\n\(r)")
        }
        let delete = try p.w.run(["delete", "corp-model"], catalog: nil, env: p.env)
        #expect(delete.status == 0 && !Disk.exists(p.w.installFolder("corp-model")), "\(delete)")
        let after = try p.w.run(["list", "--json"], catalog: nil, env: p.env)
        let left = (try? after.jsonObject()["models"] as? [[String: Any]]) ?? []
        #expect(!left.contains { $0["id"] as? String == "corp-model" }, "once deleted it is gone from the list: \(after)")
    }

    @Test("the floor is the highest version seen: removing .catalog does not lower it, a lower catalog is still a rollback")
    func floorSurvivesRemovingTheFolder() throws {
        let p = try CatalogUpdateTests.Publisher(); defer { p.w.remove() }
        let v31 = try p.publish("cat/catalog.json", CatalogUpdateTests.catalog(version: 31, id: "v31-model"))
        try #require(try p.update(v31).status == 0)
        try FileManager.default.removeItem(atPath: p.w.store + "/.catalog")

        let list = try p.list()
        #expect(list.status == 0 && list.stderr.contains("stands in"), "\(list)")
        let older = try p.publish("old/catalog.json", CatalogUpdateTests.catalog(version: 20, id: "v20-model"))
        let refused = try p.update(older, json: true)
        #expect(refused.status == 6, "\(refused)")
        #expect(try refused.jsonObject()["error"].flatMap { ($0 as? [String: Any])?["code"] as? String } == "catalogRollback", "\(refused)")
        #expect(try p.update(v31).status == 0, "the genuine catalog restores it")
        #expect(try p.list().stdout.contains("v31-model"))
    }

    @Test("the same bytes signed by a key this process does not trust are left in place, not set aside, and used again once the key is trusted")
    func untrustedHereIsNotDamage() throws {
        let p = try CatalogUpdateTests.Publisher(); defer { p.w.remove() }
        let url = try p.publish("cat/catalog.json", CatalogUpdateTests.catalog(version: 12, id: "v2-model"))
        try #require(try p.update(url).status == 0)
        let without = try p.w.run(["list"], catalog: nil)
        #expect(without.status == 0 && without.stderr.contains("stands in") && !without.stdout.contains("v2-model"), "\(without)")
        #expect(FileManager.default.fileExists(atPath: p.w.store + "/.catalog/12.json"), "not set aside")
        let doctor = try p.w.run(["doctor"], catalog: nil)
        #expect(doctor.status == 1 && doctor.stdout.contains("does not trust"), "\(doctor)")
        let with = try p.list()
        #expect(with.status == 0 && with.stdout.contains("v2-model") && !with.stderr.contains("stands in"), "\(with)")
    }
}
