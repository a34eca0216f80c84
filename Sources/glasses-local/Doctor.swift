import Foundation
import LocalModelKit

/// `glasses-local doctor`: every check a person needs before filing a bug.
enum Doctor {
    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let c = context.console
        var checks: [(name: String, ok: Bool, detail: String)] = []
        var json: [(key: String, value: JSONValue)] = []

        let engine = try context.engine(openExisting: false)
        let layout = engine.layout
        json.append(("store", .string(layout.root)))

        // Store + records (opening repairs leftovers).
        var records: Records?
        do {
            records = try context.openStore()
            checks.append(("store", true, "\(layout.root) is writable"))
        } catch {
            checks.append(("store", false, error.message))
        }
        if let space = try? FilesystemSpace.of(path: layout.root) {
            json.append(("availableBytes", .int(space.availableBytes)))
            json.append(("totalBytes", .int(space.totalBytes)))
            checks.append(("free space", true, "\(Format.bytes(space.availableBytes)) available of \(Format.bytes(space.totalBytes))"))
        }

        // Doctor lists ignored overrides as failed checks: no separate warning line on stderr.
        context.memoryProbe.reportedElsewhere()
        let memory = engine.probe.memory()
        json.append(("memory", ["physicalMb": JSONValue(memory.physicalMb), "availableMb": JSONValue(memory.availableMb),
                                "classBudgetMb": JSONValue(Int(Double(memory.physicalMb) * engine.memoryShare)),
                                "source": .string(memory.source),
                                "overrideProblems": Commands.overrideProblemsJSON(memory.overrideProblems)]))
        checks.append(("memory", true, "\(Format.mb(memory.physicalMb)) physical, \(Format.mb(memory.availableMb)) available now (\(memory.source))"))
        for problem in memory.overrideProblems {
            checks.append(("memory override", false, problem.description))
        }

        var recordsJSON: [(key: String, value: JSONValue)] = [("path", .string(layout.recordsPath))]
        if let records {
            do {
                let integrity = try records.integrityCheck()
                let mode = try records.journalMode()
                let version = try records.userVersion()
                let recordedCatalog = try records.read { try $0.highestCatalogVersion() }
                let installs = try records.installs()
                recordsJSON += [("integrityCheck", .string(integrity)), ("journalMode", .string(mode)),
                                ("schemaVersion", JSONValue(version)), ("installs", JSONValue(installs.count))]
                checks.append(("records", integrity == "ok" && mode == "wal",
                               "integrity_check \(integrity), journal_mode \(mode), schema \(version), \(installs.count) record(s)"))
                json.append(("storeCatalogVersion", JSONValue(recordedCatalog)))
            } catch {
                checks.append(("records", false, "\(error)"))
            }
        }
        recordsJSON.append(("sqliteVersion", .string(SQLiteConnection.libraryVersion)))
        json.append(("libraries", ["sqlite": .string(SQLiteConnection.libraryVersion), "curl": .string(TransferLibrary.curlVersion),
                                   "archive": .string(ArchiveExtractor.libraryVersion)]))
        checks.append(("libraries", true, "SQLite \(SQLiteConnection.libraryVersion), \(TransferLibrary.curlVersion), \(ArchiveExtractor.libraryVersion)"))
        json.append(("records", .object(recordsJSON)))

        let catalog = engine.catalog
        json.append(("catalog", ["source": .string(context.catalogSource), "catalogVersion": JSONValue(catalog.catalogVersion),
                                 "models": JSONValue(catalog.models.count)]))
        checks.append(("catalog", true, "version \(catalog.catalogVersion) from \(context.catalogSource), \(catalog.models.count) models"))

        json.append(("repairs", .array(context.repairs.map { .string($0.description) })))
        let ok = checks.allSatisfy(\.ok)
        json.append(("ok", .bool(ok)))
        json.append(("checks", .array(checks.map { ["name": .string($0.name), "ok": .bool($0.ok), "detail": .string($0.detail)] })))

        if c.json {
            c.printJSON(.object(json))
        } else {
            for check in checks {
                // Failures reach stderr even with --quiet: "print only errors".
                if check.ok { c.say("ok   \(check.name): \(check.detail)") } else if c.quiet { c.err("FAIL \(check.name): \(check.detail)") } else { c.say("FAIL \(check.name): \(check.detail)") }
            }
            for repair in context.repairs { c.say("     repaired: \(repair)") }
            c.say(ok ? "\nAll checks passed." : "\nSome checks failed; each line says what to do.")
        }
        return ok ? .ok : .failure
    }
}
