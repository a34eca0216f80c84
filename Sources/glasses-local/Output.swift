import FoundationEssentials
import LocalModelKit

/// Where the command writes: stdout for results, stderr for messages.
struct Console {
    var json: Bool
    var quiet: Bool

    func out(_ text: String) {
        Self.write(Self.escapingControls(text) + "\n", to: 1)
    }

    /// Human text on stdout, unless `--quiet` or `--json`.
    func say(_ text: String) {
        if !quiet && !json { out(text) }
    }

    func err(_ text: String) {
        Self.write(Self.escapingControls(text) + "\n", to: 2)
    }

    /// Replaces the terminal's current line on stderr with `text`, without a newline (the
    /// progress bar): the tool's own carriage return and "erase line" sequence, then `text`
    /// with its controls escaped like every other line (a model id cannot redraw it).
    func errRedrawLine(_ text: String) {
        Self.write(Self.eraseLine + Self.escapingControls(text), to: 2)
    }

    /// Carriage return, then CSI 2 K (erase the whole line): the one terminal sequence the
    /// tool writes itself.
    static let eraseLine = "\r\u{1B}[2K"

    /// `text` with every character that could drive the terminal written out as `\uXXXX`:
    /// control characters (C0 but line feed and tab, DEL, C1: an ANSI escape sequence's ESC
    /// and CSI among them) and the bidirectional overrides that reorder what is shown. Names
    /// from outside (folders, files, a server's text) reach the output inside messages;
    /// none of them may recolour, retitle or rewrite the terminal. `\uXXXX` is also a valid
    /// JSON escape, so a JSON document (which never holds a raw control) passes unchanged.
    static func escapingControls(_ text: String, keeping kept: Set<Unicode.Scalar> = []) -> String {
        func isUnsafe(_ c: Unicode.Scalar) -> Bool {
            switch c.value {
            case 0x0A, 0x09: return false
            case 0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: return !kept.contains(c)
            default: return false
            }
        }
        guard text.unicodeScalars.contains(where: isUnsafe) else { return text }
        var out = String.UnicodeScalarView()
        for c in text.unicodeScalars {
            guard isUnsafe(c) else { out.append(c); continue }
            let hex = String(c.value, radix: 16, uppercase: true)
            out.append(contentsOf: ("\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex).unicodeScalars)
        }
        return String(out)
    }

    /// A failed write to the terminal is dropped on purpose: after a hang-up (a closed
    /// terminal, a dropped ssh session) every write fails with an I/O error, and the
    /// command must still finish what it was doing — stop the transfer, keep the partial
    /// data, exit 130 — with no one left to read a complaint. (`FileHandle.write(_:)`
    /// would trap here.)
    private static func write(_ text: String, to fd: Int32) {
        try? ProcessEnvironment.writeAll(Array(text.utf8), to: fd)
    }

    func printJSON(_ value: JSONValue) {
        var bytes = value.serializedUTF8(pretty: false)
        // The writer escapes every C0 control; what `escapingControls` would still change
        // (DEL, C1, the bidirectional overrides) starts with one of these bytes in UTF-8.
        // Without any, the bytes go out as they are (a big `list --json` is megabytes).
        guard !bytes.contains(where: { $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }) else {
            out(String(decoding: bytes, as: UTF8.self))
            return
        }
        bytes.append(UInt8(ascii: "\n"))
        try? ProcessEnvironment.writeAll(bytes, to: 1)
    }

    static var stdoutIsTerminal: Bool { ProcessEnvironment.isTerminal(1) }
}

/// What a command leaves for the end of the process: kept, not freed. `exit` follows at
/// once, and freeing a big catalog's hundred thousand objects one by one (and the models'
/// statuses, and the output document) was the last 5% of a 5,000-model `list --json`, all
/// on the main thread. Compilers skip their frees at exit the same way (clang's
/// `-disable-free`). Only values with no resource behind them: the records database is
/// still closed as before.
enum ProcessEnd {
    private static let kept = Locked<[any Sendable]>([])

    /// Keeps `value` until the process ends.
    static func keep(_ value: any Sendable) {
        kept.withLock { $0.append(value) }
    }
}

enum Format {
    /// "335.1 MiB": binary units, the same unit as every `…Mb` figure (MiB), so sizes and
    /// fit answers can be compared at a glance.
    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(n) B" }
        return (value >= 100 ? fixed(value, decimals: 0) : fixed(value, decimals: 1)) + " " + units[unit]
    }

    /// "9 of 9 files (1.2 GiB) found in the Hugging Face cache (…); nothing to fetch".
    static func foundLocally(_ found: Int, of total: Int, bytes n: Int64, in place: String) -> String {
        "\(found) of \(total) file\(total == 1 ? "" : "s") (\(bytes(n))) found in \(place)"
            + (found == total ? "; nothing to fetch" : "; the rest will be downloaded") + " (each verified first)"
    }

    /// "12 of 12 files (3.1 GiB) from the Hugging Face cache (…/snapshots/…): linked,
    /// verified, nothing downloaded"; when some were not there or were refused, how many
    /// were downloaded instead.
    static func usedLocalCopies(_ used: LocalCopyUse) -> String {
        let how = used.copied == 0 ? "linked" : used.copied == used.files.count ? "copied" : "linked (\(used.copied) copied)"
        let refused = used.refused.isEmpty ? ""
            : " (\(used.refused.count) refused there, their bytes did not match: \(used.refused.prefix(3).joined(separator: ", ")))"
        return "\(used.files.count) of \(used.total) file\(used.total == 1 ? "" : "s") (\(bytes(used.bytes))) from \(used.place) (\(used.foundIn)): \(how), verified"
            + (used.downloaded == 0 ? ", nothing downloaded" : "; \(used.downloaded) downloaded" + refused)
    }

    /// The `--json` fields of `usedLocalCopies` (after `event` and `modelId`).
    static func usedLocalCopiesFields(_ used: LocalCopyUse) -> [(key: String, value: JSONValue)] {
        [("files", .array(used.files.map(JSONValue.string))), ("bytes", .int(used.bytes)), ("total", .int(Int64(used.total))),
         ("copied", .int(Int64(used.copied))), ("refused", .array(used.refused.map(JSONValue.string))),
         ("downloaded", .int(Int64(used.downloaded))), ("place", .string(used.place)), ("foundIn", .string(used.foundIn))]
    }

    /// "12,345".
    static func grouped(_ n: Int) -> String {
        let digits = String(abs(n))
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }

    static func mb(_ n: Int) -> String { grouped(n) + " MiB" }

    /// Left-aligned columns with two spaces between them.
    static func table(_ rows: [[String]]) -> String {
        guard let width = rows.map(\.count).max() else { return "" }
        var widths = [Int](repeating: 0, count: width)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        return rows.map { row in
            row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padded(to: widths[i])
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// "1:05" or "1:02:03".
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds >= 0, seconds < 360_000 else { return "--:--" }
        let s = Int(seconds.rounded())
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return s >= 3600 ? "\(s / 3600):\(two(s / 60 % 60)):\(two(s % 60))" : "\(s / 60):\(two(s % 60))"
    }

    static func date(_ seconds: Double) -> String {
        // A timestamp from a damaged records database may be anything (P12).
        guard seconds >= 0, let text = CivilTime.iso8601(seconds) else { return "(unknown time)" }
        return text
    }

    /// `value` with `decimals` (0 or 1) digits after the point, rounded half up: "12.3".
    static func fixed(_ value: Double, decimals: Int) -> String {
        guard value.isFinite, abs(value) < 1e15 else { return "\(value)" }
        let scale = decimals == 0 ? 1.0 : 10.0
        let scaled = Int64((abs(value) * scale).rounded())
        let sign = value < 0 && scaled != 0 ? "-" : ""
        if decimals == 0 { return sign + "\(scaled)" }
        return sign + "\(scaled / 10).\(scaled % 10)"
    }
}
