import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP — a closed terminal, a dropped ssh session — stops a download the way Ctrl-C
/// does: the transfer is cancelled, the partial data kept, the exit code is 130, and the
/// next download resumes where it stopped. Before, SIGHUP's default action killed the
/// process outright.
@Suite("Reliability: SIGHUP and a hung-up terminal", .ownThreads, .networkGuard)
struct HangupTests {
    /// The next download after an interruption resumes at the byte where it stopped and
    /// fetches only the rest.
    static func expectResumes(_ w: World, kept: Int64, catalog: String,
                              sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try w.run(["download", SampleModel.id], catalog: catalog)
        #expect(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let log = w.nginx.requests(for: "\(SampleModel.folder)/\(SampleModel.big)")
        let resume = try #require(log.last, "\(w.nginx.accessLog())", sourceLocation: sourceLocation)
        #expect(resume.rangeStart == kept, "resumed at the byte where it stopped (\(kept)): \(resume)", sourceLocation: sourceLocation)
        #expect(resume.status == 206, "\(resume)", sourceLocation: sourceLocation)
        #expect(resume.bytesSent == Int64(SampleModel.bigSize) - kept, "only the missing bytes were fetched: \(resume)",
                sourceLocation: sourceLocation)
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)", sourceLocation: sourceLocation)
    }

    static func tool(_ name: String) -> String { PackageRoot.path() + "/Tests/Tools/" + name }

    /// Runs `download` on a pseudo-terminal that hangs up once 128 KiB of the big file are
    /// on disk (Tests/Tools/hangup.py); returns its report.
    static func downloadOnHangingTerminal(_ w: World, catalog: String, nohup: Bool = false,
                                          sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let partial = w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)"
        let r = try Sandbox.runProcess("/usr/bin/env", ["python3", tool("hangup.py")] + (nohup ? ["--nohup"] : [])
                                       + [partial, "\(128 << 10)", "60", "--",
                                          try w.binary, "--catalog", catalog, "--store", w.store, "download", SampleModel.id],
                                       environment: w.environment(), ioDirectory: w.root + "/io", currentDirectory: w.cwd,
                                       sourceLocation: sourceLocation)
        try #require(r.status == 0, "hangup.py failed\n\(r)", sourceLocation: sourceLocation)
        let report = try r.jsonObject(sourceLocation: sourceLocation)
        #expect(report["hungUp"] as? Bool == true, "the download never wrote 128 KiB before the hang-up\n\(r)",
                sourceLocation: sourceLocation)
        return report
    }

    @Test("kill -HUP mid-download exits 130 and keeps the partial; the next download resumes with a Range request")
    func sighupKeepsPartial() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        let fast = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let partial = w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)"

        // Started with SIGHUP unblocked and at its default action, as from a shell.
        let p = try CLIProcess(binary: "/usr/bin/env",
                               arguments: ["python3", Self.tool("default-signals.py"), try w.binary,
                                           "--catalog", slow, "--store", w.store, "download", SampleModel.id],
                               environment: w.environment(), ioDirectory: w.root + "/io", currentDirectory: w.cwd)
        let kept = try interruptAfter(p, wrote: 128 << 10, of: partial, signal: SIGHUP)
        #expect(kept < Int64(SampleModel.bigSize), "the slowed download was interrupted before it finished")
        #expect(try !w.isInstalled(SampleModel.id, catalog: fast))
        let history = try w.run(["history", SampleModel.id], catalog: fast)
        #expect(history.stdout.contains("interrupted"), "the history records the interruption\n\(history)")
        try Self.expectResumes(w, kept: kept, catalog: fast)
    }

    @Test("the terminal hangs up mid-download (SIGHUP, then every write fails with EIO): exit 130, partial kept, resume continues")
    func terminalHangupKeepsPartial() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        let fast = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let partial = w.partialRoot + "/\(SampleModel.id)/\(SampleModel.big)"

        // The download runs on a pseudo-terminal (progress bar and all) that hangs up once
        // 128 KiB are on disk.
        let report = try Self.downloadOnHangingTerminal(w, catalog: slow)
        #expect(report["signal"] is NSNull, "killed by signal \(report["signal"] ?? "?") instead of exiting\n\(report)")
        #expect(report["exitCode"] as? Int == 130, "a hung-up terminal must exit 130 like Ctrl-C\n\(report)")
        let kept = Disk.fileSize(partial) ?? 0
        #expect(kept >= 128 << 10 && kept < Int64(SampleModel.bigSize), "the partial data was kept: \(kept) bytes")
        #expect(try !w.isInstalled(SampleModel.id, catalog: fast))
        try Self.expectResumes(w, kept: kept, catalog: fast)
    }

    @Test("under nohup (SIGHUP ignored) a hung-up terminal does not stop the download: it finishes, exit 0, its output dropped without a crash")
    func nohupOutlivesTheTerminal() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let slow = try w.filesCatalog(SampleModel.folder, id: SampleModel.id, slow: true)
        let fast = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)

        let report = try Self.downloadOnHangingTerminal(w, catalog: slow, nohup: true)
        #expect(report["signal"] is NSNull, "killed by signal \(report["signal"] ?? "?") (every write after the hang-up fails with EIO)\n\(report)")
        #expect(report["exitCode"] as? Int == 0, "\(report)")
        #expect(try w.isInstalled(SampleModel.id, catalog: fast))
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        let big = w.nginx.requests(for: "\(SampleModel.folder)/\(SampleModel.big)")
        #expect(big.count == 1 && big.first?.status == 200, "one uninterrupted transfer: \(big)")
    }
}
