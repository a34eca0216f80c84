import Foundation
import GlassesTestSupport
import Testing

/// Names from outside (a folder, a store path) never drive the terminal: control characters
/// and ANSI sequences in them are printed as `\uXXXX`, in every message that echoes them.
@Suite("Text output escapes control characters", .ownThreads, .networkGuard)
struct OutputEscapeTests {
    static let hostile = "x\u{1B}[31mRED\u{1B}]0;pwned\u{07}\r\u{202E}y"

    func expectClean(_ r: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) {
        for (name, text) in [("stdout", r.stdout), ("stderr", r.stderr)] {
            let raw = text.unicodeScalars.filter { [0x1B, 0x07, 0x0D, 0x202E].contains($0.value) }
            #expect(raw.isEmpty, "\(name) holds raw control characters: \(raw.map { String($0.value, radix: 16) })\n\(r)",
                    sourceLocation: sourceLocation)
        }
    }

    @Test("import from a folder whose name holds an ANSI sequence, a title change, BEL, CR and a bidi override: the message names it escaped")
    func hostileFolderName() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("esc", files: [("a.bin", 4096)])
        let catalog = try w.filesCatalog("esc", id: "esc")
        let place = w.root + "/" + Self.hostile
        try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
        let r = try w.run(["import", "esc", place], catalog: catalog)
        #expect(r.status == 1, "nothing there to import: \(r)")
        expectClean(r)
        #expect((r.stdout + r.stderr).contains("x\\u001B[31mRED\\u001B]0;pwned\\u0007\\u000D\\u202Ey"), "the name is shown, escaped: \(r)")
        let json = try w.run(["import", "esc", place, "--json"], catalog: catalog)
        #expect(throws: Never.self) { try json.jsonObject() }
    }

    @Test("on a terminal the progress bar redraws its line with the tool's own erase sequence, written raw, never shown as \\u001B")
    func progressBarOnATerminal() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("bar", files: [("weights.bin", 3 << 20)])
        let catalog = try w.filesCatalog("bar", id: "bar-model")
        // util-linux's script(1) gives the command a pseudo-terminal for its output, as a
        // person's terminal would; what it wrote comes back on script's stdout.
        let command = try ([w.binary, "--catalog", catalog, "--store", w.store, "download", "bar-model"])
            .map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let r = try Sandbox.runProcess("/usr/bin/script", ["-qec", command, "/dev/null"], environment: w.environment(),
                                       ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 120)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("\r\u{1B}[2Kbar-model ["), "the bar, drawn over its own line: \(r.stdout.debugDescription)")
        #expect(r.stdout.contains("\r\u{1B}[2Kbar-model: installed in "), "the bar erased before the summary: \(r.stdout.debugDescription)")
        #expect(!r.stdout.contains("\\u001B"), "the tool's own sequence is not escaped: \(r.stdout.debugDescription)")
    }

    @Test("a store path with control characters: doctor and list print it escaped")
    func hostileStorePath() throws {
        let w = try World(); defer { w.remove() }
        w.store = w.root + "/store-" + Self.hostile
        for args in [["doctor"], ["list"]] {
            let r = try w.run(args, catalog: nil)
            expectClean(r)
        }
    }
}
