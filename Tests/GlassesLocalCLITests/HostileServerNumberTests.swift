import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// P12 through the built command: a server's `Retry-After` of any size or shape never
/// traps. Values beyond what a run waits end it with exit 75 (temporary) and a message;
/// values that are not a number are ignored (the usual backoff applies). Either way no
/// space reservation is left behind.
@Suite("Reliability: hostile numbers from a server never trap", .ownThreads, .networkGuard)
struct HostileServerNumberTests {
    static let faultServerScript = PackageRoot.path() + "/Tests/Tools/faultserver.py"

    struct Case: CustomTestStringConvertible, Sendable {
        var retryAfter: String
        /// True when the value is a number too long to wait for (exit 75 at once, the message says so).
        var tooLong: Bool
        var testDescription: String { retryAfter.count > 40 ? "\(retryAfter.count) digits" : "'\(retryAfter)'" }
    }

    static let cases: [Case] = [
        Case(retryAfter: "86400", tooLong: true),
        Case(retryAfter: "9223372036854775807", tooLong: true),       // Int.max
        Case(retryAfter: "9223372036854775808", tooLong: true),       // Int.max + 1
        Case(retryAfter: "99999999999999999999", tooLong: true),
        Case(retryAfter: String(repeating: "9", count: 10_000), tooLong: true),
        Case(retryAfter: "-1", tooLong: false),
        Case(retryAfter: "1e400", tooLong: false),
        Case(retryAfter: "NaN", tooLong: false),
        Case(retryAfter: "inf", tooLong: false),
    ]

    /// `--retry-delay` for these runs: the first retry of a file waits this ± 20 % when the
    /// server's Retry-After is ignored (TransferPolicy.backoff).
    static let retryDelay = 0.5

    @Test("503 with a hostile Retry-After: exit 75 with a message, no crash, no reservation left; an ignored value leaves the usual backoff",
          arguments: cases)
    func retryAfter(_ c: Case) throws {
        let w = try World(); defer { w.remove() }
        let server = try PortServer(python: Self.faultServerScript)
        defer { server.stop() }
        try w.addModel("ra", files: [("model.bin", 1000)])
        let catalog = try w.filesCatalog("ra", id: "ra", baseURL: "http://127.0.0.1:\(server.port)/m/")
        let spec: [String: Any] = ["path": "/m/model.bin", "size": 1000, "seed": 1, "status": 503, "retry_after": c.retryAfter]
        let body = String(decoding: try JSONSerialization.data(withJSONObject: spec), as: UTF8.self)
        let post = try World.tool("/usr/bin/env", ["python3", "-c", """
            import sys, urllib.request
            r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), method="POST"))
            sys.exit(0 if r.status == 200 else 1)
            """, "http://127.0.0.1:\(server.port)/_fault", body])
        try #require(post.status == 0, "configuring the fault server: \(post)")

        let r = try w.run(["download", "ra", "--retries", "1", "--retry-delay", "\(Self.retryDelay)", "--json"], catalog: catalog, timeout: 60)
        #expect(r.status == 75, "exit 75 (temporary), not a crash\n\(r.description.prefix(3000))")
        #expect(r.stderr.contains("model.bin of ra could not be fetched"), "\(r.description.prefix(3000))")
        // What the run did with the value: the --json retry events, and the requests the
        // server saw (its own log, with the times it received them).
        let retries = Check.jsonLines(r).filter { $0["event"] as? String == "retry" }
        let stats = try World.tool("/usr/bin/env", ["python3", "-c", """
            import json, sys, urllib.request
            print(json.dumps(json.load(urllib.request.urlopen(sys.argv[1])).get("/m/model.bin", {"log": []})["log"]))
            """, "http://127.0.0.1:\(server.port)/_stats"])
        let log = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [[String: Any]], "\(stats)")
        if c.tooLong {
            #expect(r.stderr.contains("the server asks to retry after"), "the message says why\n\(r.description.prefix(3000))")
            #expect(retries.isEmpty && log.count == 1, "a delay too long to wait for ends the run at once, without a retry: \(retries), \(log.count) requests")
        } else {
            // Ignored: one retry (--retries 1), after the usual backoff rather than anything
            // the value could have meant (0, a negative wait, forever).
            #expect(log.count == 2, "the first request and one retry: \(log)")
            #expect(retries.count == 1, "one retry event: \(r.stdout)")
            let delay = try #require((retries.first?["delaySeconds"] as? NSNumber)?.doubleValue, "\(r.stdout)")
            #expect(delay >= 0.8 * Self.retryDelay && delay <= 1.2 * Self.retryDelay,
                    "the retry waits the usual backoff (\(Self.retryDelay) s ± 20 %), got \(delay) s")
            #expect(retries.first?["cause"] as? String == "HTTP 503", "\(retries)")
            // The server's clock: the 503 cannot have reached the client before the server
            // began answering it, so the retry comes at least `delay` after that start
            // (less 0.01 s: the event rounds the delay to hundredths).
            if log.count == 2, let firstStart = (log[0]["start"] as? NSNumber)?.doubleValue,
               let secondStart = (log[1]["start"] as? NSNumber)?.doubleValue {
                #expect(secondStart - firstStart >= delay - 0.01,
                        "the server saw the retry \(secondStart - firstStart) s after the 503's request, before the \(delay) s backoff")
            } else {
                Issue.record("the server's log has no times: \(log)")
            }
        }
        // No reservation outlives the run (read with Python's sqlite3, apart from the code under test).
        let count = try World.tool("/usr/bin/env", ["python3", "-c",
            "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT COUNT(*) FROM reservations').fetchone()[0])",
            w.store + "/records.sqlite3"])
        #expect(count.status == 0 && count.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0",
                "no space stays reserved after the run: \(count)")
    }

    @Test("numeric options given Int.max, Int.max + 1, -1, 1e400, NaN or 10,000 digits: a usage error (exit 2), never a crash")
    func hostileOptionValues() throws {
        let w = try World(); defer { w.remove() }
        let values = ["9223372036854775807", "9223372036854775808", "-1", "1e400", "NaN", String(repeating: "9", count: 10_000)]
        let options: [(command: [String], option: String)] = [
            (["download", "x"], "--stall-timeout"), (["download", "x"], "--parallel"), (["download", "x"], "--retries"),
            (["download", "x"], "--retry-delay"), (["history"], "--limit"), (["auto"], "--memory-share"),
        ]
        for (command, option) in options {
            for value in values {
                let r = try w.run(command + [option, value], catalog: nil, timeout: 30)
                // `history --limit Int.max` is a fine way to say "everything".
                if option == "--limit" && value == values[0] {
                    #expect(r.status == 0, "\(r)")
                    continue
                }
                #expect(r.status == 2, "\(option) \(value.prefix(30)): \(r.description.prefix(600))")
                #expect(r.stderr.contains(option), "the message names \(option)\n\(r.description.prefix(600))")
            }
        }
    }
}
