import Foundation
import GlassesTestSupport
import Testing

/// `EXTENTOS_MEMORY_MB` / `EXTENTOS_MEMORY_AVAILABLE_MB` set to a value the tool cannot use:
/// the built `glasses-local` must say so — once on stderr, in `auto --explain`, in
/// `auto --json` and in `doctor` — and use the device's own reading instead. Before the
/// accepted range was explicit, `0` and petabyte values were dropped without a word.
@Suite("glasses-local: ignored memory overrides are reported", .ownThreads, .networkGuard)
struct MemoryOverrideTests {
    struct BadValue: CustomTestStringConvertible, Sendable {
        var variable: String
        var value: String
        /// How the value appears in messages.
        var shown: String
        var reason: String
        var testDescription: String { "\(variable)=\(shown)" }
    }

    static let tenThousandDigits = String(repeating: "9", count: 10_000)

    static let badValues: [BadValue] = {
        var cases: [BadValue] = []
        for variable in ["EXTENTOS_MEMORY_MB", "EXTENTOS_MEMORY_AVAILABLE_MB"] {
            cases += [
                BadValue(variable: variable, value: "0", shown: "0", reason: "outOfRange"),
                BadValue(variable: variable, value: "99999999999", shown: "99999999999", reason: "outOfRange"),
                BadValue(variable: variable, value: "1073741825", shown: "1073741825", reason: "outOfRange"),
                BadValue(variable: variable, value: "-1", shown: "-1", reason: "outOfRange"),
                BadValue(variable: variable, value: "garbage", shown: "garbage", reason: "notAWholeNumber"),
            ]
        }
        cases.append(BadValue(variable: "EXTENTOS_MEMORY_MB", value: tenThousandDigits,
                              shown: String(repeating: "9", count: 32) + "… (10,000 characters)", reason: "outOfRange"))
        return cases
    }()

    /// The real physical memory as the tool reads it with no override.
    static func measuredPhysicalMb(_ sb: Sandbox) throws -> Int {
        let r = try sb.run(["auto", "--json"])
        let memory = try #require(try r.jsonObject()["memory"] as? [String: Any], "\(r)")
        return try #require(memory["physicalMb"] as? Int, "\(r)")
    }

    @Test("a value outside 1…2^30 MiB, or not a number, is named once on stderr, in auto --explain, auto --json and doctor; the real reading is used",
          arguments: badValues)
    func reported(_ c: BadValue) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let measured = try Self.measuredPhysicalMb(sb)
        let env = [c.variable: c.value]
        let expectedQuote = "\(c.variable)='\(c.shown)' is ignored"

        // auto --explain reads the memory more than once in one process: one warning line.
        let explain = try sb.run(["auto", "--explain"], env: env)
        #expect(explain.status == 0, "\(explain)")
        let warnings = explain.stderrLines.filter { $0.contains(c.variable) }
        #expect(warnings.count == 1, "exactly one warning line on stderr\n\(explain)")
        if let line = warnings.first {
            #expect(line.hasPrefix("warning: \(expectedQuote)"), "\(explain)")
            #expect(line.contains("1 to 1,073,741,824 MiB"), "the line names the accepted range\n\(explain)")
            #expect(line.contains("as measured is used instead"), "the line says what is used instead\n\(explain)")
            #expect(line.count < 400, "a huge value is cut short in the message\n\(line.prefix(500))")
        }
        #expect(explain.stdoutLines.contains { $0.hasPrefix("memory: \(expectedQuote)") }, "--explain lists the ignored override\n\(explain)")

        let json = try sb.run(["auto", "--json"], env: env)
        #expect(json.status == 0, "\(json)")
        let memory = try #require(try json.jsonObject()["memory"] as? [String: Any], "\(json)")
        let problems = try #require(memory["overrideProblems"] as? [[String: Any]], "\(json)")
        #expect(problems.count == 1, "\(json)")
        #expect(problems.first?["variable"] as? String == c.variable, "\(json)")
        #expect(problems.first?["value"] as? String == c.shown, "\(json)")
        #expect(problems.first?["reason"] as? String == c.reason, "\(json)")
        if c.variable == "EXTENTOS_MEMORY_MB" {
            #expect(memory["physicalMb"] as? Int == measured, "the measured physical memory is used\n\(json)")
        }
        #expect(json.stderrLines.filter { $0.contains(c.variable) }.count == 1, "\(json)")

        let doctor = try sb.run(["doctor"], env: env)
        #expect(doctor.status == 1, "an ignored override is a failed check\n\(doctor)")
        #expect(doctor.stdoutLines.contains { $0.hasPrefix("FAIL memory override: \(expectedQuote)") }, "\(doctor)")
        #expect(!doctor.stderr.contains(c.variable), "doctor reports it in its checks, not twice\n\(doctor)")
    }

    @Test("the ends of the accepted range are used, with no warning", arguments: ["1", "1073741824", " 4096 "])
    func acceptedValues(_ value: String) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let r = try sb.run(["auto", "--json", "--explain"], env: ["EXTENTOS_MEMORY_MB": value])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let memory = try #require(try r.jsonObject()["memory"] as? [String: Any], "\(r)")
        #expect(memory["physicalMb"] as? Int == Int(value.trimmingCharacters(in: .whitespaces)), "\(r)")
        #expect((memory["overrideProblems"] as? [Any])?.isEmpty == true, "\(r)")
        let doctor = try sb.run(["doctor"], env: ["EXTENTOS_MEMORY_MB": value])
        #expect(!doctor.stdout.contains("FAIL memory override"), "\(doctor)")
    }
}
