import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Models from where users already have them: `import ID [DIR]` and the Hugging Face cache,
/// built as the Hub client builds it (blobs named by hash, snapshot links, `refs/main`).
/// Nothing is fetched for a file found and verified; the place is never changed.
@Suite("Models from copies already on the machine", .ownThreads, .networkGuard)
struct ImportTests {
    static let commit = "0123456789abcdef0123456789abcdef01234567"
    static let files: [(String, Int)] = [("model.safetensors", 400 * 1024), ("config.json", 900), ("tokenizer/vocab.txt", 5000)]

    /// The model on nginx under `/org/repo/resolve/<commit>/` (a Hub-shaped URL path), its
    /// catalog, and the same files in the sandbox's Hugging Face cache
    /// (`$HOME/.cache/huggingface/hub`). `revision` is what the catalog's URL names
    /// (`main` resolves through `refs/main`).
    static func hubWorld(_ w: World, revision: String = commit) throws -> (catalog: String, hub: String, contents: [String: Data]) {
        let folder = "org/repo/resolve/\(revision)"
        let contents = try w.addModel(folder, files: files)
        let catalog = try w.filesCatalog(folder, id: "hubm", baseURL: w.nginx.baseURL(folder))
        let hub = w.root + "/home/.cache/huggingface/hub"
        let repo = hub + "/models--org--repo"
        for (path, data) in contents {
            let sha = try World.sha256sum(w.nginx.mirror + "/" + folder + "/" + path)
            let blob = repo + "/blobs/" + sha
            try FileManager.default.createDirectory(atPath: repo + "/blobs", withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: blob))
            let link = repo + "/snapshots/" + commit + "/" + path
            try FileManager.default.createDirectory(atPath: (link as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let depth = path.split(separator: "/").count - 1
            let target = String(repeating: "../", count: depth + 2) + "blobs/" + sha
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        }
        try FileManager.default.createDirectory(atPath: repo + "/refs", withIntermediateDirectories: true)
        try commit.write(toFile: repo + "/refs/main", atomically: true, encoding: .utf8)
        return (catalog, hub, contents)
    }

    /// Every entry under `root` with what it is: a link's target, a file's SHA-256, its mode
    /// and inode count left out (linking adds a name to a blob, which is the point).
    static func snapshotOf(_ root: String) throws -> [String] {
        try Disk.tree(root).map { line in
            let path = Disk.path(ofTreeLine: line)
            let full = root + "/" + path
            if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: full) { return "\(path) -> \(target)" }
            if Disk.isDirectory(full) { return "\(path)/" }
            return "\(path) \(try World.sha256sum(full))"
        }
    }

    func inode(_ path: String) -> UInt64? {
        var st = stat()
        return stat(path, &st) == 0 ? UInt64(st.st_ino) : nil
    }

    @Test("import ID takes the model from the Hugging Face cache: installed, hard-linked to the blobs, not one request; the cache is byte-identical after")
    func importFromTheCache() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, contents) = try Self.hubWorld(w)
        let before = try Self.snapshotOf(hub)
        w.nginx.clearLog()
        let r = try w.run(["import", "hubm", "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["installed"] as? Bool == true)
        let outcomes = (doc["files"] as? [[String: Any]] ?? []).map { ($0["path"] as? String ?? "", $0["outcome"] as? String ?? "") }
        #expect(Set(outcomes.map(\.0)) == Set(Self.files.map(\.0)) && outcomes.allSatisfy { $0.1 == "linked" }, "\(outcomes)")
        #expect(w.nginx.accessLog().isEmpty, "import used the network: \(w.nginx.accessLog())")
        for (path, data) in contents {
            let installed = w.installFolder("hubm") + "/" + path
            #expect(FileManager.default.contents(atPath: installed) == data, "\(path): the installed bytes")
            #expect(inode(installed) != nil && inode(installed) == inode(hub + "/models--org--repo/snapshots/\(Self.commit)/\(path)"),
                    "\(path): a hard link to the cache's blob, not a copy")
        }
        #expect(try Self.snapshotOf(hub) == before, "the cache is unchanged")
        let verify = try w.run(["verify", "hubm"], catalog: catalog)
        #expect(verify.status == 0, "\(verify)")
        let history = try w.run(["history", "hubm"], catalog: catalog)
        #expect(history.stdout.contains("import from \(hub)/models--org--repo/snapshots/\(Self.commit)"), "the history names where it came from: \(history.stdout)")
    }

    @Test("a damaged blob: import refuses that file (exit 1, listed), keeps the others; download then fetches only it; the cache is unchanged")
    func damagedBlobIsRefusedThenFetched() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, contents) = try Self.hubWorld(w)
        let blob = try FileManager.default.destinationOfSymbolicLink(atPath: hub + "/models--org--repo/snapshots/\(Self.commit)/config.json")
        let blobPath = hub + "/models--org--repo/snapshots/\(Self.commit)/" + blob
        var damaged = try #require(contents["config.json"])
        damaged[100] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: blobPath))
        let before = try Self.snapshotOf(hub)
        w.nginx.clearLog()

        let r = try w.run(["import", "hubm", "--json"], catalog: catalog)
        #expect(r.status == 1, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["installed"] as? Bool == false)
        #expect((doc["error"] as? [String: Any])?["code"] as? String == "importIncomplete", "\(doc)")
        let files = doc["files"] as? [[String: Any]] ?? []
        #expect(files.first { $0["path"] as? String == "config.json" }?["outcome"] as? String == "mismatch", "\(files)")
        #expect(files.filter { $0["outcome"] as? String == "linked" }.count == 2, "\(files)")
        #expect(w.nginx.accessLog().isEmpty)

        let d = try w.run(["download", "hubm"], catalog: catalog)
        #expect(d.status == 0, "\(d)")
        let fetched = w.nginx.accessLog().map(\.path)
        #expect(fetched == ["/org/repo/resolve/\(Self.commit)/config.json"], "only the refused file is fetched: \(fetched)")
        for (path, data) in contents {
            #expect(FileManager.default.contents(atPath: w.installFolder("hubm") + "/" + path) == data, "\(path)")
        }
        #expect(try Self.snapshotOf(hub) == before, "the damaged blob is still the cache's own, untouched")
    }

    @Test("download takes matching files from the cache by itself (a revision named by refs/main) and says so; EXTENTOS_NO_HF_CACHE=1 turns that off")
    func downloadAdoptsFromTheCache() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, _) = try Self.hubWorld(w, revision: "main")
        let before = try Self.snapshotOf(hub)
        w.nginx.clearLog()
        let r = try w.run(["download", "hubm"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.contains("3 of 3 files") && r.stderr.contains("found in the Hugging Face cache") && r.stderr.contains("nothing to fetch"), "\(r.stderr)")
        #expect(w.nginx.accessLog().isEmpty, "nothing fetched: \(w.nginx.accessLog())")
        #expect(try Self.snapshotOf(hub) == before)

        let off = try World(); defer { off.remove() }
        let (catalog2, _, _) = try Self.hubWorld(off, revision: "main")
        off.nginx.clearLog()
        let r2 = try off.run(["download", "hubm"], catalog: catalog2, env: ["EXTENTOS_NO_HF_CACHE": "1"])
        #expect(r2.status == 0, "\(r2)")
        #expect(!r2.stderr.contains("Hugging Face cache"), "\(r2.stderr)")
        #expect(off.nginx.accessLog().count == Self.files.count, "every file fetched: \(off.nginx.accessLog())")
    }

    @Test("import ID DIR from a folder missing one file: exit 1 with the file listed, nothing fetched; download then fetches only that file")
    func importFromAFolderThenDownloadTheRest() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, _, contents) = try Self.hubWorld(w)
        let dir = w.root + "/usb-stick"
        for (path, data) in contents where path != "tokenizer/vocab.txt" {
            let full = dir + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: full))
        }
        w.nginx.clearLog()
        let r = try w.run(["import", "hubm", dir, "--json"], catalog: catalog, env: ["EXTENTOS_NO_HF_CACHE": "1", "HF_HUB_CACHE": w.root + "/none"])
        #expect(r.status == 1, "\(r)")
        let files = try r.jsonObject()["files"] as? [[String: Any]] ?? []
        #expect(files.first { $0["path"] as? String == "tokenizer/vocab.txt" }?["outcome"] as? String == "missing", "\(files)")
        #expect(w.nginx.accessLog().isEmpty)
        let d = try w.run(["download", "hubm"], catalog: catalog, env: ["EXTENTOS_NO_HF_CACHE": "1"])
        #expect(d.status == 0, "\(d)")
        #expect(w.nginx.accessLog().map(\.path) == ["/org/repo/resolve/\(Self.commit)/tokenizer/vocab.txt"], "\(w.nginx.accessLog())")
        for (path, data) in contents {
            #expect(FileManager.default.contents(atPath: w.installFolder("hubm") + "/" + path) == data, "\(path)")
            #expect(FileManager.default.contents(atPath: dir + "/" + path).map { $0 == data } ?? (path == "tokenizer/vocab.txt"), "the folder is unchanged")
        }
    }

    @Test("import of the voice from a folder: files the catalog gives no hash of are checked by size (the archive's hash would have covered them), as for a bundle placed by hand; installed under voices/")
    func voiceFromAFolder() throws {
        let w = try World(); defer { w.remove() }
        let tree = w.root + "/voice-src/kv"
        var entries: [[String: Any]] = []
        for (path, size) in [("model.onnx", 300 * 1024), ("voices.bin", 2000), ("espeak-ng-data/phontab", 700)] {
            let full = tree + "/" + path
            try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Disk.randomBytes(size).write(to: URL(fileURLWithPath: full))
            // Only the model file has a hash of its own, as in the real Kokoro catalog.
            let entry: [String: Any] = ["path": path, "size": size,
                                        "sha256": path == "model.onnx" ? try World.sha256sum(full) : NSNull()]
            entries.append(entry)
        }
        let catalog = try w.voiceCatalog(id: "kv", displayName: "Kokoro-shaped", files: entries,
                                         archiveURL: w.nginx.origin + "/none.tar.bz2", archiveSize: 1000, archiveSHA256: String(repeating: "0", count: 64),
                                         filesBaseURL: w.nginx.baseURL("none"), name: "voice")
        w.nginx.clearLog()
        let r = try w.run(["import", "kv", tree], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        w.expectInstalledMatches("kv", source: tree, installFolder: w.store + "/voices/kv")
        #expect(w.nginx.accessLog().isEmpty)

        // A size the catalog does not give is refused even without a hash.
        let other = try World(); defer { other.remove() }
        try Data(count: 10).write(to: URL(fileURLWithPath: tree + "/voices.bin"))
        let catalog2 = try other.voiceCatalog(id: "kv", displayName: "Kokoro-shaped", files: entries,
                                              archiveURL: other.nginx.origin + "/none.tar.bz2", archiveSize: 1000,
                                              archiveSHA256: String(repeating: "0", count: 64), filesBaseURL: other.nginx.baseURL("none"), name: "voice")
        let bad = try other.run(["import", "kv", tree, "--json"], catalog: catalog2)
        #expect(bad.status == 1, "\(bad)")
        let files = try bad.jsonObject()["files"] as? [[String: Any]] ?? []
        #expect(files.first { $0["path"] as? String == "voices.bin" }?["outcome"] as? String == "missing", "not of the catalog's size: \(files)")
    }
}
