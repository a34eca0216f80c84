import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A three-file model served by nginx; big enough that a slowed transfer can be interrupted.
enum SampleModel {
    static let folder = "m1"
    static let id = "m1"
    static let big = "weights.bin"
    static let bigSize = 3 << 20
    static let files: [(String, Int)] = [(big, bigSize), ("config.json", 1000), ("sub/tokenizer.bin", 50_000)]
    static var totalSize: Int { files.reduce(0) { $0 + $1.1 } }
}

/// Waits for a slowed download to have written at least `bytes` of `path`, then sends
/// `signal` (SIGINT unless told) and expects exit 130 with the partial kept. Returns the
/// bytes kept in `path`.
@discardableResult
func interruptAfter(_ process: CLIProcess, wrote bytes: Int64, of path: String, signal: Int32 = SIGINT,
                    sourceLocation: SourceLocation = #_sourceLocation) throws -> Int64 {
    let reached = process.waitUntil(timeout: 60) { (Disk.fileSize(path) ?? 0) >= bytes }
    try #require(reached, "the download never wrote \(bytes) bytes of \(path)\n\(process.wait())", sourceLocation: sourceLocation)
    process.send(signal)
    let r = process.wait()
    #expect(r.status == 130, "signal \(signal) must exit 130\n\(r)", sourceLocation: sourceLocation)
    #expect(r.stderr.contains("interrupted") && r.stderr.contains("kept"), "\(r)", sourceLocation: sourceLocation)
    let kept = Disk.fileSize(path) ?? 0
    #expect(kept >= bytes, "the partial data was not kept: \(path) has \(kept) bytes", sourceLocation: sourceLocation)
    return kept
}

/// The built `glasses-local` against a real nginx on 127.0.0.1: install, resume, verify,
/// repair, delete, gc, --mirror, archives — each checked by exit code, output, disk and
/// nginx's access log.
@Suite("Reliability: glasses-local against a real nginx", .ownThreads, .networkGuard)
struct NginxIntegrationTests {
    @Test("download --json: exit 0, JSON lines ending with done, files byte-identical, verify 0, list isInstalled; a second download fetches nothing")
    func downloadInstallsVerifiedFiles() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)

        let r = try w.run(["download", SampleModel.id, "--json"], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let events = Check.jsonLines(r)
        let last = try #require(events.last, "\(r)")
        #expect(last["event"] as? String == "done", "the last JSON line is the result\n\(r)")
        #expect(last["modelId"] as? String == SampleModel.id && last["path"] as? String == w.installFolder(SampleModel.id), "\(r)")
        #expect(last["exitCode"] as? Int == 0, "\(r)")
        let phases = events.filter { $0["event"] as? String == "phase" }.compactMap { $0["phase"] as? String }
        #expect(phases == ["resolve", "download", "verify", "install"], "\(r)")
        let fractions = events.filter { $0["event"] as? String == "progress" }.compactMap { ($0["fraction"] as? NSNumber)?.doubleValue }
        #expect(fractions == fractions.sorted() && fractions.last == 1, "progress is non-decreasing and ends at 1: \(fractions)")
        #expect(events.filter { $0["event"] as? String == "file" }.count == SampleModel.files.count, "\(r)")

        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        #expect(try w.isInstalled(SampleModel.id, catalog: catalog))
        let v = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(v.status == 0 && v.stdout.contains("\(SampleModel.id): ok, 3 files verified"), "\(v)")
        #expect(w.leftovers.isEmpty, "nothing is left in .partial or .staging: \(w.leftovers)")
        let fetched = w.nginx.accessLog()
        #expect(fetched.count == 3 && fetched.allSatisfy { $0.status == 200 && $0.range == nil }, "\(fetched)")

        // Installed already: nothing is fetched again.
        w.nginx.clearLog()
        let again = try w.run(["download", SampleModel.id, "--json"], catalog: catalog)
        #expect(again.status == 0, "\(again)")
        #expect(Check.jsonLines(again).last?["event"] as? String == "skipped", "\(again)")
        #expect(w.nginx.accessLog().isEmpty, "an installed model is not fetched again: \(w.nginx.accessLog())")
        try w.expectRecordsIntact(catalog: catalog)
    }

    @Test("SIGINT mid-download exits 130 and keeps the partial; the next download resumes with Range + If-Range and fetches only the rest")
    func interruptThenResume() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        let fast = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let partial = w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)"

        let p = try w.start(["download", SampleModel.id], catalog: slow)
        let kept = try interruptAfter(p, wrote: 128 << 10, of: partial)
        #expect(kept < Int64(SampleModel.bigSize), "the slowed download was interrupted before it finished")
        #expect(try !w.isInstalled(SampleModel.id, catalog: fast))
        #expect(!Disk.exists(w.installFolder(SampleModel.id)))
        let firstRun = w.nginx.requests(for: "\(SampleModel.folder)/\(SampleModel.big)")
        #expect(firstRun.count == 1 && firstRun[0].range == nil, "\(firstRun)")

        let r = try w.run(["download", SampleModel.id], catalog: fast)
        #expect(r.status == 0, "\(r)")
        let log = w.nginx.requests(for: "\(SampleModel.folder)/\(SampleModel.big)")
        let resume = try #require(log.last, "\(w.nginx.accessLog())")
        #expect(resume.rangeStart == kept, "resumed at the byte where it stopped (\(kept)): \(resume)")
        #expect(resume.ifRange != nil && resume.ifRange != "", "a resume asks with If-Range: \(resume)")
        #expect(resume.status == 206, "\(resume)")
        #expect(resume.bytesSent == Int64(SampleModel.bigSize) - kept, "only the missing bytes were fetched: \(resume)")
        let total = w.nginx.accessLog().reduce(Int64(0)) { $0 + $1.bytesSent }
        #expect(total >= Int64(SampleModel.totalSize) && total <= Int64(SampleModel.totalSize) + (256 << 10),
                "bytes sent over both runs ≈ the model's size (\(SampleModel.totalSize)), got \(total): \(w.nginx.accessLog())")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        let v = try w.run(["verify", SampleModel.id], catalog: fast)
        #expect(v.status == 0, "\(v)")
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
    }

    @Test("one corrupted installed byte: verify exits 4 naming the file; verify --repair re-fetches only that file; verify exits 0",
          arguments: ["start", "middle", "end"])
    func corruptByteIsFoundAndRepaired(position: String) throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let d = try w.run(["download", SampleModel.id], catalog: catalog)
        try #require(d.status == 0, "\(d)")

        let victim = "sub/tokenizer.bin"
        let path = w.installFolder(SampleModel.id) + "/" + victim
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        let offset = position == "start" ? 0 : position == "middle" ? data.count / 2 : data.count - 1
        data[offset] ^= 0x01
        try data.write(to: URL(fileURLWithPath: path))

        let bad = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(bad.status == 4, "\(bad)")
        #expect(bad.stdout.contains(victim) && bad.stdout.contains("SHA-256"), "the report names the bad file\n\(bad)")
        #expect(bad.stderr.contains("--repair"), "the error says what to do next\n\(bad)")

        w.nginx.clearLog()
        let repair = try w.run(["verify", SampleModel.id, "--repair"], catalog: catalog)
        #expect(repair.status == 0, "\(repair)")
        #expect(repair.stdout.contains("re-fetched"), "\(repair)")
        let fetched = w.nginx.accessLog()
        #expect(fetched.count == 1 && fetched.first?.path == "/\(SampleModel.folder)/\(victim)" && fetched.first?.status == 200,
                "only the bad file is fetched again: \(fetched)")

        let good = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(good.status == 0, "\(good)")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
    }

    @Test("delete prints the space freed and removes folder, record and partial data; a second delete has nothing to delete")
    func deleteRemovesEverything() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        let d = try w.run(["download", SampleModel.id], catalog: catalog)
        try #require(d.status == 0, "\(d)")

        let del = try w.run(["delete", SampleModel.id], catalog: catalog)
        #expect(del.status == 0, "\(del)")
        let line = try #require(del.stdoutLines.first { $0.hasPrefix("\(SampleModel.id): deleted, ") && $0.hasSuffix(" freed") }, "\(del)")
        let amount = line.dropFirst("\(SampleModel.id): deleted, ".count).dropLast(" freed".count)
        let freed = try #require(Check.parseHumanBytes(amount), "\(line)")
        let size = Double(SampleModel.totalSize)
        #expect(freed >= size * 0.95 && freed <= size * 1.1 + 65536, "freed \(amount) for a \(SampleModel.totalSize)-byte model")
        #expect(!Disk.exists(w.installFolder(SampleModel.id)))
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
        #expect(try !w.isInstalled(SampleModel.id, catalog: catalog))
        let v = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(v.status == 1 && v.stderr.contains("not installed"), "\(v)")

        let again = try w.run(["delete", SampleModel.id], catalog: catalog)
        #expect(again.status == 0 && again.stdout.contains("\(SampleModel.id): nothing to delete"), "\(again)")

        // Partial data counts too: delete removes it.
        let p = try w.start(["download", SampleModel.id], catalog: slow)
        try interruptAfter(p, wrote: 64 << 10, of: w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)")
        let delPartial = try w.run(["delete", SampleModel.id], catalog: catalog)
        #expect(delPartial.status == 0 && delPartial.stdout.contains("\(SampleModel.id): deleted, "), "\(delPartial)")
        #expect(w.leftovers.isEmpty, "delete removes the partial data: \(w.leftovers)")
        try w.expectRecordsIntact(catalog: catalog)
    }

    @Test("gc removes an orphan .partial/<unknown-id> folder, keeps another model's resume data and the installed model")
    func gcRemovesOrphans() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        try w.addModel("m2", files: [("weights.bin", 2 << 20)])
        let catalog = try w.mergedCatalog([try w.filesCatalog(SampleModel.folder, id: SampleModel.id),
                                           try w.filesCatalog("m2", id: "m2", slow: true)])
        let d = try w.run(["download", SampleModel.id], catalog: catalog)
        try #require(d.status == 0, "\(d)")
        let p = try w.start(["download", "m2"], catalog: catalog)
        let kept = try interruptAfter(p, wrote: 64 << 10, of: w.partialRoot + "/m2/weights.bin")

        let orphan = w.partialRoot + "/ghost-model"
        try FileManager.default.createDirectory(atPath: orphan + "/sub", withIntermediateDirectories: true)
        try Disk.randomBytes(100_000).write(to: URL(fileURLWithPath: orphan + "/sub/weights.bin"))

        let gc = try w.run(["gc"], catalog: catalog)
        #expect(gc.status == 0, "\(gc)")
        #expect(gc.stdout.contains("removed \(orphan)") && gc.stdout.contains("freed"), "\(gc)")
        #expect(!Disk.exists(orphan), "the orphan is gone")
        #expect(Disk.fileSize(w.partialRoot + "/m2/weights.bin") == kept, "a known model's resume data is kept")
        let v = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(v.status == 0, "\(v)")

        let again = try w.run(["gc"], catalog: catalog)
        #expect(again.status == 0 && again.stdout.contains("nothing to collect"), "\(again)")
    }

    @Test("--mirror http://127.0.0.1:<port> rewrites a catalog whose baseURL is https://example.invalid/… so the download goes to nginx")
    func mirrorRewritesOrigin() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, baseURL: "https://example.invalid/\(SampleModel.folder)/")
        let text = try String(contentsOfFile: catalog, encoding: .utf8)
        #expect(text.contains("https://example.invalid/\(SampleModel.folder)/") && !text.contains("127.0.0.1"))

        let r = try w.run(["download", SampleModel.id, "--mirror", w.nginx.origin], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        let paths = Set(w.nginx.accessLog().filter { $0.status == 200 }.map(\.path))
        #expect(paths == Set(SampleModel.files.map { "/\(SampleModel.folder)/\($0.0)" }), "\(w.nginx.accessLog())")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        let v = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(v.status == 0, "\(v)")
    }

    @Test("an archive model (tar.bz2 made by tar, one top folder, stripComponents 1) installs byte-identical and verifies")
    func archiveModelInstalls() throws {
        let w = try World(); defer { w.remove() }
        let source = try ArchiveModel.make(in: w)
        let r = try w.run(["download", ArchiveModel.id, "--json"], catalog: source.catalog)
        #expect(r.status == 0, "\(r)")
        let events = Check.jsonLines(r)
        let phases = events.filter { $0["event"] as? String == "phase" }.compactMap { $0["phase"] as? String }
        #expect(phases == ["resolve", "download", "verify", "unpack", "install"], "\(r)")
        #expect(events.last?["event"] as? String == "done", "\(r)")
        w.expectInstalledMatches(ArchiveModel.id, source: source.tree)
        #expect(try w.isInstalled(ArchiveModel.id, catalog: source.catalog))
        let v = try w.run(["verify", ArchiveModel.id], catalog: source.catalog)
        #expect(v.status == 0 && v.stdout.contains("ok, 3 files verified"), "\(v)")
        let log = w.nginx.accessLog()
        #expect(log.count == 1 && log[0].path == "/\(ArchiveModel.archivePath)" && log[0].status == 200, "\(log)")
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
    }
}

/// A model shipped as a `tar.bz2` built with `tar`: top folder `model-1.0/`, three files.
enum ArchiveModel {
    static let id = "arch"
    static let archivePath = "archives/arch.tar.bz2"

    /// Builds the tree and the archive, puts the archive on the mirror, writes the catalog.
    /// `slowCatalog` fetches the same archive through nginx's `/slow/` location.
    static func make(in w: World) throws -> (tree: String, catalog: String, slowCatalog: String) {
        let src = w.root + "/src"
        let tree = src + "/model-1.0"
        try FileManager.default.createDirectory(atPath: tree + "/tokenizer", withIntermediateDirectories: true)
        try Disk.randomBytes(1 << 20).write(to: URL(fileURLWithPath: tree + "/weights.bin"))
        try Data(#"{"layers": 2}"#.utf8).write(to: URL(fileURLWithPath: tree + "/config.json"))
        try Disk.randomBytes(20_000).write(to: URL(fileURLWithPath: tree + "/tokenizer/vocab.txt"))
        try FileManager.default.createDirectory(atPath: w.nginx.mirror + "/archives", withIntermediateDirectories: true)
        let tar = try World.tool("/usr/bin/env", ["tar", "-cjf", w.nginx.mirror + "/" + archivePath, "-C", src, "model-1.0"])
        try #require(tar.status == 0, "\(tar)")
        let files = try w.fileEntries(of: tree)
        let catalog = try w.archiveCatalog(id: id, archivePath: archivePath, files: files)
        let slowCatalog = try w.archiveCatalog(id: id, archivePath: archivePath, files: files, slow: true)
        return (tree, catalog, slowCatalog)
    }
}
