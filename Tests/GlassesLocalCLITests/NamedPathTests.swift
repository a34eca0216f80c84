import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Every file the tool reads from a path a user or the environment names is opened
/// non-blocking and must be a regular file: a FIFO (which a plain open waits on forever)
/// or a device is skipped with a warning or refused with a clear error. The runner's
/// timeout turns a hang into a failure. And files the tool writes where a user points it
/// (`catalog keygen OUT`) never go through a link planted there.
@Suite("Named paths: reads that never wait, keys never written through links", .ownThreads, .networkGuard)
struct NamedPathTests {
    static func fifo(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try #require(mkfifo(path, 0o644) == 0, "mkfifo \(path)")
    }

    @Test("a FIFO named x.pub in EXTENTOS_CATALOG_KEYS is skipped with a warning; list and catalog verify go on with the other keys")
    func fifoKey() throws {
        let w = try World(); defer { w.remove() }
        let keys = w.root + "/keys"
        try Self.fifo(keys + "/x.pub")
        let made = try w.run(["catalog", "keygen", w.root + "/signer"], catalog: nil)
        try #require(made.status == 0, "\(made)")
        try FileManager.default.copyItem(atPath: w.root + "/signer.pub", toPath: keys + "/signer.pub")
        let env = ["EXTENTOS_CATALOG_KEYS": keys]

        let list = try w.run(["list"], catalog: nil, env: env, timeout: 60)
        #expect(list.status == 0, "\(list)")
        #expect(list.stderr.contains("warning:") && list.stderr.contains("x.pub") && list.stderr.contains("FIFO"), "\(list)")

        let file = w.root + "/c.json"
        try Fixtures.catalog(version: 2, id: "m").write(toFile: file, atomically: true, encoding: .utf8)
        try #require(try w.run(["catalog", "sign", file, "--key", w.root + "/signer"], catalog: nil).status == 0)
        let verify = try w.run(["catalog", "verify", file], catalog: nil, env: env, timeout: 60)
        #expect(verify.status == 0 && verify.stdout.contains("valid signature by signer"), "\(verify)")

        let doctor = try w.run(["doctor", "--json"], catalog: nil, env: env, timeout: 60)
        #expect(doctor.status == 1, "\(doctor)")
        #expect((try doctor.jsonObject()["skippedKeys"] as? [String])?.first?.contains("x.pub") == true, "\(doctor)")
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        /// Arguments; `@FIFO` stands for the FIFO's path, `@CAT` for a valid catalog file.
        var arguments: [String]
        var env: [String: String] = [:]
        var status: Int32
        var testDescription: String { name }
    }

    /// Devices wherever a file is named, and FIFOs where the tool does not read the file
    /// itself (libcurl opens the CA file with a blocking read). A pipe named as an input the
    /// tool reads (`--catalog`, `catalog validate/verify/sign`) is read: `namedPipesAreRead`.
    static let cases: [Case] = [
        Case(name: "--catalog /dev/zero", arguments: ["list", "--catalog", "/dev/zero"], status: 6),
        Case(name: "EXTENTOS_CATALOG=/dev/zero", arguments: ["list"], env: ["EXTENTOS_CATALOG": "/dev/zero"], status: 6),
        Case(name: "catalog validate /dev/zero", arguments: ["catalog", "validate", "/dev/zero"], status: 6),
        Case(name: "catalog verify --sig /dev/zero", arguments: ["catalog", "verify", "@CAT", "--sig", "/dev/zero"], status: 1),
        Case(name: "catalog verify --key /dev/zero", arguments: ["catalog", "verify", "@CAT", "--key", "/dev/zero"], status: 1),
        Case(name: "catalog sign --key /dev/zero", arguments: ["catalog", "sign", "@CAT", "--key", "/dev/zero", "--sig", "@CAT.sig2"], status: 1),
        Case(name: "EXTENTOS_CA_FILE FIFO", arguments: ["catalog", "update", "--from", "https://127.0.0.1:9/c.json"],
             env: ["EXTENTOS_CA_FILE": "@FIFO"], status: 1),
    ]

    @Test("a pipe named as an input is read (bash's <(…), a FIFO with a writer, - for standard input); one whose writer never finishes fails after the time limit, naming it")
    func namedPipesAreRead() throws {
        let w = try World(); defer { w.remove() }
        let catalog = w.root + "/c.json"
        try Fixtures.catalog(version: 2, id: "piped-model").write(toFile: catalog, atomically: true, encoding: .utf8)
        let binary = try w.binary
        let env = w.environment()
        func bash(_ script: String) throws -> CLIResult {
            try Sandbox.runProcess("/bin/bash", ["-c", script], environment: env, ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 60)
        }
        let substituted = try bash("'\(binary)' catalog validate <(cat '\(catalog)')")
        #expect(substituted.status == 0 && substituted.stdout.contains("valid"), "\(substituted)")
        let stdin = try bash("cat '\(catalog)' | '\(binary)' --catalog - list")
        #expect(stdin.status == 0 && stdin.stdout.contains("piped-model"), "\(stdin)")
        let fifo = w.root + "/named/pipe"
        try Self.fifo(fifo)
        let written = try bash("cat '\(catalog)' > '\(fifo)' & '\(binary)' --catalog '\(fifo)' list; status=$?; wait; exit $status")
        #expect(written.status == 0 && written.stdout.contains("piped-model"), "\(written)")
        let terminal = try bash("'\(binary)' --catalog - list < /dev/null")
        #expect(terminal.status == 6 && terminal.stderr.contains("standard input"), "a device on stdin is refused: \(terminal)")
        // No writer ever: the read ends at the time limit (30 s), never waits forever.
        let stuck = try w.run(["list", "--catalog", fifo], catalog: nil, timeout: 90)
        #expect(stuck.status == 6 && stuck.stderr.contains(fifo) && stuck.stderr.contains("did not end within 30 s"), "\(stuck)")
    }

    @Test("a device, or a FIFO the tool does not read itself, where a file is named is refused at once with a clear error", arguments: cases)
    func refused(_ c: Case) throws {
        let w = try World(); defer { w.remove() }
        let fifo = w.root + "/named/pipe"
        try Self.fifo(fifo)
        let catalog = w.root + "/c.json"
        try Fixtures.catalog(version: 2, id: "m").write(toFile: catalog, atomically: true, encoding: .utf8)
        try "not checked before the key is read\n".write(toFile: catalog + ".sig", atomically: true, encoding: .utf8)
        func fill(_ s: String) -> String { s.replacingOccurrences(of: "@FIFO", with: fifo).replacingOccurrences(of: "@CAT", with: catalog) }
        let r = try w.run(c.arguments.map(fill), catalog: nil, env: c.env.mapValues(fill), timeout: 60)
        #expect(r.status == c.status, "\(r)")
        let named = c.name.contains("/dev/zero") ? "/dev/zero" : fifo
        #expect(r.stderr.contains(named) && (r.stderr.contains("FIFO") || r.stderr.contains("device")), "names the path and what it is: \(r)")
    }

    @Test("FIFOs in EXTENTOS_POWER_SUPPLY_DIR are not waited on: prefetch --require-ac answers")
    func fifoPowerSupply() throws {
        let w = try World(); defer { w.remove() }
        let dir = w.root + "/power"
        for file in ["AC/type", "AC/online", "BAT0/type", "BAT0/status"] { try Self.fifo(dir + "/" + file) }
        let r = try w.run(["prefetch", "--require-ac", "--dry-run"], catalog: nil, env: ["EXTENTOS_POWER_SUPPLY_DIR": dir], timeout: 60)
        #expect(r.status == 0, "\(r)")
    }

    @Test("catalog keygen never writes through a link at OUT or OUT.pub, and leaves no half pair")
    func keygenLinks() throws {
        let w = try World(); defer { w.remove() }
        let victim = w.root + "/victim"
        let original = Data("the outside file; must never change\n".utf8)
        try original.write(to: URL(fileURLWithPath: victim))
        let out = w.root + "/keys/k"
        try FileManager.default.createDirectory(atPath: w.root + "/keys", withIntermediateDirectories: true)

        try #require(symlink(victim, out) == 0)
        let first = try w.run(["catalog", "keygen", out], catalog: nil)
        #expect(first.status == 1 && first.stderr.contains(out), "\(first)")
        #expect(FileManager.default.contents(atPath: victim) == original, "the private key went through the link")
        try FileManager.default.removeItem(atPath: out)

        let dangling = w.root + "/would-be-created.pub"
        try #require(symlink(dangling, out + ".pub") == 0)
        let second = try w.run(["catalog", "keygen", out], catalog: nil)
        #expect(second.status == 1, "\(second)")
        #expect(!FileManager.default.fileExists(atPath: dangling), "the public key was written through the link")
        #expect(!FileManager.default.fileExists(atPath: out), "no private key is left without its public half")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: w.root + "/keys")) ?? []) == ["k.pub"], "no temporary file left")
    }
}
