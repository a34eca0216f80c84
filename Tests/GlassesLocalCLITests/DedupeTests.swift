import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// No byte fetched twice: a file whose SHA-256 an installed model holds is hard-linked, not
/// downloaded (counted on the server side, nginx's access log), and deleting either model
/// leaves the other verifying.
@Suite("Store: shared files are linked, not fetched again", .ownThreads, .networkGuard)
struct DedupeTests {
    /// One catalog with models `a` and `b` that share one file (at different paths).
    static func setUp(_ w: World) throws -> String {
        let shared = try w.addModel("a", files: [("tokenizer.json", 300 * 1024), ("a.bin", 200 * 1024)])["tokenizer.json"]
        try w.addModel("b", files: [("b.bin", 100 * 1024)])
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/b/tok", withIntermediateDirectories: true)
        try #require(shared).write(to: URL(fileURLWithPath: w.nginx.mirror + "/b/tok/tokenizer.json"))
        var models: [Any] = []
        var top: [String: Any] = [:]
        for id in ["a", "b"] {
            let path = try w.filesCatalog(id, id: id)
            top = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            models += try #require(top["models"] as? [Any])
        }
        top["models"] = models
        let path = w.root + "/catalogs/ab.json"
        try JSONSerialization.data(withJSONObject: top).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a second model sharing a file does not fetch it (fit counts it present); the file is one inode; deleting either model leaves the other verifying")
    func sharedFileIsLinked() throws {
        let w = try World(); defer { w.remove() }
        let catalog = try Self.setUp(w)
        let a = try w.run(["download", "a"], catalog: catalog)
        try #require(a.status == 0, "\(a)")

        // fit counts the shared file as present before anything is fetched.
        let fit = try w.run(["fit", "b", "--json"], catalog: catalog)
        #expect(fit.status == 0, "\(fit)")
        #expect(try fit.jsonObject()["presentBytes"] as? Int == 300 * 1024, "\(fit)")

        w.nginx.clearLog()
        let b = try w.run(["download", "b", "--json"], catalog: catalog)
        #expect(b.status == 0, "\(b)")
        let fetched = w.nginx.accessLog().map(\.path)
        #expect(fetched == ["/b/b.bin"], "only the file the store did not hold was fetched: \(fetched)")
        #expect(b.stdout.contains("\"event\":\"already-in-store\"") && b.stdout.contains("tok/tokenizer.json"), "\(b)")
        // The progress fraction counts the linked file as present from the first event.
        let firstProgress = try #require(b.stdout.split(separator: "\n").first { $0.contains("\"event\":\"progress\"") }, "\(b)")
        let progress = try #require(try JSONSerialization.jsonObject(with: Data(firstProgress.utf8)) as? [String: Any])
        #expect((progress["bytes"] as? Int ?? 0) >= 300 * 1024, "first progress: \(firstProgress)")

        var sa = stat(), sb = stat()
        #expect(lstat(w.installFolder("a") + "/tokenizer.json", &sa) == 0 && lstat(w.installFolder("b") + "/tok/tokenizer.json", &sb) == 0)
        #expect(sa.st_ino == sb.st_ino && sa.st_nlink == 2, "one inode, two names")

        let deleteA = try w.run(["delete", "a", "--json"], catalog: catalog)
        #expect(deleteA.status == 0, "\(deleteA)")
        let freed = try #require(try deleteA.jsonObject()["freedBytes"] as? Int, "\(deleteA)")
        #expect(freed >= 200 * 1024 && freed < 300 * 1024, "only a.bin's blocks are freed; the shared file stays with b: \(freed)")
        let verifyB = try w.run(["verify", "b"], catalog: catalog)
        #expect(verifyB.status == 0, "b still verifies after a is deleted\n\(verifyB)")

        // And the reverse: a comes back from b's copy, then b goes and a stays whole.
        w.nginx.clearLog()
        let again = try w.run(["download", "a"], catalog: catalog)
        #expect(again.status == 0 && w.nginx.accessLog().map(\.path) == ["/a/a.bin"], "\(again) \(w.nginx.accessLog())")
        #expect(try w.run(["delete", "b"], catalog: catalog).status == 0)
        #expect(try w.run(["verify", "a"], catalog: catalog).status == 0)
    }

    @Test("an installed copy that no longer matches its hash is never adopted into a new install, and is not written through")
    func corruptCopyIsNotSpread() throws {
        let w = try World(); defer { w.remove() }
        let catalog = try Self.setUp(w)
        try #require(try w.run(["download", "a"], catalog: catalog).status == 0)
        // Same size, other bytes (bit rot, or a tampered file).
        let path = w.installFolder("a") + "/tokenizer.json"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        bytes[10] ^= 0xFF
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.write(contentsOf: bytes)
        try handle.close()
        let damaged = bytes

        w.nginx.clearLog()
        let b = try w.run(["download", "b"], catalog: catalog)
        #expect(b.status == 0, "\(b)")
        #expect(Set(w.nginx.accessLog().map(\.path)) == ["/b/b.bin", "/b/tok/tokenizer.json"], "the bad copy was fetched fresh: \(w.nginx.accessLog())")
        #expect(try w.run(["verify", "b"], catalog: catalog).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == damaged, "a's file was not truncated or overwritten through the link")
        var sa = stat(), sb = stat()
        #expect(lstat(path, &sa) == 0 && lstat(w.installFolder("b") + "/tok/tokenizer.json", &sb) == 0 && sa.st_ino != sb.st_ino)
        #expect(try w.run(["verify", "a"], catalog: catalog).status != 0, "a's damage is still reported by verify")
    }
}

/// A catalog update that changes an installed model's files never breaks it: it keeps
/// working (and verifying, against its recorded hashes) without any network until
/// `download` installs the new version beside it, fetching only the changed file.
@Suite("Store: updating an installed model", .ownThreads, .networkGuard)
struct ModelUpdateTests {
    @Test("list and info say 'update available'; verify passes offline; download fetches only the changed file, switches, and the old tree is gone")
    func updateChangesOneFileOfThree() throws {
        let w = try World(); defer { w.remove() }
        let old = try w.addModel("u", files: [("a.bin", 120 * 1024), ("b.bin", 90 * 1024), ("c.bin", 60 * 1024)])
        let v1 = try w.filesCatalog("u", id: "u")
        try #require(try w.run(["download", "u"], catalog: v1).status == 0)
        // Version 2 of the model: a and b unchanged, c new, under another URL.
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/u2", withIntermediateDirectories: true)
        for name in ["a.bin", "b.bin"] {
            try #require(old[name]).write(to: URL(fileURLWithPath: w.nginx.mirror + "/u2/" + name))
        }
        _ = try w.nginx.addRandomFile("u2/c.bin", size: 61 * 1024)
        let hashed = try String(contentsOfFile: try w.filesCatalog("u2", id: "u"), encoding: .utf8)
        let v2 = w.root + "/catalogs/u-v2.json"
        try hashed.replacingOccurrences(of: "\"catalogVersion\": 1,", with: "\"catalogVersion\": 2,").write(toFile: v2, atomically: true, encoding: .utf8)

        w.nginx.clearLog()
        let list = try w.run(["list", "--json"], catalog: v2)
        let u = try #require((try list.jsonObject()["models"] as? [[String: Any]])?.first { $0["id"] as? String == "u" }, "\(list)")
        #expect(u["isInstalled"] as? Bool == true && u["updateAvailable"] as? Bool == true, "\(list)")
        let human = try w.run(["list"], catalog: v2)
        #expect(human.stdout.contains("installed, update available"), "\(human)")
        let info = try w.run(["info", "u"], catalog: v2)
        #expect(info.stdout.contains("update:         available"), "\(info)")
        // autoChoice keeps answering from what is installed (an auto-eligible copy of v2).
        let eligible = w.root + "/catalogs/u-v2-auto.json"
        try String(contentsOfFile: v2, encoding: .utf8).replacingOccurrences(of: "\"autoEligible\": false", with: "\"autoEligible\": true")
            .write(toFile: eligible, atomically: true, encoding: .utf8)
        let auto = try w.run(["auto", "--json"], catalog: eligible, env: ["EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"])
        #expect(auto.status == 0, "\(auto)")
        #expect(try auto.jsonObject()["modelId"] as? String == "u", "\(auto)")
        let verify = try w.run(["verify", "u"], catalog: v2)
        #expect(verify.status == 0, "the installed version verifies against its recorded hashes\n\(verify)")
        #expect(w.nginx.accessLog().isEmpty, "nothing above used the network: \(w.nginx.accessLog())")

        let d = try w.run(["download", "u"], catalog: v2)
        #expect(d.status == 0, "\(d)")
        #expect(w.nginx.accessLog().map(\.path) == ["/u2/c.bin"], "only the changed file was fetched: \(w.nginx.accessLog())")
        #expect(!FileManager.default.fileExists(atPath: w.store + "/.staging/u.replaced"), "the old tree is gone")
        #expect(try Data(contentsOf: URL(fileURLWithPath: w.installFolder("u") + "/c.bin")).count == 61 * 1024)
        let after = try w.run(["verify", "u", "--json"], catalog: v2)
        #expect(after.status == 0, "\(after)")
        let listed = try w.run(["list"], catalog: v2)
        #expect(listed.stdout.contains("installed") && !listed.stdout.contains("update available"), "\(listed)")
    }

    /// A user's model (user-catalog.json, what `add` writes) changes without any catalog
    /// version (`add --force`), so start-up compares the files of every installed user model
    /// with the records: the one whose files changed says so, the others do not.
    @Test("user-catalog.json: of three installed user models, list says 'update available' for the one whose file changed, whatever the version")
    func userModelChangedInPlace() throws {
        let w = try World(); defer { w.remove() }
        var catalogs: [String] = []
        for id in ["ua", "ub", "uc"] {
            try w.addModel(id, files: [("weights.bin", 70 * 1024), ("config.json", 2 * 1024)])
            catalogs.append(try w.filesCatalog(id, id: id))
        }
        let userCatalog = w.store + "/user-catalog.json"
        try FileManager.default.createDirectory(atPath: w.store, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try w.mergedCatalog(catalogs), toPath: userCatalog)
        for id in ["ua", "ub", "uc"] {
            let d = try w.run(["download", id], catalog: nil)
            try #require(d.status == 0, "\(d)")
        }
        func updates() throws -> [String: Bool] {
            let list = try w.run(["list", "--json"], catalog: nil)
            try #require(list.status == 0, "\(list)")
            let models = try #require(try list.jsonObject()["models"] as? [[String: Any]], "\(list)")
            return Dictionary(uniqueKeysWithValues: models.compactMap { m in
                (m["id"] as? String).flatMap { ["ua", "ub", "uc"].contains($0) ? ($0, m["updateAvailable"] as? Bool ?? false) : nil }
            })
        }
        #expect(try updates() == ["ua": false, "ub": false, "uc": false])

        // ub's weights change on the server and in the user catalog; its version stays.
        _ = try w.nginx.addRandomFile("ub/weights.bin", size: 71 * 1024)
        let changed = try w.mergedCatalog([catalogs[0], try w.filesCatalog("ub", id: "ub"), catalogs[2]])
        try FileManager.default.removeItem(atPath: userCatalog)
        try FileManager.default.copyItem(atPath: changed, toPath: userCatalog)
        #expect(try updates() == ["ua": false, "ub": true, "uc": false])
        let info = try w.run(["info", "ub"], catalog: nil)
        #expect(info.stdout.contains("update:         available"), "\(info)")

        let d = try w.run(["download", "ub"], catalog: nil)
        #expect(d.status == 0, "\(d)")
        #expect(try updates() == ["ua": false, "ub": false, "uc": false])
    }
}
