// Credentials: which one a source asks for, where each is found (never what it is), and
// which request may carry it. README, "Where models come from", states the rules.

/// The credential a catalog source asks for (`"auth"` on a source in the catalog).
public enum SourceAuth: String, Sendable, CaseIterable {
    /// A Hugging Face access token (`HuggingFaceToken`), sent as `Authorization: Bearer` to
    /// the source's own scheme, host and port only.
    case huggingface
}

/// A value that never shows itself: not in `description`, not in a debugger's reflection,
/// not in an interpolated error. Only the transfer reads it, to build a request header.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let value: String
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Swift.Mirror { Swift.Mirror(self, children: []) }
}

/// Where the Hugging Face token is found, by the Hub client's (`huggingface_hub`) rules:
/// `$HF_TOKEN` (else the older `$HUGGING_FACE_HUB_TOKEN`), else the file `$HF_TOKEN_PATH`,
/// else `$HF_HOME/token`, else `$XDG_CACHE_HOME/huggingface/token`, else
/// `~/.cache/huggingface/token`. Line breaks anywhere in the token are removed and the
/// whitespace around it trimmed; what is left empty counts as no token.
/// `HF_HUB_DISABLE_IMPLICIT_TOKEN=1` (`1`, `ON`, `YES`, `TRUE`) sends none.
/// The file is read only when a request needs the token.
public struct HuggingFaceToken: Sendable, Equatable {
    /// The variable holding the token, when one does.
    let variable: String?
    let variableToken: Secret?
    /// The token file (read when no variable holds a token), and the variable that named it
    /// (`HF_TOKEN_PATH`, `HF_HOME`, `XDG_CACHE_HOME`, or `HOME` for the default).
    public let file: String?
    public let fileNamedBy: String
    /// `HF_HUB_DISABLE_IMPLICIT_TOKEN` is set: no token is ever sent.
    public let disabled: Bool

    public init(environment: [String: String]) {
        disabled = EnvironmentFlag.isTrue(environment["HF_HUB_DISABLE_IMPLICIT_TOKEN"])
        var found: (String, String)?
        for name in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
            // As the Hub client: an empty variable is no variable; the cleaned value decides.
            if let raw = environment[name], !raw.isEmpty {
                found = Self.clean(raw).map { (name, $0) }
                break
            }
        }
        variable = found?.0
        variableToken = found.map { Secret(value: $0.1) }
        let home = EnvironmentFlag.home(environment)
        func expand(_ path: String) -> String {
            guard path == "~" || path.hasPrefix("~/"), let home else { return path }
            return home + path.dropFirst()
        }
        if let path = environment["HF_TOKEN_PATH"], !path.isEmpty {
            (file, fileNamedBy) = (expand(path), "HF_TOKEN_PATH")
        } else if let hfHome = environment["HF_HOME"], !hfHome.isEmpty {
            (file, fileNamedBy) = (expand(hfHome) + "/token", "HF_HOME")
        } else if let cache = environment["XDG_CACHE_HOME"], !cache.isEmpty {
            (file, fileNamedBy) = (expand(cache) + "/huggingface/token", "XDG_CACHE_HOME")
        } else {
            (file, fileNamedBy) = (home.map { $0 + "/.cache/huggingface/token" }, "HOME")
        }
    }

    /// The token as the Hub client cleans it: CR and LF removed anywhere, whitespace trimmed;
    /// nil when nothing is left.
    static func clean(_ raw: String) -> String? {
        let token = String(raw.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }.map(Character.init)).trimmingWhitespace()
        return token.isEmpty ? nil : token
    }

    /// Where a token would come from now, for `doctor` and messages: the variable, or the
    /// file when it exists (the file is not read: its permissions are what `doctor` checks).
    public var place: String? {
        if disabled { return nil }
        if let variable { return "$" + variable }
        if let file, (try? FileIO.statusFollowingLinks(file)) != nil { return file }
        return nil
    }

    /// The token and where it came from (`$HF_TOKEN`, or the file's path); nil when there is
    /// none, or sending one is disabled. An unreadable file (a folder, a FIFO, no permission)
    /// counts as none.
    func resolve() -> (token: Secret, from: String)? {
        if disabled { return nil }
        if let variable, let variableToken { return (variableToken, "$" + variable) }
        guard let file, let bytes = try? FileIO.readFile(atPath: file, limit: 64 << 10),
              let token = Self.clean(String(decoding: bytes, as: UTF8.self)) else { return nil }
        return (Secret(value: token), file)
    }

    /// What to do to have a token sent, for messages.
    public var howToSet: String {
        if disabled { return "HF_HUB_DISABLE_IMPLICIT_TOKEN is set, so no token is sent: unset it, and set HF_TOKEN" }
        let fileText = file.map { " (or write it to \($0)" + (fileNamedBy == "HF_TOKEN_PATH" ? ", named by HF_TOKEN_PATH" : "") + "; 'hf auth login' does)" } ?? ""
        return "set HF_TOKEN to a Hugging Face access token\(fileText)"
    }
}

/// The netrc file libcurl reads for every request (login and password per machine, as curl
/// reads it): `$NETRC`, else `~/.netrc`.
public struct NetrcFile: Sendable, Equatable {
    public let path: String?
    /// `NETRC`, or `HOME` for the default.
    public let namedBy: String

    public init(environment: [String: String]) {
        if let path = environment["NETRC"], !path.isEmpty {
            (self.path, namedBy) = (path, "NETRC")
        } else {
            (self.path, namedBy) = (EnvironmentFlag.home(environment).map { $0 + "/.netrc" }, "HOME")
        }
    }

    /// The file when it exists (used then; a missing file is no credential, not an error).
    public var existing: String? {
        guard let path, (try? FileIO.statusFollowingLinks(path)) != nil else { return nil }
        return path
    }
}

/// The credentials a transfer may use: the Hugging Face token for the origins of the sources
/// that ask for it, netrc for every request.
public struct TransferCredentials: Sendable, Equatable {
    public var huggingFace: HuggingFaceToken
    public var netrc: NetrcFile
    /// Origins (`URLOrigin`) whose requests carry the Hugging Face token: those of the sources
    /// with `"auth": "huggingface"` of the model being fetched (set by the engine, never
    /// from a redirect or a mirror).
    public var bearerOrigins: Set<String> = []

    public init(environment: [String: String]) {
        huggingFace = HuggingFaceToken(environment: environment)
        netrc = NetrcFile(environment: environment)
    }

    /// The credentials of one run: the token read once (only when some origin takes it),
    /// and the netrc file checked to be a regular file before libcurl opens it (P13: a FIFO
    /// named by `NETRC` would hang every transfer).
    func resolved() throws(TransferFault) -> ResolvedCredentials {
        var netrcFile: String?
        if let path = netrc.existing {
            do { _ = try FileIO.openForReading(path) } catch { throw .netrcFile(error) }
            netrcFile = path
        }
        let token = bearerOrigins.isEmpty ? nil : huggingFace.resolve()
        return ResolvedCredentials(token: token, bearerOrigins: bearerOrigins, netrcFile: netrcFile, huggingFace: huggingFace)
    }
}

/// The credentials as one run uses them.
struct ResolvedCredentials {
    var token: (token: Secret, from: String)?
    var bearerOrigins: Set<String>
    var netrcFile: String?
    var huggingFace: HuggingFaceToken

    static let none = ResolvedCredentials(token: nil, bearerOrigins: [], netrcFile: nil,
                                          huggingFace: HuggingFaceToken(environment: [:]))

    /// The `Authorization` header for a request to `url`, and where its token came from: only
    /// when `url`'s scheme, host and port are one of `bearerOrigins`.
    func authorization(for url: String) -> (header: String, from: String)? {
        guard let token, let origin = URLOrigin.of(url), bearerOrigins.contains(origin) else { return nil }
        return ("Authorization: Bearer " + token.token.value, token.from)
    }

    /// What a request to `url` that was refused with 401/403 carried, for the message.
    func sent(to url: String, bearerFrom: String?) -> CredentialSent {
        if let bearerFrom { return .huggingFaceToken(from: bearerFrom) }
        if let origin = URLOrigin.of(url), bearerOrigins.contains(origin) { return .noHuggingFaceToken(howToSet: huggingFace.howToSet) }
        if let netrcFile { return .netrc(file: netrcFile) }
        return .nothing
    }
}

/// What a request answered 401 or 403 carried (never the credential itself).
public enum CredentialSent: Sendable, Equatable {
    /// A Hugging Face token, read from `from` (`$HF_TOKEN`, or a file's path).
    case huggingFaceToken(from: String)
    /// The source asks for a Hugging Face token and none was found; `howToSet` says what to set.
    case noHuggingFaceToken(howToSet: String)
    /// No token; libcurl looked in this netrc file for the host's login.
    case netrc(file: String)
    /// No credential at all (no netrc file).
    case nothing

    /// What to do, for the error's message.
    func advice(host: String) -> String {
        switch self {
        case .huggingFaceToken(let from):
            return "the Hugging Face token from \(from) was refused. Check that it is valid and that its account may read this repository (a gated model's terms are accepted on its Hub page first), or set HF_TOKEN to another token."
        case .noHuggingFaceToken(let howToSet):
            return "this source needs a Hugging Face token and none was sent: \(howToSet)."
        case .netrc(let file):
            return "it needs credentials, and \(file) has none for \(host) or they were refused. Add or correct a line 'machine \(host) login USER password PASSWORD' there (or set NETRC to such a file)."
        case .nothing:
            return "it needs credentials. Put a line 'machine \(host) login USER password PASSWORD' in ~/.netrc (mode 600), or set NETRC to such a file."
        }
    }
}

/// A URL's origin: `scheme://host:port`, lowercased, the port always written (443 for
/// https, 80 for http), any userinfo dropped. Two URLs with the same origin are the same
/// server as far as credentials go (RFC 6454).
public enum URLOrigin {
    public static func of(_ url: String) -> String? {
        let b = Array(url.utf8)
        guard let schemeEnd = schemeEnd(b) else { return nil }
        let scheme = String(decoding: b[..<(schemeEnd - 3)].map { $0 | 0x20 }, as: UTF8.self)
        guard scheme == "https" || scheme == "http" else { return nil }
        var authority = b[schemeEnd...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        guard let host = CatalogRules.hostOf(authority), !host.isEmpty else { return nil }
        // The port: after the host, or after the closing bracket of an IPv6 literal.
        let hostEnd: Int
        if authority.first == UInt8(ascii: "[") {
            hostEnd = authority.firstIndex(of: UInt8(ascii: "]")).map { $0 + 1 } ?? authority.endIndex
        } else {
            hostEnd = authority.firstIndex(of: UInt8(ascii: ":")) ?? authority.endIndex
        }
        let afterHost = authority[hostEnd...]
        var port: Int64 = scheme == "https" ? 443 : 80
        if afterHost.first == UInt8(ascii: ":"), afterHost.count > 1 {
            let digits = String(decoding: afterHost.dropFirst(), as: UTF8.self)
            guard digits.utf8.count <= 5, let value = ExternalNumber.decimal(digits), value <= 65_535 else { return nil }
            port = value
        }
        return scheme + "://" + host + ":" + String(port)
    }

    /// `url` with any userinfo (`user:password@`) replaced by `***@`, for every message that
    /// echoes a URL.
    public static func redacted(_ url: String) -> String {
        let b = Array(url.utf8)
        guard let start = schemeEnd(b) else { return url }
        let authority = b[start...].prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard let at = authority.lastIndex(of: UInt8(ascii: "@")) else { return url }
        return String(decoding: b[..<start], as: UTF8.self) + "***" + String(decoding: b[at...], as: UTF8.self)
    }

    /// The index after `scheme://`, or nil when there is none.
    private static func schemeEnd(_ b: [UInt8]) -> Int? {
        guard let colon = b.firstIndex(of: UInt8(ascii: ":")), colon > 0, b.count > colon + 2,
              b[colon + 1] == UInt8(ascii: "/"), b[colon + 2] == UInt8(ascii: "/") else { return nil }
        return colon + 3
    }
}

/// What `doctor` says about credentials: where each one was found (never its value), and
/// the files other users can read.
public struct CredentialReport: Sendable, Equatable {
    /// One line per credential source, found or not ("Hugging Face token: $HF_TOKEN").
    public var sources: [String]
    /// Whether a Hugging Face token / a netrc file was found.
    public var huggingFaceToken: String?
    public var netrcFile: String?
    /// Token or netrc files readable by the group or by others: each one a warning.
    public var exposedFiles: [String]

    public init(environment: [String: String]) {
        let hf = HuggingFaceToken(environment: environment)
        let netrc = NetrcFile(environment: environment)
        huggingFaceToken = hf.place
        netrcFile = netrc.existing
        var lines: [String] = []
        if hf.disabled {
            lines.append("Hugging Face token: none sent (HF_HUB_DISABLE_IMPLICIT_TOKEN is set)")
        } else if let place = hf.place {
            lines.append("Hugging Face token: \(place)" + (place.hasPrefix("$") ? "" : " (\(hf.fileNamedBy == "HOME" ? "the default place" : "named by \(hf.fileNamedBy)"))"))
        } else {
            lines.append("Hugging Face token: none (neither HF_TOKEN nor \(hf.file ?? "a token file") is set); sources marked \"auth\": \"huggingface\" are fetched without one")
        }
        if let file = netrc.existing {
            lines.append("netrc: \(file)" + (netrc.namedBy == "NETRC" ? " (named by NETRC)" : ""))
        } else {
            lines.append("netrc: none (\(netrc.path ?? "no home folder")\(netrc.namedBy == "NETRC" ? ", named by NETRC," : "") does not exist)")
        }
        sources = lines
        var exposed: [String] = []
        let files = [hf.disabled || hf.variable != nil ? nil : hf.place, netrc.existing].compactMap { $0 }
        for file in files {
            if let status = try? FileIO.statusFollowingLinks(file), status.permissions & 0o044 != 0 {
                exposed.append("\(file) is readable by other users (mode \(String(status.permissions & 0o777, radix: 8))): chmod 600 \(file)")
            }
        }
        exposedFiles = exposed
    }
}

extension DownloadOptions {
    /// These options, with the Hugging Face token allowed to the origins of `model`'s sources
    /// that ask for it (their catalog URLs: a `--mirror` or a redirect target is another
    /// origin, and gets no token).
    func authorizing(_ model: CatalogModel) -> DownloadOptions {
        var copy = self
        copy.policy.credentials.bearerOrigins = Set(model.sources.compactMap { source in
            model.sourceAuth[source] == .huggingface ? URLOrigin.of(source.primaryURL) : nil
        })
        return copy
    }
}

/// The environment's conventions: a true flag, the home folder.
enum EnvironmentFlag {
    /// `1`, `ON`, `YES`, `TRUE` in any case (the Hub client's and most tools' reading).
    static func isTrue(_ value: String?) -> Bool {
        guard let value else { return false }
        return ["1", "ON", "YES", "TRUE"].contains(value.trimmingWhitespace().uppercased())
    }

    static func home(_ environment: [String: String]) -> String? {
        if let home = environment["HOME"], !home.isEmpty { return home }
        return ProcessEnvironment.homeDirectoryFromPasswordDatabase()
    }
}
