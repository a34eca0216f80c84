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
@Suite("Hostile numbers never trap (P12)", .ownThreads)
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

    @Test("a records database with hostile reservations and timestamps: the engine answers, never traps")
    func recordsNumbers() throws {
        try StoreTestSupport.withTempDir { dir in
            let model = StoreTestSupport.filesModel("m", files: [("a.bin", 1000)])
            let engine = StoreTestSupport.engine(root: dir + "/store", catalog: StoreTestSupport.catalog([model]))
            let records = try engine.open().records
            // What a damaged or hostile database may hold (the CHECK constraints bypassed by a
            // foreign writer): reservations that overflow any sum, timestamps out of range.
            try records.write { ctx in
                try ctx.reserve("a", bytes: .max, pid: 1)
                try ctx.reserve("b", bytes: .max, pid: 2)
                try ctx.reserve("c", bytes: .max, pid: 3)
            }
            let statuses = try engine.models()
            #expect(statuses.count == 1 && statuses[0].fit.availableBytes == 0, "everything is reserved, so nothing is free")
            #expect(try records.read { try $0.reservedBytes() } == .max)
            _ = try engine.autoChoice()
            _ = try engine.deviceFit(for: "m")
        }
    }
}

/// The calendar arithmetic that replaced Foundation's date formatters, checked against them.
@Suite("CivilTime: HTTP dates and ISO 8601 without Foundation", .ownThreads)
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

@Suite("Trusted catalog keys", .ownThreads)
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
