import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The voice bundle as it really is shaped (the 358 paths of kokoro-en-v0_19, `!` and all;
/// synthetic content, sizes scaled down), through both of its sources; fallback from the
/// archive to the files; and `kill -9` while the archive unpacks as it downloads.
@Suite("Archives that install while they download", .ownThreads, .networkGuard)
struct ArchiveStreamingTests {
    static let id = "kokoro-en-v0_19"

    /// The Kokoro-shaped tree (each file 1/`scale` of its real size, at least 1 byte) in
    /// `<root>/kokoro-src/kokoro-en-v0_19`, on the mirror per file under `kokoro/`, and as
    /// `archives/kokoro.tar.bz2`.
    static func kokoroShaped(_ w: World, scale: Int = 2000) throws -> (tree: String, files: [[String: Any]], archiveSize: Int64, sha: String) {
        let facts = PackageRoot.path() + "/Tests/LocalModelKitTests/Inputs/kokoro-en-v0_19.files.json"
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: facts))) as? [String: Any])
        let entries = try #require(doc["files"] as? [[String: Any]])
        #expect(entries.count == 358)
        let src = w.root + "/kokoro-src"
        let tree = src + "/" + id
        for entry in entries {
            let path = try #require(entry["path"] as? String)
            let size = max(1, (entry["size"] as? Int ?? 1) / scale)
            let full = tree + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Disk.randomBytes(size).write(to: URL(fileURLWithPath: full))
        }
        let copy = try World.tool("/bin/cp", ["-r", tree, w.nginx.mirror + "/kokoro"])
        try #require(copy.status == 0, "\(copy)")
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let archive = w.nginx.mirror + "/archives/kokoro.tar.bz2"
        let tar = try World.tool("/usr/bin/env", ["tar", "-cjf", archive, "-C", src, id])
        try #require(tar.status == 0, "\(tar)")
        return (tree, try w.fileEntries(of: tree), try #require(Disk.fileSize(archive)), try World.sha256sum(archive))
    }

    /// The voice catalog over the Kokoro-shaped mirror, with the archive at `archiveURL`.
    static func catalog(_ w: World, files: [[String: Any]], archiveURL: String, archiveSize: Int64, sha: String,
                        name: String) throws -> String {
        try w.voiceCatalog(id: id, displayName: "Kokoro English (11 voices)", files: files, archiveURL: archiveURL,
                           archiveSize: archiveSize, archiveSHA256: sha, filesBaseURL: w.nginx.baseURL("kokoro"), name: name)
    }

    @Test("the Kokoro-shaped bundle installs through the archive and through the files to byte-identical trees")
    func bothSources() throws {
        let w = try World(); defer { w.remove() }
        let k = try Self.kokoroShaped(w)
        let catalog = try Self.catalog(w, files: k.files, archiveURL: w.nginx.origin + "/archives/kokoro.tar.bz2",
                                       archiveSize: k.archiveSize, sha: k.sha, name: "kokoro")
        let folder = w.store + "/voices/" + Self.id
        for source in ["archive", "files"] {
            let r = try w.run(["voice", "download", "--source", source], catalog: catalog)
            #expect(r.status == 0, "\(source): \(r)")
            w.expectInstalledMatches(Self.id, source: k.tree, installFolder: folder)
            let verify = try w.run(["verify", Self.id], catalog: catalog)
            #expect(verify.status == 0, "\(verify)")
            #expect(w.leftovers.isEmpty, "the archive and the partial data are gone after the install: \(w.leftovers)")
            let del = try w.run(["voice", "delete"], catalog: catalog)
            #expect(del.status == 0, "\(del)")
        }
        let requests = w.nginx.accessLog()
        #expect(requests.filter { $0.path.hasSuffix(".tar.bz2") }.count == 1 && requests.count == 1 + 358,
                "one archive request, then 358 file requests: \(requests.count)")
    }

    @Test("an archive that answers 404, or whose bytes fail the catalog's SHA-256, falls back to the files; the event says why",
          arguments: ["404", "integrity"])
    func fallback(reason: String) throws {
        let w = try World(); defer { w.remove() }
        let k = try Self.kokoroShaped(w, scale: 8000)
        let url = w.nginx.origin + (reason == "404" ? "/archives/missing.tar.bz2" : "/archives/kokoro.tar.bz2")
        let sha = reason == "integrity" ? String(repeating: "ab", count: 32) : k.sha
        let catalog = try Self.catalog(w, files: k.files, archiveURL: url, archiveSize: k.archiveSize, sha: sha, name: "fallback")
        let r = try w.run(["voice", "download", "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let events = r.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let fallback = try #require(events.first { $0["event"] as? String == "fallback" }, "\(r.stdout.prefix(2000))")
        let why = fallback["reason"] as? String ?? ""
        #expect(reason == "404" ? why.contains("HTTP 404") : why.contains("failed verification"), "\(why)")
        #expect(fallback["failedSource"] as? String == url)
        w.expectInstalledMatches(Self.id, source: k.tree, installFolder: w.store + "/voices/" + Self.id)
        let status = try w.run(["voice", "status", "--json"], catalog: catalog)
        #expect((try status.jsonObject()["source"] as? String)?.hasPrefix("files ") == true, "installed from the files: \(status)")
        #expect(!Disk.exists(w.partialRoot + "/\(Self.id)@archive"), "the refused archive's bytes are not kept: \(w.leftovers)")
    }

    @Test("kill -9 while the archive unpacks as it downloads, with at least 2 MiB kept; the resume fetches only the rest, at most 1 MiB twice (counted by nginx)")
    func killNineDuringStreamingUnpack() throws {
        let w = try World(slowRate: 512 << 10); defer { w.remove() }
        let k = try Self.kokoroShaped(w, scale: 100)   // ~3.7 MB of files, an archive of about that
        let slow = try Self.catalog(w, files: k.files, archiveURL: w.nginx.origin + "/slow/archives/kokoro.tar.bz2",
                                    archiveSize: k.archiveSize, sha: k.sha, name: "slow")
        let fast = try Self.catalog(w, files: k.files, archiveURL: w.nginx.origin + "/archives/kokoro.tar.bz2",
                                    archiveSize: k.archiveSize, sha: k.sha, name: "fast")
        // Kept must be more than the 1 MiB a resume may fetch again, or a refetch from zero
        // would pass for a resume.
        let keepAtLeast: Int64 = 2 << 20
        let allowance: Int64 = 1 << 20
        try #require(k.archiveSize > keepAtLeast + allowance, "the archive (\(k.archiveSize) bytes) is big enough to kill mid-way")
        let p = try w.start(["voice", "download", "--source", "archive"], catalog: slow)
        let archive = w.partialRoot + "/\(Self.id)@archive"
        let staging = w.stagingRoot + "/" + Self.id
        // Unpacking while downloading: files are in staging before the archive is complete;
        // killed once that much of the archive is on disk.
        let reached = p.waitUntil(timeout: 60) {
            (Disk.fileSize(archive) ?? 0) >= keepAtLeast && Disk.regularFiles(under: staging).count >= 20
        }
        #expect(p.killNine(), "died by SIGKILL")
        let kept = Disk.fileSize(archive) ?? 0   // what the next run finds
        try #require(reached, "the download never had \(keepAtLeast) bytes of the archive and 20 files unpacked: \(kept) of \(k.archiveSize), \(w.leftovers.count) entries")
        try #require(kept >= keepAtLeast && kept < k.archiveSize,
                     "killed while the archive was still arriving, with \(kept) of \(k.archiveSize) bytes kept")

        w.nginx.clearLog()
        let again = try w.run(["voice", "download", "--source", "archive"], catalog: fast)
        #expect(again.status == 0, "\(again)")
        // The resume's requests only: nginx logs the killed run's request when it notices the
        // connection closed, which under load can be after clearLog (a /slow/ line).
        let requests = w.nginx.accessLog().filter { $0.path.hasSuffix(".tar.bz2") && !$0.path.hasPrefix("/slow/") }
        let sent = requests.reduce(Int64(0)) { $0 + $1.bytesSent }
        let missing = k.archiveSize - kept
        // Every missing byte came, and of the kept ones at most 1 MiB came again: the kept
        // bytes were not fetched a second time.
        #expect(sent >= missing, "the resume fetched \(sent) bytes, fewer than the \(missing) missing: \(requests)")
        #expect(sent - missing <= allowance,
                "the resume fetched \(sent) bytes for the \(missing) still missing: \(sent - missing) of the \(kept) kept came twice\n\(again)")
        #expect(requests.first.map { $0.status == 206 && ($0.rangeStart ?? 0) >= kept - allowance } == true,
                "the resume asked for a range starting near byte \(kept): \(requests)")
        w.expectInstalledMatches(Self.id, source: k.tree, installFolder: w.store + "/voices/" + Self.id)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
        let verify = try w.run(["verify", Self.id], catalog: fast)
        #expect(verify.status == 0, "\(verify)")
    }

    @Test("a many-block archive killed while it unpacks, then changed on the server: the resume restarts from zero under the unpacker, the finished file is unpacked again, byte-identical")
    func restartUnderTheUnpacker() throws {
        let w = try World(slowRate: 1 << 20); defer { w.remove() }
        // 1/40 of the real sizes: about 9 MB of archive, a dozen bzip2 blocks, decoded in parallel.
        let k = try Self.kokoroShaped(w, scale: 40)
        try #require(k.archiveSize > 8 << 20, "\(k.archiveSize) bytes")
        let slow = try Self.catalog(w, files: k.files, archiveURL: w.nginx.origin + "/slow/archives/kokoro.tar.bz2",
                                    archiveSize: k.archiveSize, sha: k.sha, name: "slow")
        let fast = try Self.catalog(w, files: k.files, archiveURL: w.nginx.origin + "/archives/kokoro.tar.bz2",
                                    archiveSize: k.archiveSize, sha: k.sha, name: "fast")
        let p = try w.start(["voice", "download", "--source", "archive"], catalog: slow)
        let archive = w.partialRoot + "/\(Self.id)@archive"
        let staging = w.stagingRoot + "/" + Self.id
        let reached = p.waitUntil(timeout: 60) {
            (Disk.fileSize(archive) ?? 0) >= 2 << 20 && Disk.regularFiles(under: staging).count >= 5
        }
        #expect(p.killNine(), "died by SIGKILL")
        try #require(reached, "2 MiB of the archive and 5 files unpacked before the kill: \(Disk.fileSize(archive) ?? 0)")
        // Same bytes, new date: nginx's ETag and Last-Modified change, so If-Range fails and
        // the answer is the whole archive (200): the kept bytes the unpacker began with are
        // no longer the download's.
        let touch = try World.tool("/usr/bin/env", ["touch", "-d", "2030-01-01 00:00:00", w.nginx.mirror + "/archives/kokoro.tar.bz2"])
        try #require(touch.status == 0, "\(touch)")

        w.nginx.clearLog()
        let again = try w.run(["voice", "download", "--source", "archive", "--json"], catalog: fast)
        #expect(again.status == 0, "\(again)")
        #expect(again.stdoutLines.contains { $0.contains(#""event":"restart""#) || $0.contains(#""event": "restart""#) },
                "the transfer started over: \(again.stdout.prefix(3000))")
        let requests = w.nginx.accessLog().filter { $0.path.hasSuffix(".tar.bz2") && !$0.path.hasPrefix("/slow/") }
        #expect(requests.contains { $0.status == 200 }, "the whole archive was sent again: \(requests)")
        w.expectInstalledMatches(Self.id, source: k.tree, installFolder: w.store + "/voices/" + Self.id)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
        let verify = try w.run(["verify", Self.id], catalog: fast)
        #expect(verify.status == 0, "\(verify)")
    }
}
