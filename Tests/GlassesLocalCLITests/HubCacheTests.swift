import Foundation
import GlassesTestSupport
import Testing

/// Files the Hugging Face cache holds under another revision than the catalog's, and the
/// voice from the cache. The cache is laid out as the Hub client lays it out: a Git LFS file
/// under `blobs/<its SHA-256>`, a file kept in Git itself under `blobs/<its Git blob SHA-1>`,
/// `snapshots/<commit>/<path>` linking to `../../blobs/…`, `refs/main` naming a commit.
/// nginx's access log proves what was fetched; the cache is compared byte for byte, links
/// included, before and after.
@Suite("The Hugging Face cache under another revision, and the voice from it", .ownThreads, .networkGuard)
struct HubCacheTests {
    /// The revision the catalog's URLs name, and the one the cache has.
    static let wanted = "1111111111111111111111111111111111111111"
    static let cached = "2222222222222222222222222222222222222222"
    /// The weights and the vocabulary are LFS files; config.json is kept in Git.
    static let files: [(String, Int)] = [("model.safetensors", 400 * 1024), ("config.json", 900), ("tokenizer/vocab.txt", 5000)]
    static let gitKept: Set<String> = ["config.json"]

    /// A repository folder of the hub, filled as the client fills it.
    struct HubRepo {
        let folder: String

        init(hub: String, repo: String) {
            folder = hub + "/models--" + repo.replacingOccurrences(of: "/", with: "--")
        }

        /// `data` as `blobs/<name>` (the SHA-256 for an LFS file, the Git blob SHA-1 for a
        /// file kept in Git), linked from `snapshots/<commit>/<path>` unless `commit` is nil.
        @discardableResult
        func add(_ path: String, _ data: Data, commit: String?, lfs: Bool) throws -> String {
            let temp = folder + "/.tmp-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try data.write(to: URL(fileURLWithPath: temp))
            defer { try? FileManager.default.removeItem(atPath: temp) }
            let name = lfs ? try World.sha256sum(temp) : try Self.gitBlobName(temp)
            let blob = folder + "/blobs/" + name
            try FileManager.default.createDirectory(atPath: folder + "/blobs", withIntermediateDirectories: true)
            if !FileManager.default.fileExists(atPath: blob) { try data.write(to: URL(fileURLWithPath: blob)) }
            if let commit {
                let link = folder + "/snapshots/" + commit + "/" + path
                try FileManager.default.createDirectory(atPath: (link as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                let depth = path.split(separator: "/").count - 1
                try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: String(repeating: "../", count: depth + 2) + "blobs/" + name)
            }
            return blob
        }

        func setRef(_ name: String, to commit: String) throws {
            try FileManager.default.createDirectory(atPath: folder + "/refs", withIntermediateDirectories: true)
            try commit.write(toFile: folder + "/refs/" + name, atomically: true, encoding: .utf8)
        }

        /// What `git hash-object` names the file: the SHA-1 of `blob <size>\0<bytes>`.
        static func gitBlobName(_ path: String) throws -> String {
            let r = try World.tool("/usr/bin/env", ["git", "hash-object", path])
            guard r.status == 0, let name = r.stdout.split(separator: "\n").first, name.count == 40 else {
                throw HarnessError("git hash-object \(path) failed: \(r)")
            }
            return String(name)
        }
    }

    /// The model on nginx under `/org/repo/resolve/<wanted>/`, its catalog, and the hub
    /// folder (`$HOME/.cache/huggingface/hub`) with the repository's folder, still empty.
    static func world(_ w: World) throws -> (catalog: String, hub: String, repo: HubRepo, contents: [String: Data]) {
        let folder = "org/repo/resolve/\(wanted)"
        let contents = try w.addModel(folder, files: files)
        let catalog = try w.filesCatalog(folder, id: "hubm", baseURL: w.nginx.baseURL(folder))
        let hub = w.root + "/home/.cache/huggingface/hub"
        return (catalog, hub, HubRepo(hub: hub, repo: "org/repo"), contents)
    }

    /// Every file of the model in the cache under the `cached` revision only (`refs/main`
    /// names it): what `hf download org/repo` left there before the catalog moved on.
    static func cacheUnderAnotherRevision(_ repo: HubRepo, _ contents: [String: Data]) throws {
        for (path, data) in contents { try repo.add(path, data, commit: cached, lfs: !gitKept.contains(path)) }
        try repo.setRef("main", to: cached)
    }

    func expectInstalled(_ w: World, _ contents: [String: Data], sourceLocation: SourceLocation = #_sourceLocation) {
        for (path, data) in contents {
            #expect(FileManager.default.contents(atPath: w.installFolder("hubm") + "/" + path) == data, "\(path): the installed bytes",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("the model cached only under another revision: download takes the LFS files by SHA-256 from blobs/ and the Git-kept file unchanged from the other snapshot, fetches nothing, and says so in text, --json and history")
    func anotherRevisionFetchesNothing() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, repo, contents) = try Self.world(w)
        try Self.cacheUnderAnotherRevision(repo, contents)
        let before = try ImportTests.snapshotOf(hub)
        w.nginx.clearLog()

        // --no-progress: the summary is said whatever the progress style.
        let r = try w.run(["download", "hubm", "--no-progress"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(w.nginx.accessLog().isEmpty, "nothing fetched: \(w.nginx.accessLog())")
        expectInstalled(w, contents)
        let summary = r.stdoutLines.first { $0.hasPrefix("hubm: 3 of 3 files (") }
        #expect(summary?.contains("from the Hugging Face cache (\(repo.folder): 2 by SHA-256 in blobs/, 1 unchanged in snapshots/\(Self.cached))") == true
                && summary?.hasSuffix(": linked, verified, nothing downloaded") == true, "the summary line: \(r.stdout)")
        #expect(r.stdoutLines.last?.hasPrefix("hubm: installed in ") == true, "\(r.stdout)")
        #expect(try ImportTests.snapshotOf(hub) == before, "the cache is unchanged")

        let history = try w.run(["history", "hubm"], catalog: catalog)
        let total = Self.files.reduce(0) { $0 + $1.1 }
        let completed = history.stdout.split(separator: "\n").first { $0.contains(" completed ") }
        #expect(completed?.hasSuffix("from the Hugging Face cache (\(repo.folder): 2 by SHA-256 in blobs/, 1 unchanged in snapshots/\(Self.cached)); 3 of 3 file(s), \(total) bytes: linked, verified, nothing downloaded") == true,
                "the history's install row: \(history.stdout)")

        // Again with --json, after a delete (which removes only the store's names).
        let del = try w.run(["delete", "hubm"], catalog: catalog)
        #expect(del.status == 0, "\(del)")
        #expect(try ImportTests.snapshotOf(hub) == before, "delete leaves the cache alone")
        let j = try w.run(["download", "hubm", "--json"], catalog: catalog)
        #expect(j.status == 0, "\(j)")
        let events = Check.jsonLines(j)
        let used = try #require(events.first { $0["event"] as? String == "local-copies-used" }, "\(j.stdout)")
        #expect(Set(used["files"] as? [String] ?? []) == Set(Self.files.map(\.0)) && used["total"] as? Int == 3
                && used["downloaded"] as? Int == 0 && (used["refused"] as? [String])?.isEmpty == true
                && used["bytes"] as? Int == total && used["place"] as? String == "the Hugging Face cache", "\(used)")
        let usedAt = events.firstIndex { $0["event"] as? String == "local-copies-used" }
        let doneAt = events.firstIndex { $0["event"] as? String == "done" }
        #expect((usedAt ?? .max) < (doneAt ?? -1), "said after the install, before done: \(j.stdout)")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
    }

    @Test("a damaged blob under its SHA-256 name (no snapshot of the catalog's revision): refused in the store, fetched, the cache untouched; the summary says 2 from the cache, 1 downloaded, refused there")
    func damagedBlobByHashIsRefusedAndFetched() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, repo, contents) = try Self.world(w)
        try Self.cacheUnderAnotherRevision(repo, contents)
        var damaged = try #require(contents["model.safetensors"])
        damaged[damaged.count / 2] ^= 0x01
        let blob = repo.folder + "/blobs/" + (try World.sha256sum(w.nginx.mirror + "/org/repo/resolve/\(Self.wanted)/model.safetensors"))
        try damaged.write(to: URL(fileURLWithPath: blob))
        let before = try ImportTests.snapshotOf(hub)
        w.nginx.clearLog()

        let r = try w.run(["download", "hubm"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(w.nginx.accessLog().map(\.path) == ["/org/repo/resolve/\(Self.wanted)/model.safetensors"], "only the refused file: \(w.nginx.accessLog())")
        expectInstalled(w, contents)
        #expect(FileManager.default.contents(atPath: blob) == damaged, "the blob keeps its (damaged) bytes: the cache is the user's")
        #expect(try ImportTests.snapshotOf(hub) == before, "the cache is unchanged")
        let summary = r.stdoutLines.first { $0.hasPrefix("hubm: 2 of 3 files (") }
        #expect(summary?.contains("linked, verified; 1 downloaded (1 refused there, their bytes did not match: model.safetensors)") == true, "\(r.stdout)")
        let history = try w.run(["history", "hubm"], catalog: catalog)
        #expect(history.stdout.contains("2 of 3 file(s)") && history.stdout.contains("1 downloaded (refused there: model.safetensors)"), "\(history.stdout)")
    }

    @Test("a Git-kept file changed between revisions (same size, other bytes) is not taken from the other snapshot: fetched, never linked and refused")
    func changedGitFileIsFetchedNotRefused() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, repo, contents) = try Self.world(w)
        var changed = contents
        var config = try #require(contents["config.json"])
        config[0] ^= 0x20
        changed["config.json"] = config
        try Self.cacheUnderAnotherRevision(repo, changed)
        let before = try ImportTests.snapshotOf(hub)
        w.nginx.clearLog()

        let r = try w.run(["download", "hubm"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(w.nginx.accessLog().map(\.path) == ["/org/repo/resolve/\(Self.wanted)/config.json"], "\(w.nginx.accessLog())")
        expectInstalled(w, contents)
        #expect(!r.stderr.contains("starting over") && !r.stdout.contains("refused"), "the other revision's config was never linked: \(r)")
        #expect(r.stdoutLines.contains { $0.hasPrefix("hubm: 2 of 3 files (") && $0.hasSuffix("linked, verified; 1 downloaded") }, "\(r.stdout)")
        #expect(try ImportTests.snapshotOf(hub) == before)
    }

    @Test("import ID from a cache holding another revision: installed without a request, each file's detail says how it was found, the history names the repository")
    func importFromAnotherRevision() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, hub, repo, contents) = try Self.world(w)
        try Self.cacheUnderAnotherRevision(repo, contents)
        let before = try ImportTests.snapshotOf(hub)
        w.nginx.clearLog()
        let r = try w.run(["import", "hubm", "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["installed"] as? Bool == true && doc["folder"] as? String == repo.folder, "\(doc)")
        let details = Dictionary(uniqueKeysWithValues: (doc["files"] as? [[String: Any]] ?? []).map {
            ($0["path"] as? String ?? "", ($0["outcome"] as? String ?? "") + " " + ($0["detail"] as? String ?? ""))
        })
        #expect(details["model.safetensors"] == "linked by its SHA-256 in \(repo.folder)/blobs", "\(details)")
        #expect(details["config.json"] == "linked unchanged in \(repo.folder)/snapshots/\(Self.cached) (SHA-256 checked)", "\(details)")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
        expectInstalled(w, contents)
        #expect(try ImportTests.snapshotOf(hub) == before)
        let history = try w.run(["history", "hubm"], catalog: catalog)
        #expect(history.stdout.contains("import from \(repo.folder): 2 by SHA-256 in blobs/, 1 unchanged in snapshots/\(Self.cached)"), "\(history.stdout)")
    }

    // MARK: The voice

    /// A Kokoro-shaped voice: an archive first, then a per-file source on a Hub-shaped URL
    /// (`/org/voice/resolve/main/`). `model.onnx` is most of the bytes (half of it zeros, so
    /// the archive is about half the tree, as the real one is smaller than its tree);
    /// `config.json` has no SHA-256 in the catalog (the archive's hash covers it), as the
    /// real catalog's Git-kept files have none.
    static func voiceWorld(_ w: World) throws -> (catalog: String, tree: String, repo: HubRepo, contents: [String: Data]) {
        let src = w.root + "/voice-src"
        let tree = src + "/kv"
        var contents: [String: Data] = [:]
        contents["model.onnx"] = try Disk.randomBytes(512 * 1024) + Data(count: 512 * 1024)
        contents["voices/af_bella.bin"] = try Disk.randomBytes(5000)
        contents["config.json"] = Data("{\"sample_rate\": 24000}".utf8)
        for (path, data) in contents {
            for root in [tree, w.nginx.mirror + "/org/voice/resolve/main"] {
                let full = root + "/" + path
                try FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try data.write(to: URL(fileURLWithPath: full))
            }
        }
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let archive = w.nginx.mirror + "/archives/kv.tar.bz2"
        let tar = try World.tool("/usr/bin/env", ["tar", "-cjf", archive, "-C", src, "kv"])
        try #require(tar.status == 0, "\(tar)")
        let size = try #require(Disk.fileSize(archive))
        let entries = try w.fileEntries(of: tree).map { entry -> [String: Any] in
            var e = entry
            if e["path"] as? String == "config.json" { e["sha256"] = NSNull() }
            return e
        }
        let catalog = try w.voiceCatalog(id: "kv", displayName: "Kokoro-shaped", files: entries,
                                         archiveURL: w.nginx.origin + "/archives/kv.tar.bz2", archiveSize: size,
                                         archiveSHA256: try World.sha256sum(archive), filesBaseURL: w.nginx.baseURL("org/voice/resolve/main"),
                                         name: "voice")
        return (catalog, tree, HubRepo(hub: w.root + "/home/.cache/huggingface/hub", repo: "org/voice"), contents)
    }

    @Test("the voice wholly in the cache (refs/main's snapshot): voice download installs it with no request at all, though its first source is the archive, and offline too; status names the cache")
    func voiceFromTheCacheWithoutNetwork() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, tree, repo, contents) = try Self.voiceWorld(w)
        for (path, data) in contents { try repo.add(path, data, commit: Self.cached, lfs: path != "config.json") }
        try repo.setRef("main", to: Self.cached)
        let before = try ImportTests.snapshotOf(repo.folder)
        w.nginx.clearLog()

        let r = try w.run(["voice", "download"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(w.nginx.accessLog().isEmpty, "no request, the archive included: \(w.nginx.accessLog())")
        w.expectInstalledMatches("kv", source: tree, installFolder: w.store + "/voices/kv")
        let snapshot = repo.folder + "/snapshots/" + Self.cached
        #expect(r.stdout.contains("kv: 3 of 3 files (") && r.stdout.contains("from the Hugging Face cache (\(snapshot)): linked, verified, nothing downloaded"), "\(r.stdout)")
        let status = try w.run(["voice", "status", "--json"], catalog: catalog)
        let doc = try status.jsonObject()
        #expect(doc["state"] as? String == "installed" && doc["source"] as? String == "the Hugging Face cache (\(snapshot))", "\(doc)")

        // Offline as the Hub client says it (HF_HUB_OFFLINE=1): the same install, no connection needed.
        let del = try w.run(["voice", "delete"], catalog: catalog)
        #expect(del.status == 0, "\(del)")
        let offline = try w.run(["voice", "download"], catalog: catalog, env: ["HF_HUB_OFFLINE": "1"])
        #expect(offline.status == 0 && offline.stdout.contains("nothing downloaded"), "\(offline)")
        w.expectInstalledMatches("kv", source: tree, installFolder: w.store + "/voices/kv")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
        #expect(try ImportTests.snapshotOf(repo.folder) == before, "the cache is unchanged")
    }

    @Test("the voice partly in the cache: the per-file source fetches the rest when that is fewer bytes than the archive; otherwise the archive, as the catalog orders; --source archive always fetches the archive", arguments: ["most", "little", "forcedArchive"])
    func voicePartlyInTheCache(_ held: String) throws {
        let w = try World(); defer { w.remove() }
        let (catalog, tree, repo, contents) = try Self.voiceWorld(w)
        // Only by SHA-256 in blobs/ (another revision's snapshot, not the catalog's `main`).
        let cachedPath = held == "little" ? "voices/af_bella.bin" : "model.onnx"
        try repo.add(cachedPath, try #require(contents[cachedPath]), commit: Self.cached, lfs: true)
        w.nginx.clearLog()

        let r = try w.run(["voice", "download"] + (held == "forcedArchive" ? ["--source", "archive"] : []), catalog: catalog)
        #expect(r.status == 0, "\(r)")
        w.expectInstalledMatches("kv", source: tree, installFolder: w.store + "/voices/kv")
        let fetched = Set(w.nginx.accessLog().map(\.path))
        if held == "most" {
            #expect(fetched == ["/org/voice/resolve/main/voices/af_bella.bin", "/org/voice/resolve/main/config.json"], "the rest, file by file: \(fetched)")
            #expect(r.stdout.contains("kv: 1 of 3 files (") && r.stdout.contains("linked, verified; 2 downloaded"), "\(r.stdout)")
        } else {
            #expect(fetched == ["/archives/kv.tar.bz2"], "the archive, fewer bytes than the files left: \(fetched)")
            #expect(!r.stdout.contains("Hugging Face cache"), "nothing from the cache was used: \(r.stdout)")
        }
    }
}
