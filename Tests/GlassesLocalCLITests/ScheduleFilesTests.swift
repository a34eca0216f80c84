import Foundation
import GlassesTestSupport
import Testing

/// The scheduling files in Scripts/schedule: the systemd user service and timer pass
/// `systemd-analyze verify` (offline, as the user manager would load them), and the
/// crontab line's command runs as written.
@Suite("Scheduling files", .ownThreads, .networkGuard)
struct ScheduleFilesTests {
    static let dir = PackageRoot.path() + "/Scripts/schedule"

    @Test("the systemd user service and timer verify, with the settings a polite nightly job needs")
    func systemdUnits() throws {
        let w = try World(); defer { w.remove() }
        // %h/.local/bin/glasses-local must exist for verify: the built binary, in a home of the sandbox's.
        let home = w.root + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.local/bin", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try w.binary, toPath: home + "/.local/bin/glasses-local")
        try FileManager.default.createDirectory(atPath: w.root + "/runtime", withIntermediateDirectories: true)
        let service = Self.dir + "/glasses-local-prefetch.service"
        let timer = Self.dir + "/glasses-local-prefetch.timer"
        var env = ProcessInfo.processInfo.environment
        env["HOME"] = home
        env["XDG_RUNTIME_DIR"] = w.root + "/runtime"
        let r = try Sandbox.runProcess("/usr/bin/systemd-analyze", ["--user", "verify", service, timer], environment: env,
                                       ioDirectory: w.root + "/io", timeout: 60)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r)")
        let serviceText = try String(contentsOfFile: service, encoding: .utf8)
        let timerText = try String(contentsOfFile: timer, encoding: .utf8)
        for setting in ["Nice=19", "IOSchedulingClass=idle", "ConditionACPower=true", "ExecStart=%h/.local/bin/glasses-local prefetch",
                        "--require-unmetered"] {
            #expect(serviceText.contains(setting), "the service sets \(setting)")
        }
        for setting in ["OnCalendar=", "RandomizedDelaySec=", "Persistent=true"] {
            #expect(timerText.contains(setting), "the timer sets \(setting)")
        }
    }

    @Test("the crontab line's command runs as written (here with --dry-run), and uses no flock")
    func crontabLine() throws {
        let s = try PrefetchTests.Setup(); defer { s.w.remove() }
        let text = try String(contentsOfFile: Self.dir + "/crontab.example", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { !$0.hasPrefix("#") && !$0.isEmpty })
        let fields = line.split(separator: " ").map(String.init)
        try #require(fields.count > 6 && fields[5].hasSuffix("/glasses-local") && fields[6] == "prefetch", "\(line)")
        #expect(!line.contains("flock"), "the tool locks itself")
        #expect(fields.contains("--require-unmetered"), "a metered connection (a phone's hotspot) is left alone")
        let r = try s.w.run(Array(fields.dropFirst(6)) + ["--dry-run"], catalog: s.catalog,
                            env: PrefetchTests.device.merging(["EXTENTOS_NOW": "2026-12-01T02:17:00"]) { $1 })
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r)")
    }
}
