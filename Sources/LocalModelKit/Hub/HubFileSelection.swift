/// Which files of a Hub repository `add` takes: by default the weights and what loads them
/// (`*.safetensors`, `*.json`, `tokenizer.model`, `*.txt`, `*.tiktoken`, `*.jinja`), never a
/// README, `.gitattributes`, an image or the other weight formats (`*.bin`, `*.pt`, `*.pth`,
/// `*.gguf`, `*.onnx`) unless an `--include` glob names them; an `--exclude` glob always
/// wins. Globs are the Hub client's (`fnmatch`, as its `allow_patterns` and
/// `ignore_patterns`): matched against the whole path, `*` crossing `/`, a pattern ending
/// with `/` meaning everything under that folder.
public struct HubFileSelection: Sendable, Equatable {
    /// Globs of files to take beside the defaults (`--include`), even of kinds never taken otherwise.
    public var include: [String]
    /// Globs of files to leave out (`--exclude`); they win over everything.
    public var exclude: [String]

    /// What is taken when no glob says otherwise.
    public static let defaults = ["*.safetensors", "*.json", "tokenizer.model", "*.txt", "*.tiktoken", "*.jinja"]

    /// The defaults alone: no glob given.
    public init() {
        include = []
        exclude = []
    }

    /// - Throws: `invalidAddRequest` for an empty glob, one over 256 bytes, or one with a
    ///   control character.
    public init(include: [String] = [], exclude: [String] = []) throws(LocalModelError) {
        for (option, globs) in [("--include", include), ("--exclude", exclude)] {
            for glob in globs {
                if glob.isEmpty || glob.utf8.count > 256 || CatalogValidator.hasControlByte(glob) {
                    throw .invalidAddRequest(what: "\(option) '\(glob.prefix(80))'",
                                             problem: "a glob has 1 to 256 characters and no control character (for example '*.gguf' or 'onnx/')")
                }
            }
        }
        self.include = include
        self.exclude = exclude
    }

    /// Whether `path` is taken, and why not when it is not.
    public func decide(_ path: String) -> (taken: Bool, reason: String?) {
        if let glob = exclude.first(where: { Glob.matches($0, path) }) { return (false, "--exclude \(glob)") }
        if include.contains(where: { Glob.matches($0, path) }) { return (true, nil) }
        if let reason = Self.neverTaken(path) { return (false, reason) }
        if Self.defaults.contains(where: { Glob.matches($0, path) }) { return (true, nil) }
        return (false, "not a model file by default")
    }

    /// Why a file is never taken unless an `--include` names it.
    static func neverTaken(_ path: String) -> String? {
        let name = FileIO.lastComponent(of: path)
        let lower = name.lowercased()
        if lower.hasPrefix("readme") { return "a README" }
        if lower == ".gitattributes" || lower == ".gitignore" { return "Git's own file" }
        let ext = lower.afterLast(".") ?? ""
        if ["png", "jpg", "jpeg", "gif", "webp", "svg", "bmp", "ico", "tif", "tiff"].contains(ext) { return "an image" }
        switch ext {
        case "bin": return "*.bin (PyTorch weights)"
        case "pt", "pth": return "*.\(ext) (PyTorch weights)"
        case "gguf": return "GGUF (llama.cpp weights)"
        case "onnx": return "ONNX"
        default: return nil
        }
    }
}

/// Shell-style globs as Python's `fnmatch.fnmatchcase` reads them (the Hub client's): `*`
/// any run of characters, `/` included; `?` one character; `[abc]`, `[a-z]`, `[!abc]` one
/// character of (or not of) a set, a `]` first in the set taken literally, an unclosed `[`
/// matched as itself. Case-sensitive. A pattern ending with `/` matches everything under
/// that folder (the client appends `*`). Linear in practice: one backtracking point, the
/// last `*`, so no pattern makes it explode.
package enum Glob {
    enum Token: Equatable {
        case star
        case any
        case literal(Unicode.Scalar)
        case set(negated: Bool, ranges: [ClosedRange<UInt32>])

        func matches(_ c: Unicode.Scalar) -> Bool {
            switch self {
            case .star, .any: return true
            case .literal(let l): return l == c
            case let .set(negated, ranges): return ranges.contains { $0.contains(c.value) } != negated
            }
        }
    }

    static func compile(_ pattern: String) -> [Token] {
        var scalars = Array(pattern.unicodeScalars)
        if scalars.last == "/" { scalars.append("*") }
        var tokens: [Token] = []
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            switch c {
            case "*":
                if tokens.last != .star { tokens.append(.star) }
                i += 1
            case "?":
                tokens.append(.any)
                i += 1
            case "[":
                var j = i + 1
                var negated = false
                if j < scalars.count && scalars[j] == "!" { negated = true; j += 1 }
                if j < scalars.count && scalars[j] == "]" { j += 1 }
                while j < scalars.count && scalars[j] != "]" { j += 1 }
                guard j < scalars.count else {
                    tokens.append(.literal("["))
                    i += 1
                    continue
                }
                var k = i + 1 + (negated ? 1 : 0)
                var ranges: [ClosedRange<UInt32>] = []
                while k < j {
                    if k + 2 < j, scalars[k + 1] == "-" {
                        let (a, b) = (scalars[k].value, scalars[k + 2].value)
                        if a <= b { ranges.append(a...b) }   // a reversed range matches nothing, as in Python
                        k += 3
                    } else {
                        ranges.append(scalars[k].value...scalars[k].value)
                        k += 1
                    }
                }
                tokens.append(.set(negated: negated, ranges: ranges))
                i = j + 1
            default:
                tokens.append(.literal(c))
                i += 1
            }
        }
        return tokens
    }

    /// Whether `text` matches `pattern` whole.
    package static func matches(_ pattern: String, _ text: String) -> Bool {
        let tokens = compile(pattern)
        let chars = Array(text.unicodeScalars)
        var t = 0, c = 0
        var starAt: Int?
        var resumeAt = 0
        while c < chars.count {
            if t < tokens.count, tokens[t] != .star, tokens[t].matches(chars[c]) {
                t += 1
                c += 1
            } else if t < tokens.count, tokens[t] == .star {
                starAt = t
                resumeAt = c
                t += 1
            } else if let star = starAt {
                t = star + 1
                resumeAt += 1
                c = resumeAt
            } else {
                return false
            }
        }
        while t < tokens.count, tokens[t] == .star { t += 1 }
        return t == tokens.count
    }
}
