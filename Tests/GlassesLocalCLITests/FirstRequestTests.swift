import Foundation
import GlassesTestSupport
import Testing

/// What a download makes durable before its first request (issue 30: the first byte
/// waited for ten flushes). Counted from strace, never timed: the time is measured by
/// `Scripts/bench firstbyte`.
///
/// A records commit is SQLite's sync of `records.sqlite3-wal` after it appended frames (the
/// 32-byte header a restarted WAL gets first is synced on its own: not a commit), or a sync
/// of `records.sqlite3` itself (a rollback-journal commit). The first commit of a process
/// costs three flushes whatever it holds: the WAL's header, the folder (SQLite syncs the
/// folder of a WAL file once per process) and the commit. The one commit a download needs
/// before it asks for bytes is its start (`DownloadRecorder.begin`: the reservation and the
/// partial record, P15: recorded before anything moves).
struct FlushesBeforeFirstRequest: CustomStringConvertible {
    /// Records commits, as above.
    var commits = 0
    /// Every fsync, fdatasync and syncfs, with what it flushed.
    var flushes: [String] = []
    /// Whether the trace reached a connection to a server at all.
    var connected = false

    var description: String {
        "\(commits) records commit(s), \(flushes.count) flush(es) before the first connection: \(flushes.joined(separator: ", "))"
    }

    /// Reads an `strace -f -y -e trace=pwrite64,fsync,fdatasync,syncfs,connect` log up to
    /// the first connection to an internet address.
    init(trace: String) {
        var walFrames = false
        let call = try? NSRegularExpression(pattern: #"(pwrite64|fdatasync|fsync|syncfs|connect)\((\d+)(<([^>]*)>)?(.*)$"#)
        for line in trace.split(separator: "\n").map(String.init) {
            guard !line.contains(" resumed>"),
                  let match = call?.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)),
                  let nameRange = Range(match.range(at: 1), in: line) else { continue }
            let name = String(line[nameRange])
            let path = Range(match.range(at: 4), in: line).map { String(line[$0]) } ?? "?"
            let rest = Range(match.range(at: 5), in: line).map { String(line[$0]) } ?? ""
            switch name {
            case "connect":
                if rest.contains("AF_INET") { connected = true; return }
            case "pwrite64":
                guard path.hasSuffix("/records.sqlite3-wal") else { continue }
                // `…, <count>, <offset>) = n` (the buffer before may hold any byte): the WAL
                // header is 32 bytes at offset 0.
                if !rest.contains(", 32, 0) = ") { walFrames = true }
            default:
                flushes.append("\(name) \((path as NSString).lastPathComponent)")
                if path.hasSuffix("/records.sqlite3-wal") && walFrames {
                    commits += 1
                    walFrames = false
                } else if path.hasSuffix("/records.sqlite3") {
                    commits += 1
                }
            }
        }
    }
}

@Suite("A download's first request: one records commit before it", .ownThreads, .networkGuard)
struct FirstRequestTests {
    /// `download <id>` under strace, with what it flushed before its first connection.
    static func tracedDownload(_ w: World, catalog: String, name: String,
                               sourceLocation: SourceLocation = #_sourceLocation) throws -> FlushesBeforeFirstRequest {
        let trace = w.root + "/\(name).trace"
        let arguments = ["-f", "-y", "-e", "trace=pwrite64,fsync,fdatasync,syncfs,connect", "-o", trace, try w.binary,
                         "--catalog", catalog, "--store", w.store, "--quiet", "download", SampleModel.id]
        let r = try Sandbox.runProcess("/usr/bin/strace", arguments, environment: w.environment(), ioDirectory: w.root + "/io",
                                       currentDirectory: w.cwd, sourceLocation: sourceLocation)
        try #require(r.status == 0, "\(r)", sourceLocation: sourceLocation)
        let counted = FlushesBeforeFirstRequest(trace: try String(contentsOfFile: trace, encoding: .utf8))
        #expect(counted.connected, "the trace shows no connection: \(counted)", sourceLocation: sourceLocation)
        return counted
    }

    @Test("a new store: the records are created whole (one file, one folder sync), then one commit, before the first request")
    func newStore() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let counted = try Self.tracedDownload(w, catalog: catalog, name: "new-store")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        // Before: the WAL switch (a rollback-journal commit), the migrations, the catalog
        // version and the start, four commits in ten flushes.
        #expect(counted.commits == 1, "\(counted)")
        // The store's folders (1), the new records file and its folder (2), the start (3).
        #expect(counted.flushes.count <= 6, "\(counted)")
        // The new store's records say which catalog version they started from (P7).
        let history = try w.run(["history", "--json"], catalog: catalog)
        #expect(history.stdout.contains("catalog version 1 accepted"), "\(history)")
    }

    @Test("a store in use: exactly one commit (the download's start) before the first request")
    func storeInUse() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let first = try w.run(["download", SampleModel.id], catalog: catalog)
        try #require(first.status == 0, "\(first)")
        let deleted = try w.run(["delete", SampleModel.id], catalog: catalog)
        try #require(deleted.status == 0, "\(deleted)")
        let counted = try Self.tracedDownload(w, catalog: catalog, name: "store-in-use")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        #expect(counted.commits == 1, "\(counted)")
        #expect(counted.flushes.count <= 3, "\(counted)")
    }
}
