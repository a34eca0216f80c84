import Foundation
import GlassesTestSupport
import Testing

/// The built `glasses-local` run as a user would: stdout, stderr and exit code of
/// `list`, `info`, `fit`, `auto`, `doctor` and `history`, each test with its own store.
@Suite("glasses-local: models, fit, auto, doctor, history", .ownThreads, .networkGuard)
struct CLITests {
    static let lowMemory = ["EXTENTOS_MEMORY_MB": "4096", "EXTENTOS_MEMORY_AVAILABLE_MB": "4096"]

    // MARK: list

    @Test("list prints a table of the six catalog models in ladder order")
    func listText() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["list"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.contains("Catalog version 2"), "\(r)")
        #expect(r.stdout.contains(sb.store), "list names the store it looked at\n\(r)")
        let header = try #require(r.stdoutLines.first { $0.hasPrefix("ID ") }, "\(r)")
        for column in ["KIND", "NAME", "MEMORY", "DOWNLOAD", "STATE", "STORAGE"] {
            #expect(header.contains(column), "\(r)")
        }
        let rowIndex = Fixtures.allIds.map { id in r.stdoutLines.firstIndex { $0.hasPrefix(id + " ") } }
        #expect(rowIndex.allSatisfy { $0 != nil }, "every model has a row\n\(r)")
        let found = rowIndex.compactMap { $0 }
        #expect(found == found.sorted(), "rows are in catalog order\n\(r)")
        // The three auto-eligible rungs are marked.
        for id in ["local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b"] {
            #expect(r.stdoutLines.contains { $0.hasPrefix(id + " *") }, "\(id) is marked auto-eligible\n\(r)")
        }
        #expect(!r.stdoutLines.contains { $0.hasPrefix("local-qwen3-0.6b *") }, "\(r)")
        #expect(r.stdoutLines.contains { $0.hasPrefix("kokoro-en-v0_19") && $0.contains("voice") }, "\(r)")
    }

    @Test("list --json has the documented shape, six models, ladder order, exact sizes")
    func listJSON() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["list", "--json"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["catalogVersion"] as? Int == 2)
        #expect(doc["store"] as? String == sb.store)
        let models = try #require(doc["models"] as? [[String: Any]], "\(r)")
        #expect(models.count == 6)
        #expect(models.compactMap { $0["id"] as? String } == Fixtures.allIds)
        let required: Set<String> = ["id", "kind", "displayName", "requiredMb", "autoEligible", "isInstalled",
                                     "downloadBytes", "installedBytes", "fit"]
        for model in models {
            let id = model["id"] as? String ?? "?"
            #expect(required.isSubset(of: model.keySet), "\(id) lacks \(required.subtracting(model.keySet))")
            #expect(model["displayName"] as? String != nil && !(model["displayName"] as? String ?? "").isEmpty, "\(id)")
            #expect((model["requiredMb"] as? Int ?? 0) > 0, "\(id)")
            #expect(model["isInstalled"] as? Bool == false, "nothing is installed in a fresh store: \(id)")
            #expect((model["downloadBytes"] as? Int64 ?? 0) > 0, "\(id)")
            #expect((model["installedBytes"] as? Int64 ?? 0) > 0, "\(id)")
            let fit = try #require(model["fit"] as? [String: Any], "\(id)")
            #expect(fit.keySet.isSuperset(of: ["requiredMb", "availableMb", "fits"]), "\(id): \(fit)")
            #expect(fit["requiredMb"] as? Int != nil && fit["availableMb"] as? Int != nil, "\(id): \(fit)")
            #expect(fit["fits"] as? Bool != nil, "\(id): \(fit)")
            #expect(model["kind"] as? String == (id == "kokoro-en-v0_19" ? "voice" : "llm"), "\(id)")
            #expect(model["autoEligible"] as? Bool == ["local-qwen3-1.7b", "local-qwen3-4b", "local-qwen3-8b"].contains(id), "\(id)")
        }
        let big = try #require(models.first { $0["id"] as? String == "local-qwen3-8b" })
        #expect((big["downloadBytes"] as? NSNumber)?.int64Value == 4_623_782_544)
    }

    @Test("global options work before or after the command: --json list == list --json")
    func globalOptionsAnywhere() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let after = try sb.run(["list", "--store", sb.store, "--json"], env: Self.lowMemory)
        let before = try sb.run(["--json", "--store", sb.store, "list"], env: Self.lowMemory)
        #expect(after.status == 0 && before.status == 0, "\(after)\n\(before)")
        #expect(after.stderr.isEmpty && before.stderr.isEmpty, "\(after)\n\(before)")
        // Free space drifts while other tests write; everything else must be identical.
        let volatile: Set<String> = ["availableBytes", "availableMb", "fits"]
        let a = try canonicalJSON(after.json(), dropping: volatile)
        let b = try canonicalJSON(before.json(), dropping: volatile)
        #expect(a == b, "\(after)\n\(before)")
        #expect((try before.jsonObject())["models"] as? [Any] != nil)
    }

    @Test("read-only commands leave a store that was never written untouched")
    func readOnlyCommandsDoNotCreateTheStore() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        for args in [["list"], ["info", "local-qwen3-4b"], ["fit", "local-qwen3-4b"], ["auto"], ["history"]] {
            let r = try sb.run(args, env: Self.lowMemory)
            #expect(r.status == 0, "\(r)")
            #expect(r.stderr.isEmpty, "\(r)")
            #expect(!r.stdout.isEmpty, "\(r)")
            #expect(!FileManager.default.fileExists(atPath: sb.store), "`\(args.joined(separator: " "))` created \(sb.store)")
        }
    }

    // MARK: info

    @Test("info prints id, name, kind, sizes, file count, sources and state",
          arguments: [("kokoro-en-v0_19", 358, "voice"), ("local-qwen3-4b", 9, "llm")])
    func infoText(id: String, files: Int, kind: String) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["info", id], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdoutLines.first?.hasPrefix("\(id) — ") == true, "\(r)")
        #expect(r.stdout.contains("kind:           \(kind)"), "\(r)")
        #expect(r.stdout.contains("\(files) files"), "\(r)")
        #expect(r.stdout.contains("source 1:"), "\(r)")
        #expect(r.stdout.contains("https://"), "sources are shown\n\(r)")
        #expect(r.stdout.contains("not installed"), "\(r)")
        #expect(r.stdout.contains("memory needed:"), "\(r)")
    }

    @Test("info --json lists every file; their sizes add up to installedBytes",
          arguments: Fixtures.allIds)
    func infoJSON(id: String) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["info", id, "--json"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["id"] as? String == id)
        #expect(doc["isInstalled"] as? Bool == false)
        let files = try #require(doc["files"] as? [[String: Any]], "\(r.stdout.prefix(400))")
        #expect(files.count == (id == "kokoro-en-v0_19" ? 358 : 9))
        let total = files.reduce(Int64(0)) { $0 + ((($1["size"] as? NSNumber)?.int64Value) ?? 0) }
        #expect(total == (doc["installedBytes"] as? NSNumber)?.int64Value)
        #expect(files.allSatisfy { ($0["path"] as? String).map { !$0.isEmpty } == true })
        let fit = try #require(doc["fit"] as? [String: Any])
        #expect(fit["modelId"] as? String == id)
    }

    @Test("info of an unknown id: exit 5 naming the id; --json adds the error document on stdout")
    func infoUnknown() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let text = try sb.run(["info", "no-such-model"])
        #expect(text.status == 5, "\(text)")
        #expect(text.stdout.isEmpty, "\(text)")
        #expect(text.stderrLines.first?.hasPrefix("Error: ") == true, "\(text)")
        #expect(text.stderr.contains("no-such-model"), "\(text)")
        #expect(text.stderr.contains("glasses-local list"), "the message says what to do next\n\(text)")

        let json = try sb.run(["info", "no-such-model", "--json"])
        #expect(json.status == 5, "\(json)")
        #expect(json.stderr.contains("no-such-model"), "the human message stays on stderr\n\(json)")
        let doc = try json.jsonObject()
        #expect(doc.keySet == ["error"])
        let error = try #require(doc["error"] as? [String: Any], "\(json)")
        #expect(error["code"] as? String == "unknownModel")
        #expect(error["exitCode"] as? Int == 5)
        #expect((error["message"] as? String ?? "").contains("no-such-model"))
    }

    // MARK: fit

    @Test("fit of a small model: exit 0, text says it fits; --json has the documented shape")
    func fitFits() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let text = try sb.run(["fit", "local-qwen3-0.6b"])
        #expect(text.status == 0, "\(text)")
        #expect(text.stderr.isEmpty, "\(text)")
        #expect(text.stdout.hasPrefix("local-qwen3-0.6b: fits"), "\(text)")

        let r = try sb.run(["fit", "local-qwen3-0.6b", "--json"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc.keySet.isSuperset(of: ["modelId", "requiredMb", "availableMb", "fits"]), "\(r)")
        #expect(doc["modelId"] as? String == "local-qwen3-0.6b")
        #expect(doc["fits"] as? Bool == true)
        let requiredMb = try #require(doc["requiredMb"] as? Int)
        let availableMb = try #require(doc["availableMb"] as? Int)
        // Needed space counts the whole 335 MiB download plus a margin.
        #expect(requiredMb >= 351_383_618 >> 20)
        #expect(requiredMb <= availableMb)
    }

    @Test("fit of a 1 TiB model: exit 3, says it does not fit and what to do; --json fits false")
    func fitDoesNotFit() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let catalog = try sb.write("huge.json", Fixtures.catalog())
        let text = try sb.run(["fit", "huge-model", "--catalog", catalog])
        #expect(text.status == 3, "\(text)")
        #expect(!text.stderr.contains("Usage:"), "\(text)")
        let said = text.stdout + text.stderr
        #expect(said.contains("huge-model"), "\(text)")
        #expect(said.contains("does not fit"), "\(text)")
        #expect(said.contains("--store"), "the message suggests another store\n\(text)")

        let r = try sb.run(["--catalog", catalog, "fit", "huge-model", "--json"])
        #expect(r.status == 3, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["modelId"] as? String == "huge-model")
        #expect(doc["fits"] as? Bool == false)
        let requiredMb = try #require(doc["requiredMb"] as? Int)
        let availableMb = try #require(doc["availableMb"] as? Int)
        #expect(requiredMb >= 1_048_576, "1 TiB is 1,048,576 MiB")
        #expect(availableMb < requiredMb)
    }

    @Test("fit of an unknown id: exit 5 (also an id the custom catalog does not have)")
    func fitUnknown() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["fit", "no-such-model"])
        #expect(r.status == 5, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: ") && r.stderr.contains("no-such-model"), "\(r)")

        let catalog = try sb.write("huge.json", Fixtures.catalog())
        let other = try sb.run(["fit", "local-qwen3-8b", "--catalog", catalog, "--json"])
        #expect(other.status == 5, "\(other)")
        #expect(other.stderr.contains("local-qwen3-8b"), "\(other)")
        let error = try #require(try other.jsonObject()["error"] as? [String: Any], "\(other)")
        #expect(error["exitCode"] as? Int == 5)
        #expect(error["code"] as? String == "unknownModel")
    }

    // MARK: auto

    struct AutoCase: Sendable, CustomTestStringConvertible {
        var physicalMb: Int
        var availableMb: Int
        var reason: String
        var target: String?
        var classBudgetMb: Int
        var testDescription: String { "\(physicalMb) MB physical, \(availableMb) MB free → \(reason)" }
    }

    static let autoCases: [AutoCase] = [
        AutoCase(physicalMb: 4096, availableMb: 4096, reason: "weightsNotPresent", target: "local-qwen3-1.7b", classBudgetMb: 2048),
        AutoCase(physicalMb: 16000, availableMb: 16000, reason: "weightsNotPresent", target: "local-qwen3-8b", classBudgetMb: 8000),
        AutoCase(physicalMb: 2000, availableMb: 2000, reason: "belowQualityFloor", target: nil, classBudgetMb: 1000),
        AutoCase(physicalMb: 16000, availableMb: 1000, reason: "insufficientMemoryNow", target: "local-qwen3-8b", classBudgetMb: 8000),
    ]

    @Test("auto --json answers per device memory with the enum case name", arguments: autoCases)
    func autoJSON(_ c: AutoCase) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let env = ["EXTENTOS_MEMORY_MB": "\(c.physicalMb)", "EXTENTOS_MEMORY_AVAILABLE_MB": "\(c.availableMb)"]
        let r = try sb.run(["auto", "--json"], env: env)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc.keySet.isSuperset(of: ["modelId", "isLocal", "cloudReason", "downloadTarget", "steps"]), "\(r)")
        #expect(doc["modelId"] is NSNull, "nothing is installed, so no local model\n\(r)")
        #expect(doc["isLocal"] as? Bool == false)
        #expect(doc["cloudReason"] as? String == c.reason)
        if let target = c.target {
            #expect(doc["downloadTarget"] as? String == target)
        } else {
            #expect(doc["downloadTarget"] is NSNull, "\(r)")
        }
        let steps = try #require(doc["steps"] as? [[String: Any]], "\(r)")
        #expect(steps.first?["step"] as? Int == 1, "\(r)")
        #expect(steps.last?["step"] as? Int == (c.reason == "belowQualityFloor" ? 2 : 5), "\(r)")
        #expect(steps.allSatisfy { ($0["text"] as? String)?.isEmpty == false }, "\(r)")
        if c.reason != "belowQualityFloor" {
            // Step 2 names the class rung the budget allows.
            #expect(steps.first { $0["step"] as? Int == 2 }?["rungId"] as? String != nil, "\(r)")
        }
        let memory = try #require(doc["memory"] as? [String: Any], "\(r)")
        #expect(memory["classBudgetMb"] as? Int == c.classBudgetMb)
        #expect(memory["physicalMb"] as? Int == c.physicalMb)
    }

    @Test("auto keeps the finer reason: no download fits the storage → cloudReason insufficientStorage, with the SDK's weightsNotPresent and the shortfall beside it")
    func autoStorageBlocked() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        // One auto-eligible 1 TiB model: no store's free space holds it.
        let catalog = try sb.write("tib.json", Fixtures.catalog(id: "tib-llm").replacingOccurrences(of: #""autoEligible": false"#,
                                                                                                  with: #""autoEligible": true"#))
        let env = ["EXTENTOS_MEMORY_MB": "16000", "EXTENTOS_MEMORY_AVAILABLE_MB": "16000"]
        let r = try sb.run(["auto", "--json", "--catalog", catalog], env: env)
        #expect(r.status == 0, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc["cloudReason"] as? String == "insufficientStorage", "the command keeps its finer reason: \(r)")
        #expect(doc["cloudFallbackReason"] as? String == "weightsNotPresent", "the SDK's CloudFallbackReason: \(r)")
        #expect(doc["cloudDetail"] as? String == "insufficientStorage", "\(r)")
        #expect(doc["downloadTarget"] is NSNull, "\(r)")
        let shortfall = try #require(doc["storageShortfall"] as? [String: Any], "\(r)")
        #expect(shortfall["modelId"] as? String == "tib-llm")
        #expect((shortfall["requiredMb"] as? Int ?? 0) > (shortfall["availableMb"] as? Int ?? .max), "\(r)")
        let text = try sb.run(["auto", "--explain", "--catalog", catalog], env: env)
        #expect(text.stdoutLines.first == "cloud: insufficientStorage (the SDK's reason: weightsNotPresent)", "\(text)")
        #expect(text.stdout.contains("cloud (weightsNotPresent, detail insufficientStorage)"), "auto --explain's step 4: \(text)")
    }

    @Test("auto (text) says cloud and the reason, then the download target", arguments: autoCases)
    func autoText(_ c: AutoCase) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let env = ["EXTENTOS_MEMORY_MB": "\(c.physicalMb)", "EXTENTOS_MEMORY_AVAILABLE_MB": "\(c.availableMb)"]
        let r = try sb.run(["auto"], env: env)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdoutLines.first == "cloud: \(c.reason)", "\(r)")
        if let target = c.target {
            #expect(r.stdoutLines.contains { $0.hasPrefix("download target: \(target)") }, "\(r)")
        } else {
            #expect(!r.stdout.contains("download target"), "\(r)")
        }
        #expect(!r.stdoutLines.contains { $0.hasPrefix("1. ") }, "steps only with --explain\n\(r)")
    }

    @Test("auto --explain prints the class rung and numbered steps in order")
    func autoExplain() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["auto", "--explain"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdoutLines.first == "cloud: weightsNotPresent", "\(r)")
        #expect(r.stdout.contains("class budget 2,048 MiB") || r.stdout.contains("class budget 2048 MiB"), "\(r)")
        #expect(r.stdout.contains("class rung local-qwen3-1.7b"), "\(r)")
        let numbers = r.stdoutLines.compactMap { line -> Int? in
            guard let dot = line.firstIndex(of: "."), line[line.index(after: dot)...].hasPrefix(" ") else { return nil }
            return Int(line[..<dot])
        }
        #expect(numbers.count >= 4, "\(r)")
        #expect(numbers.first == 1, "\(r)")
        #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count, "steps are numbered in order\n\(r)")

        // --explain with --json: the same steps, in the JSON only.
        let json = try sb.run(["auto", "--explain", "--json"], env: Self.lowMemory)
        #expect(json.status == 0, "\(json)")
        let steps = try #require(try json.jsonObject()["steps"] as? [[String: Any]])
        #expect(steps.compactMap { $0["step"] as? Int } == numbers)
        #expect(steps.first { $0["step"] as? Int == 2 }?["rungId"] as? String == "local-qwen3-1.7b", "\(json)")
    }

    // MARK: doctor

    @Test("doctor on a fresh store: exit 0, integrity_check ok, journal mode wal")
    func doctorHealthy() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["doctor"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.contains("integrity_check ok"), "\(r)")
        #expect(r.stdout.contains("wal"), "\(r)")
        #expect(!r.stdout.contains("FAIL"), "\(r)")
        #expect(r.stdout.contains("All checks passed"), "\(r)")
        #expect(FileManager.default.fileExists(atPath: sb.store + "/records.sqlite3"), "doctor creates the store")

        let json = try sb.run(["doctor", "--json"], env: Self.lowMemory)
        #expect(json.status == 0, "\(json)")
        #expect(json.stderr.isEmpty, "\(json)")
        let doc = try json.jsonObject()
        #expect(doc["ok"] as? Bool == true)
        let records = try #require(doc["records"] as? [String: Any], "\(json)")
        #expect(records["integrityCheck"] as? String == "ok")
        #expect(records["journalMode"] as? String == "wal")
        #expect(doc["store"] as? String == sb.store)
    }

    static let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) })

    @Test("doctor on a garbage records.sqlite3: exit 1, names the file, says to move it aside, keeps it")
    func doctorBrokenRecords() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let records = try sb.write("store/records.sqlite3", Self.garbage)
        let r = try sb.run(["doctor"], env: Self.lowMemory)
        #expect(r.status == 1, "\(r)")
        let said = r.stdout + r.stderr
        #expect(said.contains(records), "\(r)")
        #expect(said.lowercased().contains("move it aside"), "\(r)")
        #expect(r.stdout.contains("FAIL"), "\(r)")
        #expect(!r.stdout.contains("All checks passed"), "\(r)")
        #expect(FileManager.default.contents(atPath: records) == Self.garbage, "doctor must not destroy the user's file")

        let json = try sb.run(["doctor", "--json"], env: Self.lowMemory)
        #expect(json.status == 1, "\(json)")
        let doc = try json.jsonObject()
        #expect(doc["ok"] as? Bool == false)
        let checks = try #require(doc["checks"] as? [[String: Any]], "\(json)")
        let failed = checks.filter { $0["ok"] as? Bool == false }
        #expect(!failed.isEmpty, "\(json)")
        #expect(failed.contains { ($0["detail"] as? String ?? "").contains(records) }, "\(json)")
    }

    @Test("doctor --quiet on a broken store still tells the user what failed (--quiet prints only errors)")
    func doctorQuietStillReportsFailure() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let records = try sb.write("store/records.sqlite3", Self.garbage)
        let r = try sb.run(["doctor", "--quiet"], env: Self.lowMemory)
        #expect(r.status == 1, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains(records), "a failing doctor under --quiet exits 1 without saying why\n\(r)")
    }

    @Test("a command that needs the records, on a garbage records.sqlite3, fails with exit 1 and the move-aside advice")
    func infoOnBrokenRecords() throws {
        // (list still lists the catalog then: DamagedRecordsTests.)
        let sb = try Sandbox(); defer { sb.remove() }
        let records = try sb.write("store/records.sqlite3", Self.garbage)
        let r = try sb.run(["info", "local-qwen3-1.7b"], env: Self.lowMemory)
        #expect(r.status == 1, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: "), "\(r)")
        #expect(r.stderr.contains(records), "\(r)")
        #expect(r.stderr.contains("glasses-local doctor"), "\(r)")
    }

    // MARK: history

    @Test("history: empty store says so; after doctor there is a catalog event")
    func history() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let empty = try sb.run(["history"])
        #expect(empty.status == 0, "\(empty)")
        #expect(empty.stderr.isEmpty, "\(empty)")
        #expect(empty.stdout == "no history yet\n", "\(empty)")

        let doctor = try sb.run(["doctor"], env: Self.lowMemory)
        #expect(doctor.status == 0, "\(doctor)")

        let r = try sb.run(["history"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdoutLines.first?.hasPrefix("TIME") == true, "\(r)")
        #expect(r.stdoutLines.contains { $0.contains("catalog") && $0.contains("version 2") }, "\(r)")

        let json = try sb.run(["history", "--json"])
        #expect(json.status == 0, "\(json)")
        let events = try #require(try json.jsonObject()["events"] as? [[String: Any]], "\(json)")
        #expect(events.contains { $0["event"] as? String == "catalog" }, "\(json)")

        let model = try sb.run(["history", "local-qwen3-8b"])
        #expect(model.status == 0, "\(model)")
        #expect(model.stdout == "no history for local-qwen3-8b\n", "\(model)")
    }

    @Test("history of an unknown id: exit 5 naming it")
    func historyUnknown() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["history", "unknown-id"])
        #expect(r.status == 5, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: ") && r.stderr.contains("unknown-id"), "\(r)")
    }

    // MARK: --quiet and --json

    @Test("--quiet suppresses human output of successful commands",
          arguments: [["list"], ["info", "local-qwen3-4b"], ["fit", "local-qwen3-0.6b"], ["auto", "--explain"],
                      ["history"], ["doctor"]])
    func quiet(_ args: [String]) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let loud = try sb.run(args, env: Self.lowMemory)
        #expect(loud.status == 0 && !loud.stdout.isEmpty, "without --quiet there is output\n\(loud)")
        let r = try sb.run(args + ["--quiet"], env: Self.lowMemory)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
    }

    @Test("--quiet still prints errors")
    func quietErrors() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["--quiet", "info", "no-such-model"])
        #expect(r.status == 5, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains("no-such-model"), "\(r)")
    }

    @Test("with --json stdout is exactly one JSON document (also with --quiet)",
          arguments: [["list"], ["fit", "local-qwen3-0.6b"], ["info", "kokoro-en-v0_19"], ["auto"], ["auto", "--explain"],
                      ["doctor"], ["history"]])
    func oneJSONDocument(_ args: [String]) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        for extra in [["--json"], ["--json", "--quiet"]] {
            let r = try sb.run(args + extra, env: Self.lowMemory)
            #expect(r.status == 0, "\(r)")
            #expect(r.stderr.isEmpty, "\(r)")
            #expect(r.stdoutLines.count == 1, "one line of JSON\n\(r)")
            _ = try r.jsonObject()
        }
    }
}
