import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `glasses-local prefetch` as cron runs it, through the built binary against nginx. The
/// clock, the power supply and the load come from the documented overrides
/// (EXTENTOS_NOW, EXTENTOS_POWER_SUPPLY_DIR, EXTENTOS_LOADAVG); everything else is real.
@Suite("Prefetch, unattended", .ownThreads, .networkGuard)
struct PrefetchTests {
    static let id = "pf"
    /// A device on which autoChoice wants `pf` (8 GiB: class budget 4 GiB, 6 GiB free now).
    static let device = ["EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"]

    struct Setup {
        let w: World
        let catalog: String
        let slow: String
        init() throws {
            let world = try World()
            try world.addModel("pf", files: [("weights.bin", 1 << 20), ("config.json", 600)])
            catalog = try Self.make(world, slow: false)
            slow = try Self.make(world, slow: true)
            w = world
        }

        static func make(_ w: World, slow: Bool) throws -> String {
            let r = try w.run(["catalog", "hash", w.nginx.mirror + "/pf", "--id", PrefetchTests.id, "--base-url", w.nginx.baseURL("pf", slow: slow),
                               "--required-mb", "1000", "--auto-eligible"], catalog: nil)
            try #require(r.status == 0, "\(r)")
            let path = w.root + "/catalogs/pf-\(slow ? "slow" : "fast").json"
            try r.stdout.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        func prefetch(_ args: [String], catalog: String? = nil, env: [String: String] = [:]) throws -> CLIResult {
            try w.run(["prefetch"] + args, catalog: catalog ?? self.catalog, env: PrefetchTests.device.merging(env) { $1 })
        }

        func installed() throws -> Bool { try w.isInstalled(PrefetchTests.id, catalog: catalog) }

        func history() throws -> String { try w.run(["history"], catalog: catalog).stdout }
    }

    @Test("inside the window it fetches what autoChoice wants; outside it says so and touches no network; across midnight works",
          arguments: [("01:00-06:00", "12:00:00", false), ("01:00-06:00", "05:30:00", true), ("22:00-06:00", "23:30:00", true),
                      ("22:00-06:00", "03:00:00", true), ("22:00-06:00", "07:00:00", false)])
    func window(window: String, now: String, inside: Bool) throws {
        let s = try Setup(); defer { s.w.remove() }
        let r = try s.prefetch(["--window", window], env: ["EXTENTOS_NOW": "2026-12-01T" + now])
        #expect(r.status == 0, "\(r)")
        if inside {
            #expect(r.stdout.contains("prefetch: fetching pf") && r.stdout.contains("prefetch: pf installed in"), "\(r)")
            #expect(try s.installed())
        } else {
            #expect(r.stdout == "prefetch: not now: outside the window \(window): it is \(now)\n", "one line naming the condition and the value: \(r)")
            #expect(try s.w.nginx.accessLog().isEmpty && (!s.installed()))
        }
        #expect(try s.history().contains("prefetch"), "every run leaves a history event")
    }

    @Test("the window closes mid-download: the partial is kept, exit 0 with a line; the next run resumes")
    func windowClosesMidDownload() throws {
        let s = try Setup(); defer { s.w.remove() }
        // The window closes 3 s into the run; the transfer, held to 32 KiB/s, would take 32 s:
        // only the window can end it, however slow the machine is to start the run.
        let r = try s.prefetch(["--window", "01:00-06:00", "--rate-limit", "32768"], catalog: s.slow,
                               env: ["EXTENTOS_NOW": "2026-12-01T05:59:57"])
        #expect(r.status == 0 && r.stdout.contains("the window 01:00-06:00 closed; pf stopped cleanly"), "\(r)")
        let kept = s.w.bytesUnder(s.w.partialRoot + "/pf")
        #expect(try kept > 0 && (!s.installed()), "partial kept: \(s.w.leftovers)")
        s.w.nginx.clearLog()
        let again = try s.prefetch(["--window", "01:00-06:00"], env: ["EXTENTOS_NOW": "2026-12-01T02:00:00"])
        #expect(try again.status == 0 && (s.installed()), "\(again)")
        let resumed = s.w.nginx.accessLog().filter { $0.path.hasSuffix("/weights.bin") }
        #expect(resumed.count == 1 && (resumed.first?.rangeStart ?? 0) > 0, "the next run resumes with Range: \(s.w.nginx.accessLog())")
    }

    @Test("a budget too small, and a free-space floor too high, leave the model for a later run (exit 0, one line each)")
    func budgetAndFloor() throws {
        let s = try Setup(); defer { s.w.remove() }
        let budget = try s.prefetch(["--max-bytes", "1000"])
        #expect(budget.status == 0 && budget.stdout.contains("pf skipped: needs \((1 << 20) + 600) more bytes, 1000 left of --max-bytes"), "\(budget)")
        let floor = try s.prefetch(["--min-free-mb", "1099511627776"])
        #expect(floor.status == 0 && floor.stdout.contains("pf skipped: would leave") && floor.stdout.contains("under the --min-free-mb"), "\(floor)")
        #expect(try s.w.nginx.accessLog().isEmpty && (!s.installed()))
    }

    @Test("--require-ac: on battery it waits; on mains, or with no battery at all, it fetches", arguments: ["battery", "mains", "none"])
    func power(supply: String) throws {
        let s = try Setup(); defer { s.w.remove() }
        let dir = s.w.root + "/power"
        func supplyDir(_ name: String, _ files: [String: String]) throws {
            try FileManager.default.createDirectory(atPath: dir + "/" + name, withIntermediateDirectories: true)
            for (file, value) in files { try (value + "\n").write(toFile: dir + "/\(name)/\(file)", atomically: true, encoding: .utf8) }
        }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        if supply != "none" {
            try supplyDir("BAT0", ["type": "Battery", "status": supply == "battery" ? "Discharging" : "Charging"])
            try supplyDir("AC", ["type": "Mains", "online": supply == "battery" ? "0" : "1"])
        }
        let r = try s.prefetch(["--require-ac"], env: ["EXTENTOS_POWER_SUPPLY_DIR": dir])
        #expect(r.status == 0, "\(r)")
        #expect(try s.installed() == (supply != "battery"), "\(r)")
        if supply == "battery" { #expect(r.stdout.contains("not now: on battery"), "\(r)") }
    }

    @Test("--max-load: a busy machine waits, naming the load it saw")
    func load() throws {
        let s = try Setup(); defer { s.w.remove() }
        let busy = try s.prefetch(["--max-load", "4"], env: ["EXTENTOS_LOADAVG": "9.5"])
        #expect(busy.status == 0 && busy.stdout.contains("the 1-minute load average is 9.5, not under --max-load 4.0"), "\(busy)")
        let idle = try s.prefetch(["--max-load", "4"], env: ["EXTENTOS_LOADAVG": "0.2"])
        #expect(try idle.status == 0 && (s.installed()), "\(idle)")
    }

    @Test("two prefetches at once: the second exits 0 at once, saying another is running")
    func twoAtOnce() throws {
        let s = try Setup(); defer { s.w.remove() }
        // The first holds for good once its first bytes are written (GLASSES_LOCAL_TEST_HOOK=hold@download):
        // a second that waited for it would never end (the wait's timeout kills it and
        // records that), so "at once" needs no clock.
        let first = try s.w.start(["prefetch"], catalog: s.slow, env: Self.device.merging(["GLASSES_LOCAL_TEST_HOOK": "hold@download"]) { $1 })
        try #require(first.waitForStderr("HOLD download", timeout: 60), "\(first.wait())")
        let second = try s.w.start(["prefetch"], catalog: s.catalog, env: Self.device).wait(timeout: 60)
        #expect(second.status == 0 && second.stdout.contains("another prefetch is running"), "\(second)")
        #expect(first.isRunning, "the second ended while the first was still running")
        #expect(first.killNine())
        // With the first gone (and its lock with it), the next prefetch does the work.
        let done = try s.prefetch([])
        #expect(try done.status == 0 && s.installed(), "\(done)")
        #expect(try s.history().contains("another prefetch was running; nothing done"), "the second run left its event too")
    }

    @Test("beside an interactive download of the same model, prefetch skips it (busy) and does not fail")
    func besideInteractiveDownload() throws {
        let s = try Setup(); defer { s.w.remove() }
        let interactive = try s.w.start(["download", Self.id], catalog: s.slow)
        #expect(interactive.waitUntil(timeout: 30) { (Disk.fileSize(s.w.partialRoot + "/pf/weights.bin") ?? 0) > 0 })
        let r = try s.prefetch([])
        #expect(r.status == 0 && r.stdout.contains("pf skipped: another process is downloading it"), "\(r)")
        #expect(interactive.wait().status == 0)
    }

    @Test("a transient failure exits 75 (cron or systemd retries later); a later run resumes without fetching again what it has")
    func transientFailure() throws {
        let s = try Setup(); defer { s.w.remove() }
        // Some bytes on disk first: a slow download interrupted.
        let p = try s.w.start(["download", Self.id], catalog: s.slow)
        try interruptAfter(p, wrote: 64 << 10, of: s.w.partialRoot + "/pf/weights.bin")
        // Then the origin is unreachable: nothing listens on the port.
        let dead = s.w.root + "/catalogs/pf-dead.json"
        let port = try NginxServer.freePort()
        try (try String(contentsOfFile: s.catalog, encoding: .utf8))
            .replacingOccurrences(of: "127.0.0.1:\(s.w.nginx.port)", with: "127.0.0.1:\(port)").write(toFile: dead, atomically: true, encoding: .utf8)
        let failed = try s.prefetch(["--retries", "0"], catalog: dead)
        #expect(failed.status == 75, "\(failed)")
        let kept = Disk.fileSize(s.w.partialRoot + "/pf/weights.bin") ?? 0
        #expect(kept >= 64 << 10)
        s.w.nginx.clearLog()
        let again = try s.prefetch([])
        #expect(try again.status == 0 && (s.installed()), "\(again)")
        let sent = s.w.nginx.accessLog().filter { $0.path.hasSuffix("/weights.bin") }.reduce(Int64(0)) { $0 + $1.bytesSent }
        #expect(sent <= Int64(1 << 20) - kept, "only the missing bytes: \(sent) sent, \(kept) were kept")
    }

    @Test("--dry-run says what would happen and leaves the store unchanged byte for byte; --quiet prints nothing on success")
    func dryRunAndQuiet() throws {
        let s = try Setup(); defer { s.w.remove() }
        let p = try s.w.start(["download", Self.id], catalog: s.slow)
        try interruptAfter(p, wrote: 64 << 10, of: s.w.partialRoot + "/pf/weights.bin")
        // nginx logs the interrupted request once it notices the closed connection (after
        // its rate limit's pause): waited for, so that it is not taken for the dry run's.
        var logged = false
        for _ in 0..<500 where !logged {
            logged = s.w.nginx.accessLog().contains { $0.path.hasSuffix("/pf/weights.bin") }
            if !logged { usleep(20_000) }
        }
        #expect(logged, "nginx logged the interrupted download's request")
        func snapshot() -> [String: Data] {
            var out: [String: Data] = [:]
            // The SQLite shared-memory index is rewritten by any reader (list included), so it is not compared.
            for path in Disk.regularFiles(under: s.w.store) where !path.hasSuffix("-shm") {
                out[path] = FileManager.default.contents(atPath: s.w.store + "/" + path)
            }
            return out
        }
        let before = snapshot()
        s.w.nginx.clearLog()
        let dry = try s.prefetch(["--dry-run"])
        #expect(dry.status == 0 && dry.stdout.contains("prefetch: would fetch pf ("), "\(dry)")
        #expect(snapshot() == before, "the store is unchanged")
        #expect(s.w.nginx.accessLog().isEmpty)
        let quiet = try s.prefetch(["--quiet"])
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "\(quiet)")
        #expect(try s.installed())
    }
}

extension PrefetchTests {
    @Test("--rate-limit is one budget for all connections: 32 MiB over 4 files take at least 32 MiB / the cap (the rate is printed)")
    func rateLimit() throws {
        let w = try World(); defer { w.remove() }
        let files = (0..<4).map { ("part\($0).bin", 8 << 20) }
        try w.addModel("big", files: files)
        let r0 = try w.run(["catalog", "hash", w.nginx.mirror + "/big", "--id", "big", "--base-url", w.nginx.baseURL("big"),
                            "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(r0.status == 0, "\(r0)")
        let catalog = w.root + "/catalogs/big.json"
        try r0.stdout.write(toFile: catalog, atomically: true, encoding: .utf8)
        let cap = 16 << 20
        let total = files.reduce(0) { $0 + $1.1 }
        let start = Date()
        let r = try w.run(["prefetch", "--rate-limit", "\(cap)"], catalog: catalog, env: Self.device)
        let seconds = Date().timeIntervalSince(start)
        #expect(r.status == 0 && r.stdout.contains("big installed"), "\(r)")
        let sent = w.nginx.accessLog().filter { $0.path.hasPrefix("/big/") }.reduce(Int64(0)) { $0 + $1.bytesSent }
        #expect(sent == Int64(total), "every byte went through the one budget, once: \(w.nginx.accessLog())")
        let rate = Double(total) / seconds
        print("rate-limit: 32 MiB in \(String(format: "%.2f", seconds)) s = \(String(format: "%.2f", rate / Double(cap)))x the \(cap) B/s cap")
        // A lower bound that holds on any machine: the bucket starts empty and fills at the
        // cap, and one chunk (libcurl's 256 KiB buffer) may run it into debt, so the run
        // cannot move `total` bytes in less than (total - 1 MiB) / cap seconds, however fast
        // it is otherwise. Without the limiter (or with one bucket per connection) a
        // loopback transfer takes a fraction of that.
        let floor = Double(total - (1 << 20)) / Double(cap)
        #expect(seconds >= floor, "32 MiB took \(seconds) s: at most \(cap) B/s allows no less than \(floor) s")
    }
}

extension PrefetchTests {
    /// A catalog of one auto-eligible model `id` from the mirror folder `folder` (and `voice`,
    /// a voice from the folder `voice`, when given).
    static func catalog(_ w: World, _ folder: String, id: String, voice: String? = nil) throws -> String {
        let llm = try w.run(["catalog", "hash", w.nginx.mirror + "/" + folder, "--id", id, "--base-url", w.nginx.baseURL(folder),
                             "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(llm.status == 0, "\(llm)")
        try llm.stdout.write(toFile: w.root + "/catalogs/\(id).json", atomically: true, encoding: .utf8)
        guard let voice else { return w.root + "/catalogs/\(id).json" }
        let v = try w.run(["catalog", "hash", w.nginx.mirror + "/" + voice, "--id", "v", "--kind", "voice",
                           "--base-url", w.nginx.baseURL(voice)], catalog: nil)
        try #require(v.status == 0, "\(v)")
        try v.stdout.write(toFile: w.root + "/catalogs/v.json", atomically: true, encoding: .utf8)
        return try w.mergedCatalog([w.root + "/catalogs/\(id).json", w.root + "/catalogs/v.json"])
    }

    @Test("--json gives one object a line; --include-voice fetches the voice too")
    func jsonAndVoice() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("pf", files: [("weights.bin", 100_000)])
        try w.addModel("voice", files: [("model.onnx", 50_000)])
        let catalog = try Self.catalog(w, "pf", id: "pf", voice: "voice")
        let r = try w.run(["prefetch", "--include-voice", "--json"], catalog: catalog, env: Self.device)
        #expect(r.status == 0, "\(r)")
        let events = r.stdoutLines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(events.count == r.stdoutLines.count, "every line is one JSON object: \(r.stdout)")
        let fetched = events.filter { $0["event"] as? String == "fetched" }.compactMap { $0["modelId"] as? String }
        #expect(fetched == ["pf", "v"], "the target, then the voice: \(r.stdout)")
    }

    /// A wait is a matter of time, and its length is random: the run waits 0…86,400 s (the
    /// most --jitter allows), drawn again while it comes out under a minute. No clock is
    /// compared: while it waits, a whole prefetch started after its wait began (another
    /// model, another store, the same nginx) runs to the end, and the waiting run still has
    /// made no request. A run that only announced its wait would have fetched long before.
    @Test("--jitter waits before any network use: a whole prefetch started after the wait began ends first, and the waiting run has made no request; Ctrl-C ends the wait")
    func jitterWaitsBeforeNetworkUse() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("pf", files: [("weights.bin", 100_000)])
        try w.addModel("other", files: [("weights.bin", 100_000)])
        let catalog = try Self.catalog(w, "pf", id: "pf")
        let otherCatalog = try Self.catalog(w, "other", id: "other")

        func jitterEvent(_ p: CLIProcess) -> [String: Any]? {
            p.stdoutSoFar.split(separator: "\n").lazy.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                .first { $0["event"] as? String == "jitter" }
        }
        var waiting: (process: CLIProcess, seconds: Double)?
        for _ in 0..<5 where waiting == nil {
            let p = try w.start(["prefetch", "--jitter", "86400", "--json"], catalog: catalog, env: Self.device)
            try #require(p.waitUntil(timeout: 60) { jitterEvent(p) != nil }, "the wait is announced: \(p.wait())")
            let seconds = try #require(jitterEvent(p)?["seconds"] as? Double)
            #expect(seconds >= 0 && seconds <= 86_400, "\(seconds)")
            if seconds >= 60 {
                waiting = (p, seconds)
            } else {
                p.send(SIGINT)
                _ = p.wait()
            }
        }
        let (p, seconds) = try #require(waiting, "five waits under a minute out of 0…86,400 s")

        let store = w.store
        w.store = w.root + "/other-store"
        let other = try w.run(["prefetch", "--json"], catalog: otherCatalog, env: Self.device)
        w.store = store
        #expect(other.status == 0 && other.stdout.contains("\"fetched\""), "the other prefetch ran to the end: \(other)")
        #expect(!w.nginx.requests(for: "other/weights.bin").isEmpty, "it used the network: \(w.nginx.accessLog())")
        #expect(p.isRunning, "the jittered run is still waiting its \(seconds) s")
        #expect(w.nginx.requests(for: "pf/weights.bin").isEmpty && !p.stdoutSoFar.contains("\"fetching\""),
                "the jittered run used the network during its \(seconds) s wait: \(w.nginx.accessLog())\n\(p.stdoutSoFar)")

        // Ctrl-C ends the wait: interrupted, nothing fetched.
        p.send(SIGINT)
        let r = p.wait()
        #expect(r.status == 130, "\(r)")
        #expect(w.nginx.requests(for: "pf/weights.bin").isEmpty, "\(w.nginx.accessLog())")
        #expect(try !w.isInstalled("pf", catalog: catalog))
    }
}
