import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A file `import` finds but another user owns is copied, never hard-linked: a link shares
/// the bytes, and that user could rewrite them under the installed model.
@Suite("import: another user's files are copied", .ownThreads, .networkGuard)
struct ImportOwnershipTests {
    func status(_ path: String) -> stat? {
        var st = stat()
        return stat(path, &st) == 0 ? st : nil
    }

    @Test("import ID DIR: the file this user owns is linked, the one another user owns is copied (its own inode, one name)",
          .enabled(if: geteuid() == 0, "chown to another user needs root"))
    func anotherUsersFileIsCopied() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("own", files: [("mine.bin", 64 * 1024), ("theirs.bin", 48 * 1024)])
        let catalog = try w.filesCatalog("own", id: "own")
        let place = w.root + "/usb"
        try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
        for name in ["mine.bin", "theirs.bin"] {
            try FileManager.default.copyItem(atPath: w.nginx.mirror + "/own/" + name, toPath: place + "/" + name)
        }
        // nobody:nogroup
        #expect(chown(place + "/theirs.bin", 65534, 65534) == 0)

        let r = try w.run(["import", "own", place, "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let mine = try #require(status(place + "/mine.bin")), theirs = try #require(status(place + "/theirs.bin"))
        let installedMine = try #require(status(w.installFolder("own") + "/mine.bin"))
        let installedTheirs = try #require(status(w.installFolder("own") + "/theirs.bin"))
        #expect(installedMine.st_ino == mine.st_ino, "this user's file is hard-linked (no second copy of its bytes)")
        #expect(installedTheirs.st_ino != theirs.st_ino && installedTheirs.st_nlink == 1 && theirs.st_nlink == 1,
                "another user's file is copied: it can never rewrite the installed bytes")
        #expect(installedTheirs.st_uid == geteuid(), "the copy belongs to this user")
        let outcomes = try #require((try r.jsonObject()["files"] as? [[String: Any]]), "\(r)")
        #expect(outcomes.first { $0["path"] as? String == "theirs.bin" }?["outcome"] as? String == "copied", "\(outcomes)")
        #expect(outcomes.first { $0["path"] as? String == "mine.bin" }?["outcome"] as? String == "linked", "\(outcomes)")
    }
}
