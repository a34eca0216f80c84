import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

#if canImport(Glibc)
import Glibc
#endif

/// P12: every parser of a number that comes from outside — a server's headers, a catalog,
/// the environment, the records database — fed the values that trap naive code. Each
/// must answer (a value, a saturated value, or a refusal); none may crash the process.
@Suite("Hostile numbers never trap (P12)", .ownThreads, .networkGuard)
struct HostileNumberTests {
    static let intMax = "9223372036854775807"
    static let intMaxPlusOne = "9223372036854775808"
    static let tenThousandDigits = String(repeating: "9", count: 10_000)
    /// The issue's list: Int.max, Int.max + 1, -1, 1e400, NaN, 10,000 digits.
    static let hostile = [intMax, intMaxPlusOne, "-1", "1e400", "NaN", tenThousandDigits]

    @Test("ExternalNumber.decimal: exact, or nil beyond Int64 and for anything but digits")
    func decimal() {
        #expect(ExternalNumber.decimal(Self.intMax) == .max)
        #expect(ExternalNumber.decimal(Self.intMaxPlusOne) == nil)
        #expect(ExternalNumber.decimal("-1") == nil)
        #expect(ExternalNumber.decimal("1e400") == nil)
        #expect(ExternalNumber.decimal("NaN") == nil)
        #expect(ExternalNumber.decimal(Self.tenThousandDigits) == nil)
        #expect(ExternalNumber.decimal("") == nil && ExternalNumber.decimal("+5") == nil && ExternalNumber.decimal(" 5") == nil)
        #expect(ExternalNumber.decimal("0") == 0 && ExternalNumber.decimal("1234") == 1234)
    }

    @Test("ExternalNumber.saturatingDecimal: huge numbers saturate, non-numbers are refused")
    func saturatingDecimal() {
        #expect(ExternalNumber.saturatingDecimal(Self.intMax) == .max)
        #expect(ExternalNumber.saturatingDecimal(Self.intMaxPlusOne) == .max)
        #expect(ExternalNumber.saturatingDecimal(Self.tenThousandDigits) == .max)
        #expect(ExternalNumber.saturatingDecimal("-1") == nil)
        #expect(ExternalNumber.saturatingDecimal("1e400") == nil)
        #expect(ExternalNumber.saturatingDecimal("NaN") == nil)
        #expect(ExternalNumber.saturatingDecimal("120") == 120)
    }

    @Test("ExternalNumber.int64(clamping:) and saturatingSum")
    func doubles() {
        #expect(ExternalNumber.int64(clamping: .nan) == nil)
        #expect(ExternalNumber.int64(clamping: Double("1e400") ?? 0) == .max)   // +inf
        #expect(ExternalNumber.int64(clamping: -.infinity) == .min)
        #expect(ExternalNumber.int64(clamping: Double(Int64.max)) == .max)      // 2^63: one past the range
        #expect(ExternalNumber.int64(clamping: -1) == -1)
        #expect(ExternalNumber.int64(clamping: 1e300) == .max)
        #expect(ExternalNumber.saturatingSum([.max, .max, 1]) == .max)
        #expect(ExternalNumber.saturatingSum([-5, 3, 4]) == 7)
    }

    @Test("Retry-After: seconds (saturating), an HTTP date, or ignored")
    func retryAfter() {
        #expect(HTTPHeader.retryAfter(Self.intMax) == .max)
        #expect(HTTPHeader.retryAfter(Self.intMaxPlusOne) == .max)
        #expect(HTTPHeader.retryAfter(Self.tenThousandDigits) == .max)
        #expect(HTTPHeader.retryAfter("99999999999999999999") == .max)
        #expect(HTTPHeader.retryAfter("-1") == nil)
        #expect(HTTPHeader.retryAfter("1e400") == nil)
        #expect(HTTPHeader.retryAfter("NaN") == nil)
        #expect(HTTPHeader.retryAfter("inf") == nil)
        #expect(HTTPHeader.retryAfter("120") == 120)
        let now = 1_700_000_000.0
        #expect(HTTPHeader.retryAfter("Tue, 14 Nov 2023 22:15:20 GMT", now: now) == 120, "two minutes after now")
        #expect(HTTPHeader.retryAfter("Mon, 01 Jan 1990 00:00:00 GMT", now: now) == 0, "a date in the past means now")
    }

    @Test("Content-Range: every hostile number in every position is refused, never trapped on")
    func contentRange() {
        for value in Self.hostile {
            let tooBig = value != Self.intMax
            for header in ["bytes \(value)-10/100", "bytes 0-\(value)/100", "bytes 0-10/\(value)", "bytes \(value)-\(value)/\(value)"] {
                let parsed = HTTPHeader.contentRange(header)
                if tooBig {
                    #expect(parsed == nil, "\(header.prefix(60)) is refused")
                }
            }
        }
        // Int.max in range positions is a number, but no total can follow it.
        #expect(HTTPHeader.contentRange("bytes 0-\(Self.intMax)/\(Self.intMax)") == nil)
        let ok = HTTPHeader.contentRange("bytes 100-199/1000")
        #expect(ok?.start == 100 && ok?.end == 199 && ok?.total == 1000)
        #expect(HTTPHeader.contentRange("bytes 100-199/*")?.total == nil)
        #expect(HTTPHeader.contentRange("bytes 100-199/150") == nil, "a total inside the range is refused")
    }

    @Test("/proc/meminfo lines with hostile numbers: no trap, no negative reading")
    func meminfo() {
        for value in Self.hostile {
            let text = "MemTotal: \(value) kB\nMemAvailable: \(value) kB\nMemFree: 1 kB\n"
            var seen: [String: Int] = [:]
            SystemDeviceProbe.forEachField(Array(text.utf8)) { name, kb in seen[name] = kb }
            #expect(seen.values.allSatisfy { $0 >= 0 }, "\(value.prefix(30)): \(seen)")
        }
    }

    /// A valid one-model catalog with the three numbers spelled as given (JSON text, so a
    /// hostile spelling reaches the parser as it is).
    static func catalogText(catalogVersion: String = "1", requiredMb: String = "100", size: String = "1000") -> String {
        """
        {"schemaVersion": 1, "catalogVersion": \(catalogVersion), "generatedAt": "2026-01-01T00:00:00Z",
         "models": [{"id": "m", "kind": "llm", "displayName": "M", "requiredMb": \(requiredMb), "autoEligible": true,
           "files": [{"path": "a.bin", "size": \(size), "sha256": null}],
           "sources": [{"type": "files", "baseURL": "https://example.com/m/"}]}]}
        """
    }

    static func decode(_ text: String) -> Result<Catalog, CatalogError> {
        Result { () throws(CatalogError) in try CatalogLoader().decode(Array(text.utf8), source: "hostile.json") }
    }

    @Test("a catalog with hostile sizes, versions and memory figures is refused with its JSON path, never trapped on; the largest valid numbers are accepted exactly")
    func catalogNumbers() throws {
        // The fixture itself is accepted, with its numbers as written, and so are the
        // largest numbers each field allows: a refusal below is about the number alone.
        for (version, mb, size) in [("1", "100", "1000"), ("2147483647", "1048576", "1099511627776")] {
            let catalog = try Self.decode(Self.catalogText(catalogVersion: version, requiredMb: mb, size: size)).get()
            #expect(catalog.catalogVersion == Int(version))
            #expect(catalog.models.count == 1 && catalog.models.first?.requiredMb == Int(mb))
            #expect(catalog.models.first?.files.first?.size == Int64(size))
        }

        // One number at a time, the others valid: refused with exactly one issue, at that
        // number's path. One past each limit, and zero, are refused the same way.
        let fields: [(name: String, path: String, limit: String, text: (String) -> String)] = [
            ("catalogVersion", "catalogVersion", "2147483648", { Self.catalogText(catalogVersion: $0) }),
            ("requiredMb", "models[0].requiredMb", "1048577", { Self.catalogText(requiredMb: $0) }),
            ("size", "models[0].files[0].size", "1099511627777", { Self.catalogText(size: $0) }),
        ]
        for field in fields {
            for value in Self.hostile + [field.limit, "0"] {
                let label = "\(field.name) = \(value.prefix(30))"
                switch Self.decode(field.text(value)) {
                case .success(let catalog):
                    Issue.record("\(label) was accepted: version \(catalog.catalogVersion), \(catalog.models)")
                case .failure(let error):
                    // "NaN" is not JSON at all: the whole document is refused, at "$".
                    let path = value == "NaN" ? "$" : field.path
                    #expect(error.issues.map(\.path) == [path], "\(label): \(error.description.prefix(400))")
                    #expect(error.issues.allSatisfy { !$0.message.isEmpty }, "\(label)")
                    if value == "NaN" {
                        #expect(error.issues.first?.message.hasPrefix("not valid JSON") == true, "\(label): \(error)")
                    }
                }
            }
        }

        // All three hostile at once: each is named (NaN still refuses the whole document).
        for value in Self.hostile {
            let text = Self.catalogText(catalogVersion: value, requiredMb: value, size: value)
            switch Self.decode(text) {
            case .success:
                Issue.record("a catalog with \(value.prefix(30)) everywhere was accepted")
            case .failure(let error):
                let expected = value == "NaN" ? ["$"] : fields.map(\.path)
                #expect(Set(error.issues.map(\.path)) == Set(expected), "\(value.prefix(30)): \(error.description.prefix(600))")
            }
        }
    }

    /// Timestamps no clock gives, as the STRICT schema's REAL columns can hold them
    /// (REAL and INTEGER), written by another program.
    static let hostileTimes: [SQLiteValue] = [
        .real(.infinity), .real(-.infinity), .real(1e300), .real(-1e300), .real(-1.5), .real(-0.0),
        .real(253_402_300_800),       // 10000-01-01: one second past what ISO 8601 can write
        .real(-62_167_219_201),       // one second before year 0
        .integer(.max), .integer(.min), .integer(-1),
    ]
    /// What a writer that ignored the schema (STRICT taken off) could leave in the same columns.
    static let hostileTexts = ["NaN", "-1", "1e400", "inf", "yesterday", "", String(repeating: "9", count: 10_000)]

    @Test("a records database with hostile reservations and timestamps: the engine answers, never traps, and reads back what is there")
    func recordsNumbers() throws {
        typealias S = StoreTestSupport
        try S.withTempDir { dir in
            let model = S.filesModel("m", files: [("a.bin", 1000)])
            let pending = S.filesModel("p", files: [("b.bin", 2000)])
            let catalog = S.catalog([model, pending])
            let setup = S.engine(root: dir + "/store", catalog: catalog)
            let records = try setup.open().records
            try S.install(model, layout: setup.layout, records: records)
            // What a damaged or hostile database may hold (the CHECK constraints bypassed by a
            // foreign writer): reservations that overflow any sum, timestamps out of range.
            try records.write { ctx in
                try ctx.reserve("a", bytes: .max, pid: 1)
                try ctx.reserve("b", bytes: .max, pid: 2)
                try ctx.reserve("c", bytes: .max, pid: 3)
            }
            let statuses = try setup.models()
            #expect(statuses.count == 2 && statuses.allSatisfy { $0.fit.availableBytes == 0 }, "everything is reserved, so nothing is free")
            #expect(try records.read { try $0.reservedBytes() } == .max)

            // Hostile timestamps in every timestamp column: the history, the install's three
            // times, a reservation's and a partial file's.
            try records.write { ctx in
                for (n, value) in Self.hostileTimes.enumerated() {
                    try ctx.db.query("INSERT INTO events (at, model_id, event, detail) VALUES (?, 'm', 'verified', ?)",
                                     [value, .text("hostile time \(n)")])
                }
                try ctx.db.query("UPDATE installs SET created_at = ?, updated_at = ?, installed_at = ? WHERE model_id = 'm'",
                                 [.real(-.infinity), .integer(.max), .real(.nan)])
                try ctx.db.query("UPDATE reservations SET created_at = ? WHERE model_id = 'a'", [.real(.infinity)])
                try ctx.db.query("UPDATE reservations SET created_at = ? WHERE model_id = 'b'", [.integer(.min)])
                try ctx.db.query("INSERT INTO partial_files (model_id, path, size, bytes_present, updated_at) VALUES ('p', 'b.bin', 2000, 10, ?)",
                                 [.real(-1e300)])
            }
            // SQLite keeps NaN as NULL, which a NOT NULL time refuses; STRICT refuses text that
            // is not a number.
            for value: SQLiteValue in [.real(.nan), .text("NaN"), .text("yesterday")] {
                #expect(throws: (any Error).self, "\(value) stored as a history time") {
                    try records.write { ctx in
                        try ctx.db.query("INSERT INTO events (at, model_id, event, detail) VALUES (?, 'm', 'verified', 'refused')", [value])
                    }
                }
            }
            // A foreign writer that takes STRICT off the history can store text there too (text
            // that looks like a number becomes one, by the column's REAL affinity).
            let raw = try SQLiteConnection(path: records.path, create: false)
            try raw.execute("PRAGMA writable_schema=ON")
            try raw.execute("UPDATE sqlite_schema SET sql = replace(sql, ') STRICT', ')') WHERE name = 'events'")
            let cookie = try raw.scalar("PRAGMA schema_version").int64 ?? 0
            try raw.execute("PRAGMA schema_version = \(cookie + 1)")
            try raw.execute("PRAGMA writable_schema=OFF")
            for (n, text) in Self.hostileTexts.enumerated() {
                _ = try raw.query("INSERT INTO events (at, model_id, event, detail) VALUES (?, 'm', 'verified', ?)",
                                  [.text(text), .text("hostile text \(n)")])
            }
            let textTimes = Set(try raw.query("SELECT detail FROM events WHERE typeof(at) = 'text'").compactMap { $0[0].string })
            #expect(textTimes.count == 4, "NaN, inf, yesterday and the empty string stay text: \(textTimes)")

            // A fresh engine over that database (as the next command would be) answers everything.
            let engine = S.engine(root: dir + "/store", catalog: catalog)
            let repairs = try engine.open().repairs
            // The reservations' owners are gone: released, whatever their times say.
            #expect(Set(repairs.compactMap(\.modelId)) == ["a", "b", "c"], "\(repairs)")
            #expect(try records.read { try $0.reservations() }.isEmpty)
            let history = try engine.history(modelId: "m", limit: 10_000)
            let numbers = history.filter { $0.detail?.hasPrefix("hostile time ") == true }
            #expect(numbers.map(\.at) == Self.hostileTimes.map { $0.double ?? .nan }, "each REAL or INTEGER time reads back as it is stored")
            let texts = history.filter { $0.detail?.hasPrefix("hostile text ") == true }
            #expect(texts.count == Self.hostileTexts.count, "every row is read: \(texts.map(\.at))")
            #expect(texts.filter { textTimes.contains($0.detail ?? "") }.allSatisfy { $0.at.isFinite },
                    "a time that is text reads as a number, not a trap: \(texts.map(\.at))")
            #expect(history.contains { $0.kind == "completed" }, "the real history is still there: \(history.map(\.kind))")
            // Shown as a time only when it is one: ISO 8601 inside years 0…9999, nil otherwise.
            for event in history {
                if let text = CivilTime.iso8601(event.at) {
                    #expect(text.count == 20 && text.hasSuffix("Z") && event.at >= -62_167_219_200 && event.at < 253_402_300_800,
                            "\(event.at) → \(text)")
                } else {
                    #expect(!event.at.isFinite || event.at < -62_167_219_200 || event.at >= 253_402_300_800, "\(event.at) has no text")
                }
            }
            #expect(CivilTime.iso8601(-1.5) == "1969-12-31T23:59:58Z" && CivilTime.iso8601(-0.0) == "1970-01-01T00:00:00Z")

            let record = try #require(try engine.record(of: "m"))
            #expect(record.state == .installed && record.createdAt == -.infinity && record.updatedAt == Double(Int64.max)
                    && record.installedAt == nil, "\(record)")
            #expect(try engine.status(of: "m").isInstalled, "hostile times do not uninstall a model")
            let partial = try engine.status(of: "p")
            #expect(!partial.isInstalled && partial.fit.availableBytes > 0 && partial.fit.requiredBytes > 0, "\(partial.fit)")
            #expect(try engine.models().count == 2)
            _ = try engine.autoChoice()
            _ = try engine.autoChoiceInputs()
            #expect(try engine.deviceFit(for: "m").requiredBytes == 0)
            #expect(try Records(path: records.path).integrityCheck() == "ok")
        }
    }
}

/// The calendar arithmetic that replaced Foundation's date formatters, checked against them.
@Suite("CivilTime: HTTP dates and ISO 8601 without Foundation", .ownThreads, .networkGuard)
struct CivilTimeTests {
    @Test("ISO 8601 UTC text equals Foundation's for 2,000 instants from 1900 to 2200, leap days included")
    func iso8601MatchesFoundation() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss'Z'"
        var rng = SystemRandomNumberGenerator()
        var instants: [Double] = [0, 951_782_400, 1_700_000_000, 4_107_542_400, -2_208_988_800, 86_399, -1]
        for _ in 0..<2_000 { instants.append(Double(Int64.random(in: -2_208_988_800...7_258_118_400, using: &rng))) }
        for t in instants {
            #expect(CivilTime.iso8601(t) == formatter.string(from: Date(timeIntervalSince1970: t)), "\(t)")
        }
        #expect(CivilTime.iso8601(.nan) == nil && CivilTime.iso8601(.infinity) == nil && CivilTime.iso8601(1e300) == nil)
    }

    @Test("HTTP dates: the preferred format parses exactly, anything else is refused")
    func httpDates() {
        #expect(CivilTime.httpDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(CivilTime.httpDate("Tue, 29 Feb 2028 23:59:59 GMT") == 1_835_481_599)
        for bad in ["Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "Sun, 06 Nov 1994 08:49:37 UTC",
                    "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                    "Sun, 99 Nov 1994 08:49:37 GMT", "", String(repeating: "9", count: 10_000)] {
            #expect(CivilTime.httpDate(bad) == nil, "\(bad.prefix(40))")
        }
    }
}

@Suite("Trusted catalog keys", .ownThreads, .networkGuard)
struct TrustedKeysTests {
    @Test("the keys built in are exactly Catalog/keys/*.pub, and each is an Ed25519 public key")
    func builtInMatchesTheFolder() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Catalog/keys").path
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".pub") }.sorted()
        #expect(files.map { String($0.dropLast(4)) } == TrustedCatalogKeys.shipped.map(\.name).sorted())
        for (name, pem) in TrustedCatalogKeys.shipped {
            let text = try String(contentsOfFile: folder + "/\(name).pub", encoding: .utf8)
            #expect(text == pem, "Catalog/keys/\(name).pub differs from ShippedKeys.swift: run Scripts/embed-catalog")
            #expect(Ed25519.isPublicKey(pem))
        }
        // No private key in the folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).allSatisfy { $0.hasSuffix(".pub") })
    }

    @Test("base64 round-trips and refuses what is not canonical")
    func base64() {
        for n in 0..<70 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            #expect(Base64.encode(bytes) == Data(bytes).base64EncodedString())
        }
        for bad in ["abc", "ab=c", "@@@@", "YQ==YQ==", "YR=="] { #expect(Base64.decode(bad) == nil, "\(bad)") }
    }
}
