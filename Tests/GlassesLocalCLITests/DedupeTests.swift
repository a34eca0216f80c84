import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// No byte fetched twice: a file whose SHA-256 an installed model holds is hard-linked, not
/// downloaded (counted on the server side, nginx's access log), and deleting either model
/// leaves the other verifying.
@Suite("Store: shared files are linked, not fetched again")
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

        var sa = stat(), sb = stat()
        #expect(lstat(w.installFolder("a") + "/tokenizer.json", &sa) == 0 && lstat(w.installFolder("b") + "/tok/tokenizer.json", &sb) == 0)
        #expect(sa.st_ino == sb.st_ino && sa.st_nlink == 2, "one inode, two names")

        let deleteA = try w.run(["delete", "a"], catalog: catalog)
        #expect(deleteA.status == 0, "\(deleteA)")
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
