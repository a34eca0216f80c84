import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A damaged `records.sqlite3` (overwritten, truncated): the command line agrees with the
/// library, whose `models()` still lists the catalog. `list` shows every model with the
/// state "unknown (records damaged)" and exits 1, `doctor` explains the way out, and the
/// damaged file is never deleted or rewritten. Following doctor's advice recovers the
/// store without fetching the bytes already on disk. Before, every command (list
/// included) only printed the error and exited 1.
@Suite("glasses-local: a damaged records database", .ownThreads, .networkGuard)
struct DamagedRecordsTests {
    enum Damage: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case garbage, truncatedToOnePage, truncatedInsideHeader
        var testDescription: String { rawValue }

        func apply(to path: String) throws {
            switch self {
            case .garbage:
                var state: UInt64 = 0x2545_F491_4F6C_DD1D
                let bytes = (0..<20_000).map { _ -> UInt8 in
                    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    return UInt8(truncatingIfNeeded: state >> 33)
                }
                try Data(bytes).write(to: URL(fileURLWithPath: path))
            case .truncatedToOnePage:
                #expect(truncate(path, 4096) == 0)
            case .truncatedInsideHeader:
                #expect(truncate(path, 60) == 0)
            }
        }
    }

    /// A store with a records database (made by `doctor`), then damaged.
    static func damagedStore(_ sb: Sandbox, _ damage: Damage) throws -> (path: String, bytes: Data) {
        let setup = try sb.run(["doctor"])
        try #require(setup.stdout.contains("ok   records"), "\(setup)")
        let path = sb.store + "/records.sqlite3"
        try damage.apply(to: path)
        return (path, try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test("list shows the catalog with the state 'unknown (records damaged)' and exits 1; the file is left as it was",
          arguments: Damage.allCases)
    func listShowsUnknownStates(_ damage: Damage) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (path, bytes) = try Self.damagedStore(sb, damage)

        let r = try sb.run(["list"])
        #expect(r.status == 1, "\(r)")
        for id in Fixtures.allIds {
            let row = r.stdoutLines.first { $0.hasPrefix(id + " ") }
            #expect(row?.contains("unknown (records damaged)") == true, "\(id) is listed with an unknown state\n\(r)")
        }
        #expect(r.stderr.contains("Error: records database \(path) is damaged"), "\(r)")
        #expect(r.stderr.contains("mv '\(path)'*"), "the error says how to move it aside\n\(r)")
        #expect(r.stderr.contains("glasses-local doctor"), "\(r)")

        let j = try sb.run(["list", "--json"])
        #expect(j.status == 1, "\(j)")
        let doc = try j.jsonObject()
        #expect(doc["recordsDamaged"] as? Bool == true, "\(j)")
        #expect(doc["catalogVersion"] as? Int == 2 && doc["store"] as? String == sb.store, "\(j)")
        let models = try #require(doc["models"] as? [[String: Any]], "\(j)")
        #expect(models.compactMap { $0["id"] as? String } == Fixtures.allIds, "\(j)")
        let keys: Set<String> = ["id", "kind", "displayName", "requiredMb", "autoEligible", "isInstalled",
                                 "downloadBytes", "installedBytes", "fit", "state"]
        for model in models {
            #expect(keys.isSubset(of: model.keySet), "\(model)")
            #expect(model["state"] as? String == "unknown", "\(model)")
            #expect(model["isInstalled"] as? Bool == false, "as the library's models() answers\n\(model)")
        }
        let error = try #require(doc["error"] as? [String: Any], "\(j)")
        #expect(error["code"] as? String == "recordsDamaged" && error["exitCode"] as? Int == 1, "\(j)")
        #expect(j.stderr.contains("Error: records database"), "the human message on stderr\n\(j)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the damaged database must not be rewritten")
    }

    @Test("doctor names the damaged file, says what it means and how to recover, and changes nothing", arguments: Damage.allCases)
    func doctorExplains(_ damage: Damage) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (path, bytes) = try Self.damagedStore(sb, damage)

        let r = try sb.run(["doctor"])
        #expect(r.status == 1, "\(r)")
        #expect(r.stdoutLines.contains { $0.hasPrefix("FAIL records: \(path) is damaged or not a database") }, "\(r)")
        #expect(r.stdout.contains("unknown (records damaged)"), "doctor says what list shows\n\(r)")
        #expect(r.stdout.contains("mkdir '\(sb.store)/Damaged-records' && mv '\(path)'* '\(sb.store)/Damaged-records/'"), "\(r)")
        #expect(r.stdout.contains("install records and history are lost"), "\(r)")
        #expect(r.stdout.contains("No model folder is on disk"), "\(r)")

        let j = try sb.run(["doctor", "--json"])
        #expect(j.status == 1, "\(j)")
        let records = try #require(try j.jsonObject()["records"] as? [String: Any], "\(j)")
        #expect(records["damaged"] as? Bool == true, "\(j)")
        #expect((records["moveAsideCommand"] as? String)?.contains("mv '\(path)'*") == true, "\(j)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the damaged database must not be rewritten")
        #expect(FileManager.default.fileExists(atPath: path))
    }
}

/// The recovery doctor describes, done exactly as it says, against a real nginx: the
/// installed model's bytes are re-verified from disk and nothing is fetched again.
@Suite("glasses-local: recovering from a damaged records database", .ownThreads, .networkGuard)
struct DamagedRecordsRecoveryTests {
    /// Runs the move-aside line `doctor` printed, as a user would paste it.
    static func moveAsideAsDoctorSays(_ w: World, _ doctor: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let lines = doctor.stdoutLines
        let intro = try #require(lines.firstIndex { $0.contains("To recover, move it aside") }, "\(doctor)", sourceLocation: sourceLocation)
        try #require(intro + 1 < lines.count, "\(doctor)", sourceLocation: sourceLocation)
        let command = lines[intro + 1].trimmingCharacters(in: .whitespaces)
        #expect(command.hasPrefix("mkdir "), "\(doctor)", sourceLocation: sourceLocation)
        let sh = try Sandbox.runProcess("/bin/sh", ["-c", command], environment: w.environment(), ioDirectory: w.root + "/io")
        try #require(sh.status == 0, "\(sh)", sourceLocation: sourceLocation)
    }

    @Test("an archive-installed model: doctor says it is fetched again, and after the recovery it is, in one request")
    func archiveModelIsFetchedAgain() throws {
        let w = try World(); defer { w.remove() }
        let source = try ArchiveModel.make(in: w)
        let d = try w.run(["download", ArchiveModel.id], catalog: source.catalog)
        try #require(d.status == 0, "\(d)")
        let archiveSize = try #require(Disk.fileSize(w.nginx.mirror + "/" + ArchiveModel.archivePath))
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: w.store + "/records.sqlite3"))

        let doctor = try w.run(["doctor"], catalog: source.catalog)
        #expect(doctor.status == 1, "\(doctor)")
        #expect(doctor.stdout.contains("\(ArchiveModel.id): installed from an archive that was not kept; 'glasses-local download \(ArchiveModel.id)' fetches"),
                "\(doctor)")
        let j = try w.run(["doctor", "--json"], catalog: source.catalog)
        let recovery = try #require((try j.jsonObject()["records"] as? [String: Any])?["recovery"] as? [[String: Any]], "\(j)")
        #expect(recovery.count == 1 && recovery.first?["outcome"] as? String == "fetchedAgain", "\(j)")
        #expect((recovery.first?["fetchBytes"] as? NSNumber)?.int64Value == archiveSize, "\(j)")

        try Self.moveAsideAsDoctorSays(w, doctor)
        let again = try w.run(["doctor"], catalog: source.catalog)
        #expect(again.status == 0, "\(again)")
        w.nginx.clearLog()
        let r = try w.run(["download", ArchiveModel.id], catalog: source.catalog)
        #expect(r.status == 0, "\(r)")
        let log = w.nginx.accessLog()
        #expect(log.count == 1 && log.first?.status == 200 && log.first?.bytesSent == archiveSize,
                "the whole archive is fetched again, as doctor said: \(log)")
        w.expectInstalledMatches(ArchiveModel.id, source: source.tree)
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
    }

    @Test("doctor's move-aside line, then doctor, then download: the model is installed again with no byte fetched")
    func recoverAsDoctorSays() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel(SampleModel.folder, files: SampleModel.files)
        let catalog = try w.filesCatalog(SampleModel.folder, id: SampleModel.id)
        let d = try w.run(["download", SampleModel.id], catalog: catalog)
        try #require(d.status == 0, "\(d)")

        let recordsPath = w.store + "/records.sqlite3"
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: recordsPath))

        let list = try w.run(["list"], catalog: catalog)
        #expect(list.status == 1, "\(list)")
        #expect(list.stdoutLines.contains { $0.hasPrefix(SampleModel.id + " ") && $0.contains("unknown (records damaged)") }, "\(list)")

        let doctor = try w.run(["doctor"], catalog: catalog)
        #expect(doctor.status == 1, "\(doctor)")
        #expect(doctor.stdout.contains("\(SampleModel.id): 'glasses-local download \(SampleModel.id)' then re-verifies its 3 files from disk"),
                "doctor says the installed model is re-verified, not fetched\n\(doctor)")
        try Self.moveAsideAsDoctorSays(w, doctor)
        let aside = w.store + "/Damaged-records/records.sqlite3"
        #expect(FileManager.default.contents(atPath: aside) == Data(repeating: 0x5A, count: 8192), "the damaged file was kept, as it was")
        #expect(!FileManager.default.fileExists(atPath: recordsPath + "-wal") && !FileManager.default.fileExists(atPath: recordsPath + "-shm"),
                "its -wal/-shm files moved with it")

        let again = try w.run(["doctor"], catalog: catalog)
        #expect(again.status == 0, "\(again)")
        #expect(again.stderr.contains("repaired: \(SampleModel.id): folder") && again.stderr.contains("moved to .partial"), "\(again)")

        w.nginx.clearLog()
        let r = try w.run(["download", SampleModel.id], catalog: catalog)
        #expect(r.status == 0, "\(r)")
        #expect(w.nginx.accessLog().isEmpty, "nothing is fetched again: \(w.nginx.accessLog())")
        w.expectInstalledMatchesMirror(SampleModel.id, folder: SampleModel.folder)
        #expect(try w.isInstalled(SampleModel.id, catalog: catalog))
        let v = try w.run(["verify", SampleModel.id], catalog: catalog)
        #expect(v.status == 0, "\(v)")
    }
}

extension DamagedRecordsTests {
    /// History times no clock gives, in the order they are written (Python literals), and
    /// what `history` shows for each: nil means "(unknown time)".
    static let hostileTimes: [(python: String, shown: String?)] = [
        ("1700000000", "2023-11-14T22:13:20Z"), ("float('inf')", nil), ("float('-inf')", nil), ("1e300", nil),
        ("-1e300", nil), ("-1.5", nil), ("253402300800.0", nil), ("9223372036854775807", nil),
        ("-9223372036854775808", nil), ("-1", nil),
    ]
    /// Text a writer that ignored the schema could leave there: shown as some time or "(unknown time)".
    static let hostileTexts = ["NaN", "inf", "yesterday", ""]

    @Test("a records database holding hostile timestamps (another program wrote them): history, list and doctor answer, and a time that is not one reads '(unknown time)'")
    func hostileTimestamps() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let setup = try sb.run(["doctor"])
        try #require(setup.stdout.contains("ok   records"), "\(setup)")
        let path = sb.store + "/records.sqlite3"
        // Python's sqlite3, apart from the code under test: STRICT is taken off the history
        // (a writer that ignores the schema), then every time is written.
        let script = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("PRAGMA writable_schema=ON")
            db.execute("UPDATE sqlite_schema SET sql = replace(sql, ') STRICT', ')') WHERE name = 'events'")
            version = db.execute("PRAGMA schema_version").fetchone()[0]
            db.execute("PRAGMA schema_version = %d" % (version + 1))
            db.execute("PRAGMA writable_schema=OFF")
            db.close()
            db = sqlite3.connect(sys.argv[1])
            times = [\(Self.hostileTimes.map(\.python).joined(separator: ", "))]
            texts = [\(Self.hostileTexts.map { "'\($0)'" }.joined(separator: ", "))]
            for n, t in enumerate(times):
                db.execute("INSERT INTO events (at, model_id, event, detail) VALUES (?, 'x', 'verified', ?)", (t, "hostile time %d" % n))
            for n, t in enumerate(texts):
                db.execute("INSERT INTO events (at, model_id, event, detail) VALUES (?, 'x', 'verified', ?)", (t, "hostile text %d" % n))
            db.commit()
            print(db.execute("SELECT count(*) FROM events WHERE detail LIKE 'hostile %'").fetchone()[0])
            """
        let write = try World.tool("/usr/bin/env", ["python3", "-c", script, path])
        try #require(write.status == 0 && write.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "\(Self.hostileTimes.count + Self.hostileTexts.count)",
                     "writing the hostile times: \(write)")

        let json = try sb.run(["history", "--json", "--limit", "1000"])
        #expect(json.status == 0, "\(json)")
        let events = try #require(try json.jsonObject()["events"] as? [[String: Any]], "\(json)")
        func shown(_ detail: String) -> String? { events.first { $0["detail"] as? String == detail }?["at"] as? String }
        for (n, time) in Self.hostileTimes.enumerated() {
            #expect(shown("hostile time \(n)") == (time.shown ?? "(unknown time)"), "\(time.python)\n\(json.stdout.prefix(3000))")
        }
        let isoShape = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z/
        for n in Self.hostileTexts.indices {
            let at = shown("hostile text \(n)") ?? "<missing>"
            #expect(at == "(unknown time)" || at.wholeMatch(of: isoShape) != nil, "'\(Self.hostileTexts[n])' shown as \(at)")
        }

        let text = try sb.run(["history", "--limit", "1000"])
        #expect(text.status == 0, "\(text)")
        let rows = text.stdoutLines.filter { $0.contains("hostile ") }
        #expect(rows.count == Self.hostileTimes.count + Self.hostileTexts.count, "\(text)")
        for row in rows {
            let time = row.prefix { $0 != " " }
            #expect(row.hasPrefix("(unknown time)") || String(time).wholeMatch(of: isoShape) != nil, "a row starts with a time: \(row)")
            #expect(!row.lowercased().contains("inf") && !row.lowercased().contains("nan") && !row.contains("e+"), "no raw number is shown: \(row)")
        }

        let list = try sb.run(["list", "--json"])
        let listed = try list.jsonObject()["models"] as? [Any]
        #expect(list.status == 0 && listed?.count == Fixtures.allIds.count, "\(list)")
        let doctor = try sb.run(["doctor", "--json"])
        #expect(doctor.status == 0, "\(doctor)")
        let records = try doctor.jsonObject()["records"] as? [String: Any]
        #expect(records?["integrityCheck"] as? String == "ok", "\(doctor)")
    }
}
