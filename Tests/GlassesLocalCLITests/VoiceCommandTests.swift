import Foundation
import GlassesTestSupport
import Testing

/// `glasses-local voice status | download | delete [--source archive|files]` through the
/// built binary, against nginx serving a voice bundle both ways (a release archive first,
/// per-file second, as the shipped Kokoro entry lists them).
@Suite("The voice commands", .ownThreads, .networkGuard)
struct VoiceCommandTests {
    static let id = "kokoro-test"

    /// A voice catalog entry with both sources, and the tree the install must match.
    /// The voice tree on the mirror (per file) and as a release archive, and two catalogs
    /// for it: the plain one, and one whose per-file source goes through nginx's
    /// rate-limited location.
    static func voiceCatalogs(_ w: World) throws -> (catalog: String, slowCatalog: String, tree: String) {
        let src = w.root + "/voice-src"
        let tree = src + "/kokoro-test"
        try FileManager.default.createDirectory(atPath: tree + "/voices", withIntermediateDirectories: true)
        try Disk.randomBytes(1 << 20).write(to: URL(fileURLWithPath: tree + "/model.onnx"))
        try Disk.randomBytes(5000).write(to: URL(fileURLWithPath: tree + "/voices/af_bella.bin"))
        try Data("{\"sample_rate\": 24000}".utf8).write(to: URL(fileURLWithPath: tree + "/config.json"))
        let copy = try World.tool("/bin/cp", ["-r", tree, w.nginx.mirror + "/kokoro-test"])
        try #require(copy.status == 0, "\(copy)")
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let archive = w.nginx.mirror + "/archives/kokoro-test.tar.bz2"
        let tar = try World.tool("/usr/bin/env", ["tar", "-cjf", archive, "-C", src, "kokoro-test"])
        try #require(tar.status == 0, "\(tar)")
        let size = try #require(Disk.fileSize(archive))
        let files = try w.fileEntries(of: tree)
        let sha = try World.sha256sum(archive)
        func write(slow: Bool) throws -> String {
            try w.voiceCatalog(id: id, displayName: "Test voice", files: files, archiveURL: w.nginx.origin + "/archives/kokoro-test.tar.bz2",
                               archiveSize: size, archiveSHA256: sha, filesBaseURL: w.nginx.baseURL("kokoro-test", slow: slow),
                               name: "voice" + (slow ? "-slow" : ""))
        }
        return (try write(slow: false), try write(slow: true), tree)
    }

    func status(_ w: World, _ catalog: String) throws -> [String: Any] {
        let r = try w.run(["voice", "status", "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        return try r.jsonObject()
    }

    @Test("status → download --source files → status (installed, from files, its folder) → delete → status", arguments: ["files", "archive"])
    func lifecycle(source: String) throws {
        let w = try World(); defer { w.remove() }
        let (catalog, _, tree) = try Self.voiceCatalogs(w)

        let before = try status(w, catalog)
        #expect(before["state"] as? String == "notInstalled" && before["modelId"] as? String == Self.id, "\(before)")
        #expect((before["fit"] as? [String: Any])?["fits"] as? Bool == true, "\(before)")
        let text = try w.run(["voice", "status"], catalog: catalog)
        #expect(text.stdout.contains("\(Self.id) (Test voice): not installed") && text.stdout.contains("fits:    yes"), "\(text)")

        let d = try w.run(["voice", "download", "--source", source, "--json"], catalog: catalog)
        #expect(d.status == 0, "\(d)")
        let events = d.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(events.last?["event"] as? String == "done", "the --json events end with done: \(d.stdout.suffix(500))")
        let requested = w.nginx.accessLog().map(\.path)
        if source == "files" {
            #expect(!requested.contains { $0.hasSuffix(".tar.bz2") } && requested.count == 3, "only the files: \(requested)")
        } else {
            #expect(requested == ["/archives/kokoro-test.tar.bz2"], "only the archive: \(requested)")
        }
        w.expectInstalledMatches(Self.id, source: tree, installFolder: w.store + "/voices/" + Self.id)

        let after = try status(w, catalog)
        #expect(after["state"] as? String == "installed", "\(after)")
        #expect((after["source"] as? String)?.hasPrefix(source + " http://127.0.0.1:") == true, "the source it came from: \(after)")
        #expect(after["path"] as? String == w.store + "/voices/" + Self.id, "\(after)")
        let installedText = try w.run(["voice", "status"], catalog: catalog)
        #expect(installedText.stdout.contains(": installed") && installedText.stdout.contains("source:  \(source) "), "\(installedText)")
        #expect(try w.isInstalled(Self.id, catalog: catalog), "list keeps showing the voice")

        let del = try w.run(["voice", "delete"], catalog: catalog)
        #expect(del.status == 0 && del.stdout.contains("\(Self.id): deleted"), "\(del)")
        #expect(try status(w, catalog)["state"] as? String == "notInstalled")
    }

    @Test("an interrupted voice download is 'partly downloaded'; the next one resumes")
    func partial() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, slowCatalog, tree) = try Self.voiceCatalogs(w)
        let model = "kokoro-test/model.onnx"
        let size = try #require(Disk.fileSize(w.nginx.mirror + "/" + model))
        let p = try w.start(["voice", "download", "--source", "files"], catalog: slowCatalog)
        let kept = try interruptAfter(p, wrote: 64 << 10, of: w.partialRoot + "/\(Self.id)/model.onnx")
        try #require(kept < size, "the slowed download was interrupted before model.onnx was complete")
        let s = try status(w, catalog)
        #expect(s["state"] as? String == "partial" && (s["presentBytes"] as? Int ?? 0) >= Int(kept), "\(s)")
        let text2 = try w.run(["voice", "status"], catalog: catalog)
        #expect(text2.stdout.contains("partly downloaded"), "\(text2)")
        w.nginx.clearLog()
        let again = try w.run(["voice", "download", "--source", "files"], catalog: catalog)
        #expect(again.status == 0, "\(again)")
        #expect(try status(w, catalog)["state"] as? String == "installed")
        // Resumed, not restarted: one request for the rest of model.onnx, at the byte where
        // the first run stopped, and only the missing bytes sent (nginx's access log).
        let resumed = w.nginx.requests(for: model)
        #expect(resumed.count == 1, "model.onnx was asked for once: \(w.nginx.accessLog())")
        let resume = try #require(resumed.last, "\(w.nginx.accessLog())")
        #expect(resume.rangeStart == kept, "resumed at byte \(kept) with a Range request: \(resume)")
        #expect(resume.ifRange != nil && resume.ifRange != "", "a resume asks with If-Range: \(resume)")
        #expect(resume.status == 206 && resume.bytesSent == size - kept, "only the \(size - kept) missing bytes were sent: \(resume)")
        w.expectInstalledMatches(Self.id, source: tree, installFolder: w.store + "/voices/" + Self.id)
    }

    @Test("usage and catalog errors: a bad --source is exit 2; a catalog without a voice is exit 5")
    func errors() throws {
        let w = try World(); defer { w.remove() }
        let (catalog, _, _) = try Self.voiceCatalogs(w)
        let bad = try w.run(["voice", "download", "--source", "torrent"], catalog: catalog)
        #expect(bad.status == 2 && bad.stderr.contains("--source must be archive or files"), "\(bad)")
        let wrongPlace = try w.run(["download", Self.id, "--source", "files"], catalog: catalog)
        #expect(wrongPlace.status == 2, "--source belongs to voice download only\n\(wrongPlace)")
        try w.addModel("llm", files: [("a.bin", 1000)])
        let llmOnly = try w.filesCatalog("llm", id: "llm-only")
        let none = try w.run(["voice", "status", "--json"], catalog: llmOnly)
        #expect(none.status == 5, "\(none)")
        #expect(((try? none.jsonObject())?["error"] as? [String: Any])?["code"] as? String == "unknownModel", "\(none)")
    }
}
