import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A repository on a Hub-shaped origin (Tests/Tools/hubserver.py): one LFS file, answered
/// by the origin with a 302 (and a body) to a signed URL on the CDN, and two small files the
/// origin serves itself; its catalog names the origin's `resolve/<commit>/` URL with
/// `"auth": "huggingface"`, as a catalog of a Hub model does.
struct HubRepo {
    static let commit = "5a1c0b0e6d3f4e2a9b8c7d6e5f4a3b2c1d0e9f8a"
    static let id = "hubm"
    static let big = "model.safetensors"
    static let bigSize: Int64 = 4 << 20
    static let files: [(String, Int)] = [(big, Int(bigSize)), ("config.json", 900), ("tokenizer.json", 300 << 10)]
    static let token = "hf_HubOriginTestToken"

    let hub: HubServer
    let catalog: String
    /// The files as the origin serves them.
    let folder: String
    /// The CDN's ETag of the big file: its SHA-256, quoted (the 302's ETag is another).
    let cdnETag: String
    /// The big file's resume data in the store.
    let partial: String

    /// `catalogRepo` is the repository the catalog names (another one: a renamed repository).
    init(_ w: World, hub: HubServer, catalogRepo: String = "org/repo") throws {
        self.hub = hub
        try w.addModel("hub-repo", files: Self.files)
        folder = w.nginx.mirror + "/hub-repo"
        try hub.serve(repo: "org/repo", revision: Self.commit, folder: folder, lfsMin: 1 << 20)
        catalog = try withHuggingFaceAuth(try w.filesCatalog("hub-repo", id: Self.id,
                                                             baseURL: hub.origin + "/\(catalogRepo)/resolve/\(Self.commit)/"))
        cdnETag = "\"\(try World.sha256sum(folder + "/" + Self.big))\""
        partial = w.partialRoot + "/\(Self.id)/\(Self.big)"
    }

    /// Runs `body` with a world (store, sandbox), a started hubserver.py serving the
    /// repository, and its catalog; stops and removes them after.
    static func with(catalogRepo: String = "org/repo", _ body: (World, HubServer, HubRepo) throws -> Void) throws {
        let w = try World(); defer { w.remove() }
        let hub = try HubServer(); defer { hub.stop() }
        try body(w, hub, try HubRepo(w, hub: hub, catalogRepo: catalogRepo))
    }

    /// Installed as a user sees it: exit 0 before, `list` says installed, the files are the
    /// repository's byte for byte, `verify` exits 0, nothing is left behind.
    func expectInstalled(_ w: World, after run: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(run.status == 0, "\(run)", sourceLocation: sourceLocation)
        #expect(try w.isInstalled(Self.id, catalog: catalog, sourceLocation: sourceLocation), sourceLocation: sourceLocation)
        w.expectInstalledMatches(Self.id, source: folder, sourceLocation: sourceLocation)
        let verify = try w.run(["verify", Self.id], catalog: catalog, sourceLocation: sourceLocation)
        #expect(verify.status == 0, "\(verify)", sourceLocation: sourceLocation)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)", sourceLocation: sourceLocation)
    }

    /// A resume through the redirect: the run never says it starts the file over, and at the
    /// CDN every GET of the big file asks for the rest (`Range: bytes=<kept>-`, `If-Range:`
    /// the CDN's own strong ETag, never the 302's), none is answered with the whole file, the
    /// rest arrives as a 206 from `kept`, and the CDN sends no more than the missing bytes
    /// and 1 MiB.
    func expectResumed(_ run: CLIResult, _ entries: [ServedRequest], from kept: Int64,
                       sourceLocation: SourceLocation = #_sourceLocation) {
        let cdn = entries.filter(\.isCDN)
        let shown = entries.map(\.description).joined(separator: "\n")
        #expect(!run.stderr.contains("starting over"), "\(run)", sourceLocation: sourceLocation)
        #expect(!cdn.contains { $0.status == 200 }, "the CDN sent the whole file again (a restart from byte 0):\n\(shown)",
                sourceLocation: sourceLocation)
        #expect(cdn.allSatisfy { $0.range == "bytes=\(kept)-" && $0.ifRange == cdnETag },
                "each CDN request asks for the rest, from \(kept), If-Range \(cdnETag):\n\(shown)", sourceLocation: sourceLocation)
        #expect(cdn.contains { $0.status == 206 && $0.range == "bytes=\(kept)-" }, "no 206 continuing at \(kept):\n\(shown)",
                sourceLocation: sourceLocation)
        let sent = cdn.reduce(Int64(0)) { $0 + $1.sent }
        #expect(sent <= Self.bigSize - kept + (1 << 20),
                "the CDN sent \(sent) bytes; \(Self.bigSize - kept) were missing:\n\(shown)", sourceLocation: sourceLocation)
    }

    /// The origin answer that issued the signed URL `entry` used (nil: none in `entries`).
    static func redirect(to entry: ServedRequest, in entries: [ServedRequest]) -> ServedRequest? {
        entries.first { $0.status == 302 && $0.location?.hasSuffix(entry.target) == true }
    }
}

/// Downloads from a Hugging-Face-Hub-shaped origin (issue 24): the Hub answers an LFS file
/// with a 302 and a short body, to a signed URL on a CDN on another host that expires. A
/// stopped download resumes through that redirect with Range and the CDN's own validator,
/// across runs, after the signed URL expired, and after a drop followed by an expiry in the
/// same run; the token goes to the origin only.
@Suite("Resume through a Hugging-Face-Hub-shaped origin", .ownThreads, .networkGuard)
struct HubOriginTests {
    @Test("a fresh install through the Hub's redirect: installed and verified; the LFS file from the CDN, the small files from the origin; the token reaches the origin only")
    func freshInstall() throws {
        try HubRepo.with { w, hub, repo in
            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog, env: ["HF_TOKEN": HubRepo.token])
            try repo.expectInstalled(w, after: r)
            let log = try hub.log()
            let shown = log.map(\.description).joined(separator: "\n")
            let bigPath = "/org/repo/resolve/\(HubRepo.commit)/\(HubRepo.big)"
            #expect(log.contains { !$0.isCDN && $0.path == bigPath && $0.status == 302 }, "\(shown)")
            let cdn = log.filter(\.isCDN)
            #expect(cdn.count == 1 && cdn.first?.status == 200 && cdn.first?.sent == HubRepo.bigSize, "the LFS file, once, from the CDN:\n\(shown)")
            for (name, _) in HubRepo.files where name != HubRepo.big {
                #expect(log.contains { !$0.isCDN && $0.isFor(name) && $0.status == 200 }, "\(name) from the origin:\n\(shown)")
            }
            #expect(log.filter { !$0.isCDN }.allSatisfy { $0.authorization == "Bearer \(HubRepo.token)" }, "\(shown)")
            #expect(cdn.allSatisfy { $0.authorization == nil }, "the token went to the CDN:\n\(shown)")
        }
    }

    @Test("SIGINT mid-file, then download again while the signed URL is still valid: the CDN is asked for the rest with Range and its own ETag as If-Range, and sends only the missing bytes")
    func resumeAfterInterrupt() throws {
        try HubRepo.with { w, hub, repo in
            let kept = try interruptMidFile(w, repo)

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog)
            try repo.expectInstalled(w, after: r)
            repo.expectResumed(r, try hub.log(), from: kept)
        }
    }

    @Test("SIGINT mid-file, the signed URL expires, then download again: a fresh redirect from the origin, and the CDN still sends only the missing bytes")
    func resumeAfterExpiry() throws {
        try HubRepo.with { w, hub, repo in
            let kept = try interruptMidFile(w, repo)
            try hub.expire()

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog)
            try repo.expectInstalled(w, after: r)
            let log = try hub.log()
            repo.expectResumed(r, log, from: kept)
            let served = try #require(log.last { $0.isCDN && $0.status == 206 }, "\(log)")
            #expect(HubRepo.redirect(to: served, in: log) != nil, "the CDN served a URL this run's origin issued:\n\(log)")
        }
    }

    @Test("the CDN drops the connection mid-file and every signed URL expires: the same run gets a fresh redirect, resumes, and installs (exit 0) fetching only the missing bytes")
    func dropThenExpiryInOneRun() throws {
        try HubRepo.with { w, hub, repo in
            let dropAt: Int64 = 2 << 20
            try hub.configure(["drop": dropAt, "drop_times": 1, "expire_after_drop": true])

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog)
            try repo.expectInstalled(w, after: r)
            let log = try hub.log()
            let dropped = try #require(log.firstIndex { $0.isCDN && $0.sent == dropAt }, "the CDN never dropped:\n\(log)")
            let after = Array(log[(dropped + 1)...])
            repo.expectResumed(r, after, from: dropAt)
            // An expired URL gets 403 from the CDN; the run goes back to the origin for another.
            let served = try #require(after.last { $0.isCDN && $0.status == 206 }, "\(log)")
            #expect(HubRepo.redirect(to: served, in: after) != nil, "the 206 came from a redirect issued after the drop:\n\(log)")
        }
    }

    @Test("a token is required by the origin: without HF_TOKEN exit 77 and the CDN sees nothing; with it (and a retry after a drop) every origin request carries it and no CDN request does")
    func tokenToOriginOnly() throws {
        try HubRepo.with { w, hub, repo in
            try hub.configure(["token": HubRepo.token, "drop": 1 << 20, "drop_times": 1])

            let without = try w.run(["download", HubRepo.id], catalog: repo.catalog)
            #expect(without.status == 77 && without.stderr.contains("HF_TOKEN"), "\(without)")
            let refused = try hub.log()
            #expect(refused.allSatisfy { !$0.isCDN && $0.status == 401 }, "\(refused)")
            try hub.clearLog()

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog, env: ["HF_TOKEN": HubRepo.token])
            try repo.expectInstalled(w, after: r)
            let log = try hub.log()
            #expect(log.filter(\.isCDN).count >= 2, "the drop made the run ask the CDN again:\n\(log)")
            #expect(log.filter { !$0.isCDN }.allSatisfy { $0.authorization == "Bearer \(HubRepo.token)" && $0.status != 401 }, "\(log)")
            #expect(log.filter(\.isCDN).allSatisfy { $0.authorization == nil }, "the token went to the CDN:\n\(log)")
        }
    }

    @Test("an expired token on a public model: the origin refuses it (401), the run asks again without it, installs (exit 0) and says so; no CDN request carries a token")
    func refusedTokenOnAPublicModel() throws {
        try HubRepo.with { w, hub, repo in
            try hub.configure(["token": HubRepo.token, "public": true])

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog, env: ["HF_TOKEN": "hf_ExpiredLogin"])
            try repo.expectInstalled(w, after: r)
            #expect(r.stderr.contains("$HF_TOKEN") && r.stderr.contains("refused") && !r.stderr.contains("hf_ExpiredLogin"), "\(r)")
            let log = try hub.log()
            let refused = log.filter { $0.status == 401 }
            #expect(!refused.isEmpty && refused.allSatisfy { $0.authorization == "Bearer hf_ExpiredLogin" }, "\(log)")
            for (name, _) in HubRepo.files {
                #expect(log.contains { !$0.isCDN && $0.isFor(name) && $0.authorization == nil && $0.status != 401 },
                        "\(name) was asked again without the token:\n\(log)")
            }
            #expect(log.filter(\.isCDN).allSatisfy { $0.authorization == nil }, "the token went to the CDN:\n\(log)")
        }
    }

    @Test("a renamed repository's relative 307 is followed, and a 429 with Retry-After: 1 is waited out: installed")
    func renamedRepoAndRateLimit() throws {
        try HubRepo.with(catalogRepo: "old-org/old-name") { w, hub, repo in
            try hub.configure(["renames": ["old-org/old-name": "org/repo"], "too_many": 2, "retry_after": 1])

            let r = try w.run(["download", HubRepo.id], catalog: repo.catalog)
            try repo.expectInstalled(w, after: r)
            let log = try hub.log()
            let limited = log.filter { $0.status == 429 }
            #expect(limited.count == 2, "\(log)")
            for answer in limited {
                // The same file's next request: at least Retry-After later.
                let next = log.first { $0.path == answer.path && $0.start > answer.start }
                #expect(next.map { $0.start - (answer.end ?? answer.start) >= 0.9 } == true, "Retry-After: 1 was not waited out:\n\(log)")
            }
            let moved = log.filter { $0.status == 307 }
            #expect(moved.count == HubRepo.files.count && moved.allSatisfy { $0.location?.hasPrefix("/org/repo/resolve/\(HubRepo.commit)/") == true },
                    "each file's request met the rename:\n\(log)")
            #expect(log.contains { $0.isCDN && $0.status == 200 }, "\(log)")
        }
    }

    /// Starts the download with the CDN holding the big file after 1 MiB, waits until that
    /// MiB is on disk, and stops the download with SIGINT (exit 130, partial kept). The log
    /// is cleared after; returns the bytes kept.
    private func interruptMidFile(_ w: World, _ repo: HubRepo, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int64 {
        let hold: Int64 = 1 << 20
        try repo.hub.configure(["hold": hold, "hold_times": 1])
        let p = try w.start(["download", HubRepo.id], catalog: repo.catalog)
        let kept = try interruptAfter(p, wrote: hold, of: repo.partial, sourceLocation: sourceLocation)
        #expect(kept == hold, "the CDN sent \(hold) bytes and held: all of them are the partial", sourceLocation: sourceLocation)
        try repo.hub.clearLog()
        return kept
    }
}
