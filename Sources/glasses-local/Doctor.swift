import FoundationEssentials
import LocalModelKit

/// `glasses-local doctor`: every check a person needs before filing a bug.
enum Doctor {
    static let command = Command("doctor", abstract: "Check the store, the records database, memory readings and the catalog.",
                                 discussion: "Opening the store repairs leftovers of interrupted work; doctor lists what it repaired.",
                                 exits: [ExitCase(.failure, "A check fails.")], run: run)

    static func run(_ context: CommandContext) throws(CLIError) -> ExitCode {
        let c = context.console
        var checks: [(name: String, ok: Bool, detail: String)] = []
        /// Lines printed under a check (what it means, how to recover), by check name.
        var advice: [String: [String]] = [:]
        var json: [(key: String, value: JSONValue)] = []

        let engine = try context.engine(openExisting: false)
        let layout = engine.layout
        json.append(("store", .string(layout.root)))

        // Store + records (opening repairs leftovers).
        var opened = false
        var damage: RecordsError?
        do {
            switch try context.openStoreAllowingDamage(create: true) {
            case .opened:
                opened = true
                checks.append(("store", true, "\(layout.root) is writable"))
            case .damaged(let error):
                damage = error
            case .notCreated:
                break
            }
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
                                "classBudgetMb": JSONValue(engine.classBudgetMb(memory)),
                                "source": .string(memory.source),
                                "overrideProblems": QueryCommands.overrideProblemsJSON(memory.overrideProblems)]))
        checks.append(("memory", true, "\(Format.mb(memory.physicalMb)) physical, \(Format.mb(memory.availableMb)) available now (\(memory.source))"))
        for problem in memory.overrideProblems {
            checks.append(("memory override", false, problem.description))
        }

        var recordsJSON: [(key: String, value: JSONValue)] = [("path", .string(layout.recordsPath)), ("damaged", .bool(damage != nil))]
        if let damage {
            let recovery = engine.recordsRecovery()
            let (detail, lines) = damagedRecords(damage, recovery: recovery)
            checks.append(("records", false, detail))
            advice["records"] = lines
            recordsJSON += [("problem", .string(damage.description)), ("moveAsideCommand", .string(recovery.moveAsideCommand)),
                            ("recovery", .array(recovery.models.map(recoveryJSON)))]
        }
        if opened {
            do {
                let health = try engine.recordsHealth()
                recordsJSON += [("integrityCheck", .string(health.integrityCheck)), ("journalMode", .string(health.journalMode)),
                                ("schemaVersion", JSONValue(health.schemaVersion)), ("installs", JSONValue(health.installs))]
                checks.append(("records", health.isHealthy,
                               "integrity_check \(health.integrityCheck), journal_mode \(health.journalMode), schema \(health.schemaVersion), \(health.installs) record(s)"))
                json.append(("storeCatalogVersion", JSONValue(health.storeCatalogVersion)))
            } catch {
                checks.append(("records", false, "\(error)"))
            }
        }
        recordsJSON.append(("sqliteVersion", .string(LocalModelEngine.sqliteVersion)))
        json.append(("libraries", ["sqlite": .string(LocalModelEngine.sqliteVersion), "curl": .string(TransferLibrary.curlVersion),
                                   "archive": .string(ArchiveExtractor.libraryVersion)]))
        checks.append(("libraries", true, "SQLite \(LocalModelEngine.sqliteVersion), \(TransferLibrary.curlVersion), \(ArchiveExtractor.libraryVersion)"))
        json.append(("records", .object(recordsJSON)))

        let catalog = engine.catalog
        let now = SystemClock.wallSeconds()
        let expired = catalog.isExpired(now: Int64(now))
        json.append(("catalog", ["source": .string(context.catalogSource), "catalogVersion": JSONValue(catalog.catalogVersion),
                                 "models": JSONValue(catalog.models.count), "expiresAt": JSONValue(catalog.expiresAt),
                                 "expired": .bool(expired), "updateURL": JSONValue(context.environment["EXTENTOS_CATALOG_URL"].map(URLOrigin.redacted))]))
        let expiry = catalog.expiresAt.map { expired ? ", expired at \($0)" : ", expires \($0)" } ?? ""
        checks.append(("catalog", !expired, "version \(catalog.catalogVersion) from \(context.catalogSource), \(catalog.models.count) models\(expiry)"))
        if expired {
            // An accepted catalog keeps serving after its expiresAt (a device offline must keep
            // its models), but its publisher no longer vouches for it: get a current one.
            advice["catalog"] = ["The catalog's publisher no longer vouches for it; it is still used so installed models keep working.",
                                 "Get a current one: glasses-local catalog update --from URL (or set EXTENTOS_CATALOG_URL and let prefetch do it)."]
        }

        // The store's own catalog: one damaged (set aside) or missing means the built-in
        // catalog stands in until `catalog update` restores it.
        let (trusted, skippedKeys) = context.keys(warn: false)
        let stored = context.catalogIsNamed ? nil : layout.readStoredCatalogs(keys: trusted, setAside: false)
        let setAside = layout.setAsideCatalogs()
        var storeCatalog: [(key: String, value: JSONValue)] = [("setAside", .array(setAside.map { .string($0) }))]
        if let missing = engine.storeCatalogVersionMissing {
            storeCatalog.append(("missingVersion", JSONValue(missing)))
            checks.append(("store catalog", false,
                           "the store has used catalog version \(missing), but no trusted copy of it is left; the built-in version \(catalog.catalogVersion) stands in"))
            advice["store catalog"] = (stored?.unusable ?? []).map { "\($0)" } + setAside.map { "set aside (kept for inspection, never read again): \($0)" } + [
                "Installed models keep working (list, info, verify, delete, auto); downloads wait for the store's catalog.",
                "Restore it: glasses-local catalog update --from URL (the publisher's catalog, version \(missing) or newer; or set EXTENTOS_CATALOG_URL).",
            ]
        } else if let unusable = stored?.unusable, !unusable.isEmpty {
            checks.append(("store catalog", false, "\(unusable.count) stored catalog(s) newer than the one in use are not used"))
            advice["store catalog"] = unusable.map { "\($0)" }
        } else if !setAside.isEmpty {
            checks.append(("store catalog", true, "\(setAside.count) damaged catalog file(s) set aside in \(layout.damagedCatalogRoot), kept for inspection; safe to delete"))
        }
        storeCatalog.append(("unusable", .array((stored?.unusable ?? []).map { .string($0.description) })))
        json.append(("storeCatalog", .object(storeCatalog)))
        json.append(("skippedKeys", .array(skippedKeys.map { .string($0) })))
        for skipped in skippedKeys { checks.append(("trusted keys", false, skipped)) }

        // The proxy libcurl will use, by its environment rules (never a password).
        let proxy = ProxyEnvironment(environment: context.environment)
        json.append(("proxy", ["https": JSONValue(proxy.https), "http": JSONValue(proxy.http), "noProxy": JSONValue(proxy.noProxy),
                               "ignoredHTTP_PROXY": .bool(proxy.ignoredUppercaseHTTP)]))
        let proxyText = proxy.https.map { "https through \($0)" + (proxy.noProxy.map { ", not for \($0)" } ?? "") } ?? "none (direct connections)"
        checks.append(("proxy", true, proxyText))
        if proxy.ignoredUppercaseHTTP {
            advice["proxy"] = ["HTTP_PROXY is set but libcurl ignores the uppercase name for http; set http_proxy (lowercase) if plain-http mirrors need it."]
        }

        // Credentials: where each one was found, never its value; files others can read and
        // a token that cannot be used fail; an expired Hub login is a warning.
        let credentials = CredentialReport(environment: context.environment, now: now)
        let expiredLogin: JSONValue = credentials.expiredLogin.map { login in
            ["name": .string(login.name), "expiresAt": login.expiresAt.map { .int($0) } ?? .null,
             "expiredAt": JSONValue(login.expiresAt.flatMap { CivilTime.iso8601(Double($0)) })]
        } ?? .null
        json.append(("credentials", ["huggingFaceToken": JSONValue(credentials.huggingFaceToken), "netrc": JSONValue(credentials.netrcFile),
                                     "sources": .array(credentials.sources.map { .string($0) }),
                                     "exposedFiles": .array(credentials.exposedFiles.map { .string($0) }),
                                     "problems": .array(credentials.problems.map { .string($0) }),
                                     "expiredLogin": expiredLogin,
                                     "warnings": .array(credentials.warnings.map { .string($0) })]))
        checks.append(("credentials", credentials.exposedFiles.isEmpty && credentials.problems.isEmpty, credentials.sources.joined(separator: "; ")))
        let credentialAdvice = credentials.exposedFiles + credentials.problems + credentials.warnings.map { "warning: " + $0 }
        if !credentialAdvice.isEmpty { advice["credentials"] = credentialAdvice }
        // Where sources on https://huggingface.co are fetched: HF_ENDPOINT, unless --mirror.
        let endpoint = HubEndpoint(environment: context.environment)
        let mirror = context.invocation[GlobalOptions.shared.mirror]
        var endpointJSON: [(key: String, value: JSONValue)] = [("url", .string(endpoint?.url ?? "https://huggingface.co")),
                                                               ("from", .string(endpoint == nil ? "default" : "HF_ENDPOINT")),
                                                               ("problem", JSONValue(endpoint?.problem)), ("mirror", JSONValue(mirror))]
        if let mirror {
            endpointJSON[0] = ("url", .string(mirror))
            endpointJSON[1] = ("from", .string(GlobalOptions.shared.mirror.name))
            checks.append(("hub endpoint", true, "\(URLOrigin.redacted(mirror)) (--mirror replaces every source's origin" + (endpoint == nil ? ")" : "; HF_ENDPOINT is not used)")))
        } else if let endpoint, let problem = endpoint.problem {
            checks.append(("hub endpoint", false, "HF_ENDPOINT=\(URLOrigin.redacted(endpoint.url).prefix(200)) cannot be used: \(problem)"))
            advice["hub endpoint"] = ["Downloads from Hugging Face sources stop until it is fixed: set HF_ENDPOINT to the https URL of a Hub mirror (plain http only to 127.0.0.1 or localhost), or unset it."]
        } else if let endpoint {
            checks.append(("hub endpoint", true, "\(endpoint.url) (HF_ENDPOINT): sources on https://huggingface.co are fetched there, and the Hugging Face token goes there only"))
        } else {
            checks.append(("hub endpoint", true, "https://huggingface.co (set HF_ENDPOINT to use a Hub mirror)"))
        }
        json.append(("hubEndpoint", .object(endpointJSON)))
        // The network: off by a switch, or on.
        let offline = (try? context.setup().transferPolicy().offlineBy) ?? nil
        json.append(("offline", JSONValue(offline)))
        checks.append(("network", true, offline.map { "offline (\($0)): no connection is made; download, catalog update and prefetch fetch nothing" } ?? "online"))

        json.append(("repairs", .array(context.repairs.map { .string($0.description) })))
        let ok = checks.allSatisfy(\.ok)
        json.append(("ok", .bool(ok)))
        json.append(("checks", .array(checks.map {
            ["name": .string($0.name), "ok": .bool($0.ok), "detail": .string($0.detail),
             "advice": .array((advice[$0.name] ?? []).map { .string($0) })]
        })))

        if c.json {
            c.printJSON(.object(json))
        } else {
            for check in checks {
                // Failures reach stderr even with --quiet: "print only errors".
                let lines = ["\(check.ok ? "ok  " : "FAIL") \(check.name): \(check.detail)"] + (advice[check.name] ?? []).map { "     " + $0 }
                for line in lines {
                    if check.ok { c.say(line) } else if c.quiet { c.err(line) } else { c.say(line) }
                }
            }
            for repair in context.repairs { c.say("     repaired: \(repair)") }
            c.say(ok ? "\nAll checks passed." : "\nSome checks failed; each line says what to do.")
        }
        return ok ? .ok : .failure
    }

    /// The records check of a damaged database: what it means, how to get out, and what
    /// that costs for each model on disk (see `RecordsRecovery` for why each is true).
    static func damagedRecords(_ error: RecordsError, recovery: RecordsRecovery) -> (detail: String, advice: [String]) {
        var detail = "\(recovery.recordsPath) is damaged or not a database"
        if case .corrupt(_, let why) = error { detail += " (\(why))" }
        detail += "; glasses-local leaves it as it is and never deletes it."
        var lines = [
            "Install states are unknown: 'list' shows the catalog with the state \"unknown (records damaged)\" and exits 1; commands that need the records stop with exit 1.",
            "To recover, move it aside with its -wal/-shm files (nothing is deleted):",
            "  \(recovery.moveAsideCommand)",
            "then run 'glasses-local doctor' again: it starts new, empty records (install records and history are lost) and moves each model folder it finds to .partial.",
        ]
        if recovery.models.isEmpty {
            lines.append("No model folder is on disk: nothing needs re-verifying or fetching again.")
        }
        for model in recovery.models {
            switch model.outcome {
            case .reverifiedFromDisk(let files):
                lines.append("  \(model.id): 'glasses-local download \(model.id)' then re-verifies its \(files) file\(files == 1 ? "" : "s") from disk and fetches only what is missing or does not match.")
            case .fetchedAgain(let bytes):
                lines.append("  \(model.id): installed from an archive that was not kept; 'glasses-local download \(model.id)' fetches \(Format.bytes(bytes)) again.")
            case .replacedByPartial:
                lines.append("  \(model.id): .partial/\(model.id) already holds an unfinished download, so the repair removes \(model.folder) instead of moving it.")
            }
        }
        return (detail, lines)
    }

    static func recoveryJSON(_ model: RecordsRecovery.Model) -> JSONValue {
        var fields: [(key: String, value: JSONValue)] = [("modelId", .string(model.id)), ("folder", .string(model.folder))]
        switch model.outcome {
        case .reverifiedFromDisk(let files): fields += [("outcome", "reverifiedFromDisk"), ("files", JSONValue(files))]
        case .fetchedAgain(let bytes): fields += [("outcome", "fetchedAgain"), ("fetchBytes", .int(bytes))]
        case .replacedByPartial: fields += [("outcome", "replacedByPartial")]
        }
        return .object(fields)
    }
}
