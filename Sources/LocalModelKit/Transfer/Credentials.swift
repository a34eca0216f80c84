// Credentials: which one a source asks for, where each is found (never what it is), and
// which request may carry it. docs/models.md states the rules.

/// A value that never shows itself: not in `description`, not in a debugger's reflection,
/// not in an interpolated error. Only the transfer reads it, to build a request header.
package struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let value: String
    /// Always `<redacted>`.
    package var description: String { "<redacted>" }
    /// Always `<redacted>`, in a debugger too.
    package var debugDescription: String { "<redacted>" }
    /// A mirror with no children, so reflection (`dump`, a debugger) shows nothing of it.
    package var customMirror: Swift.Mirror { Swift.Mirror(self, children: []) }
}

/// Where the Hugging Face token is found, by the Hub client's (`huggingface_hub`) rules:
/// `$HF_TOKEN` (else the older `$HUGGING_FACE_HUB_TOKEN`), else the file `$HF_TOKEN_PATH`,
/// else `$HF_HOME/token`, else `$XDG_CACHE_HOME/huggingface/token`, else
/// `~/.cache/huggingface/token` (paths expanded as the client expands them: `HubClientPaths`).
/// Line breaks anywhere in the token are removed and the whitespace around it trimmed; what
/// is left empty counts as no token. `HF_HUB_DISABLE_IMPLICIT_TOKEN=1` (`1`, `ON`, `YES`,
/// `TRUE`) sends none. The file is read only when a request needs the token; a file that is
/// there but is not a regular file this user can read (a FIFO, a device, a socket, a folder)
/// is an error naming it, never waited on (P13), and so is a token holding a control character.
package struct HuggingFaceToken: Sendable, Equatable {
    /// The variable holding the token, when one does.
    let variable: String?
    let variableToken: Secret?
    /// The token file (read when no variable holds a token), and the variable that named it
    /// (`HF_TOKEN_PATH`, `HF_HOME`, `XDG_CACHE_HOME`, or `HOME` for the default).
    package let file: String?
    /// The variable that named ``file`` (see above), for messages that say what to change.
    package let fileNamedBy: String
    /// The Hub client's record of its logins (`stored_tokens` beside the token file): which
    /// name a token was saved under, and when an OAuth login expires.
    package let storedTokensFile: String?
    /// `HF_HUB_DISABLE_IMPLICIT_TOKEN` is set: no token is ever sent.
    package let disabled: Bool

    /// Where the token is for this environment. Nothing is read yet: the file is read when
    /// a request needs the token.
    /// - Parameter environment: the process environment (a value, so tests give their own).
    package init(environment: [String: String]) {
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
        let paths = HubClientPaths(environment: environment)
        file = paths.tokenFile
        fileNamedBy = paths.tokenFileNamedBy
        storedTokensFile = paths.storedTokensFile
    }

    /// The token as the Hub client cleans it (`_clean_token`): CR and LF removed anywhere,
    /// then whitespace trimmed as Python's `str.strip()` trims it; nil when nothing is left.
    static func clean(_ raw: String) -> String? {
        var scalars = Array(raw.unicodeScalars.lazy.filter { $0 != "\r" && $0 != "\n" })
        while let last = scalars.last, EnvironmentFlag.isPythonWhitespace(last) { scalars.removeLast() }
        let start = scalars.firstIndex { !EnvironmentFlag.isPythonWhitespace($0) } ?? scalars.endIndex
        var token = ""
        token.unicodeScalars.append(contentsOf: scalars[start...])
        return token.isEmpty ? nil : token
    }

    /// Why a cleaned token cannot go into a header: a control character (below 0x20, or
    /// 0x7F) left inside it. Nil when it can.
    static func characterProblem(_ token: String) -> String? {
        guard let bad = token.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return nil }
        let hex = String(bad.value, radix: 16, uppercase: true)
        return "it holds a control character (0x\(hex.count == 1 ? "0" + hex : hex))"
    }

    /// Where a token would come from now, for `doctor` and messages: the variable, or the
    /// file when something is there (the file is not read: its permissions are what `doctor` checks).
    package var place: String? {
        if disabled { return nil }
        if let variable { return "$" + variable }
        if let file, (try? FileIO.statusFollowingLinks(file)) != nil { return file }
        return nil
    }

    /// The token and where it came from (`$HF_TOKEN`, or the file's path); nil when there is
    /// none (no variable, no file, an empty one), or sending one is disabled.
    /// - Throws: `TransferFault.tokenFile` when the file is there but cannot be read as a
    ///   regular file (opened without waiting: a FIFO never blocks); `.tokenText` when the
    ///   token holds a control character or the file is not UTF-8 text. Never sent then.
    func resolve() throws(TransferFault) -> (token: Secret, from: String)? {
        if disabled { return nil }
        if let variable, let variableToken {
            if let problem = Self.characterProblem(variableToken.value) { throw .tokenText(from: "$" + variable, problem: problem) }
            return (variableToken, "$" + variable)
        }
        guard let file, let text = try readFile() else { return nil }
        guard let token = Self.clean(text) else { return nil }
        if let problem = Self.characterProblem(token) { throw .tokenText(from: file, problem: problem) }
        return (Secret(value: token), file)
    }

    /// The token file's text; nil when nothing is at its path (the Hub client's
    /// `FileNotFoundError`: no token). Anything else that stops the read is an error.
    private func readFile() throws(TransferFault) -> String? {
        guard let file else { return nil }
        let bytes: [UInt8]
        do {
            bytes = try FileIO.readFile(atPath: file, limit: 64 << 10)
        } catch {
            if error.isNotFound || error.isNotAFolder { return nil }
            // `open` of a socket fails before there is anything to inspect: say what it is.
            if let status = try? FileIO.statusFollowingLinks(file), status.kind == .socket {
                throw .tokenFile(path: file, namedBy: fileNamedBy, SystemError(message: "\(file) is a socket, not a regular file; it is not read", errno: error.errno))
            }
            throw .tokenFile(path: file, namedBy: fileNamedBy, error)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .tokenText(from: file, problem: "it is not UTF-8 text")
        }
        return text
    }

    /// The file the token would be read from, when no variable holds one and sending is on.
    var fileInUse: String? { disabled || variable != nil ? nil : file }

    /// What to do to have a token sent, for messages. Never suggests writing into a token
    /// file that is not a regular file (a FIFO, a folder): removing it comes first.
    package var howToSet: String {
        if disabled { return "HF_HUB_DISABLE_IMPLICIT_TOKEN is set, so no token is sent: unset it, and set HF_TOKEN" }
        guard let file else { return "set HF_TOKEN to a Hugging Face access token" }
        if let status = try? FileIO.statusFollowingLinks(file), status.kind != .regular {
            return "set HF_TOKEN to a Hugging Face access token; \(file)\(namedByText) is not a regular file, so no token is read from it: remove it (then 'hf auth login' writes the token there), or point HF_TOKEN_PATH at a regular file"
        }
        return "set HF_TOKEN to a Hugging Face access token (or write it to \(file)\(fileNamedBy == "HF_TOKEN_PATH" ? ", named by HF_TOKEN_PATH" : ""); 'hf auth login' does)"
    }

    private var namedByText: String { fileNamedBy == "HOME" ? "" : " (named by \(fileNamedBy))" }

    /// The login the token file holds, when the Hub client's `stored_tokens` has it with an
    /// `expires_at` that has passed (an OAuth login from `hf auth login`). Nil when a
    /// variable holds the token (the stored logins are then not used), when none is sent,
    /// when the file holds no token or a token no stored login matches, or when it has not
    /// expired. `now`: seconds since 1970.
    package func expiredLogin(now: Double) -> StoredLogin? {
        guard fileInUse != nil, let stored = storedTokensFile,
              let text = try? readFile(), let token = Self.clean(text) else { return nil }
        guard let bytes = try? FileIO.readFile(atPath: stored, limit: 1 << 20),
              let login = StoredLogin.parse(String(decoding: bytes, as: UTF8.self)).first(where: { $0.token.value == token }),
              let expiresAt = login.expiresAt, Double(expiresAt) < now else { return nil }
        return login
    }
}

/// One login of the Hub client's `stored_tokens` file (an INI file, `_save_token` in the
/// client's `utils/_auth.py`): a section per token name with `hf_token`, and for an OAuth
/// login `refresh_token` and `expires_at` (seconds since 1970).
package struct StoredLogin: Sendable, Equatable {
    /// The section's name: the token's name on the Hub.
    package let name: String
    let token: Secret
    /// `expires_at`, when the section has a readable one.
    package let expiresAt: Int64?

    /// The sections of `text` in file order, read as Python's `configparser` reads them
    /// (keys in any case, values trimmed, `#`/`;` comment lines, `DEFAULT` inherited); a
    /// file it would refuse (a line outside a section or without `=`/`:`, a section or key
    /// twice) gives none, as the client then reads none.
    static func parse(_ text: String) -> [StoredLogin] {
        var sections: [(name: String, fields: [String: String])] = []
        var defaults: [String: String] = [:]
        var current: String?
        var lastKey: String?
        func set(_ key: String, _ value: String) -> Bool {
            if current == "DEFAULT" {
                guard defaults[key] == nil else { return false }
                defaults[key] = value
            } else {
                guard let last = sections.indices.last, sections[last].fields[key] == nil else { return false }
                sections[last].fields[key] = value
            }
            return true
        }
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let line = String(raw).trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            // An indented line continues the previous value (configparser's multi-line values).
            if let first = raw.unicodeScalars.first, first == " " || first == "\t", let key = lastKey {
                if current == "DEFAULT" { defaults[key, default: ""] += "\n" + line }
                else if let last = sections.indices.last { sections[last].fields[key, default: ""] += "\n" + line }
                continue
            }
            if line.hasPrefix("["), line.hasSuffix("]"), line.count > 2 {
                let name = String(line.dropFirst().dropLast())
                guard name == "DEFAULT" || !sections.contains(where: { $0.name == name }) else { return [] }
                if name != "DEFAULT" { sections.append((name, [:])) }
                current = name
                lastKey = nil
                continue
            }
            guard current != nil, let cut = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return [] }
            let key = String(line[..<cut]).trimmingWhitespace().lowercased()
            let value = String(line[line.index(after: cut)...]).trimmingWhitespace()
            guard !key.isEmpty, set(key, value) else { return [] }
            lastKey = key
        }
        return sections.compactMap { section in
            let fields = defaults.merging(section.fields) { $1 }
            guard let token = fields["hf_token"] else { return nil }
            return StoredLogin(name: section.name, token: Secret(value: token), expiresAt: fields["expires_at"].flatMap(Self.pythonInt))
        }
    }

    /// `int(text)` as Python reads it: blanks around, an optional sign, digits with single
    /// underscores between them. Nil for anything else, or beyond 64 bits.
    static func pythonInt(_ text: String) -> Int64? {
        var digits = Substring(text.trimmingWhitespace())
        var negative = false
        if let sign = digits.first, sign == "+" || sign == "-" {
            negative = sign == "-"
            digits = digits.dropFirst()
        }
        guard let first = digits.first, first != "_", digits.last != "_", !digits.contains("__"),
              first.isASCII else { return nil }
        guard let value = ExternalNumber.decimal(digits.filter { $0 != "_" }) else { return nil }
        return negative ? -value : value
    }
}

/// The netrc file libcurl reads for every request (login and password per machine, as curl
/// reads it): `$NETRC`, else `~/.netrc`.
package struct NetrcFile: Sendable, Equatable {
    /// The file's path, whether it exists or not; nil when no home folder is known.
    package let path: String?
    /// `NETRC`, or `HOME` for the default.
    package let namedBy: String

    /// The netrc file of this environment (nothing is read).
    /// - Parameter environment: the process environment.
    package init(environment: [String: String]) {
        if let path = environment["NETRC"], !path.isEmpty {
            (self.path, namedBy) = (path, "NETRC")
        } else {
            (self.path, namedBy) = (EnvironmentFlag.home(environment).map { $0 + "/.netrc" }, "HOME")
        }
    }

    /// The file when it exists (used then; a missing file is no credential, not an error).
    package var existing: String? {
        guard let path, (try? FileIO.statusFollowingLinks(path)) != nil else { return nil }
        return path
    }
}

/// The credentials a transfer may use: the Hugging Face token for the origins of the sources
/// that ask for it, netrc for every request.
package struct TransferCredentials: Sendable, Equatable {
    /// Where the Hugging Face token is.
    package var huggingFace: HuggingFaceToken
    /// The netrc file every request may take a login from.
    package var netrc: NetrcFile
    /// Origins (`URLOrigin`) whose requests carry the Hugging Face token: those of the sources
    /// with `"auth": "huggingface"` of the model being fetched (set by the engine, never
    /// from a redirect or a mirror).
    package var bearerOrigins: Set<String> = []

    /// The credentials' places for this environment, with no origin taking the token yet.
    /// - Parameter environment: the process environment.
    package init(environment: [String: String]) {
        huggingFace = HuggingFaceToken(environment: environment)
        netrc = NetrcFile(environment: environment)
    }

    /// The credentials of one run: the token read once (only when some origin takes it),
    /// and the netrc file checked to be a regular file before libcurl opens it (P13: a FIFO
    /// named by `NETRC` would hang every transfer).
    /// - Throws: `.netrcFile`; `.tokenFile` / `.tokenText` when some origin takes the token
    ///   and it cannot be read or sent (`HuggingFaceToken.resolve`).
    func resolved() throws(TransferFault) -> ResolvedCredentials {
        var netrcFile: String?
        if let path = netrc.existing {
            do { _ = try FileIO.openForReading(path) } catch { throw .netrcFile(error) }
            netrcFile = path
        }
        let token = bearerOrigins.isEmpty ? nil : try huggingFace.resolve()
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

/// What `doctor` says about credentials: where each one was found (never its value), the
/// files other users can read, a token that cannot be used, and an expired Hub login.
package struct CredentialReport: Sendable, Equatable {
    /// One line per credential source, found or not ("Hugging Face token: $HF_TOKEN").
    package var sources: [String]
    /// Whether a Hugging Face token / a netrc file was found.
    package var huggingFaceToken: String?
    /// The netrc file in use, when one exists.
    package var netrcFile: String?
    /// Token or netrc files readable by the group or by others: each one a warning.
    package var exposedFiles: [String]
    /// The token cannot be used (its file is a FIFO, a folder…; it holds a control
    /// character): each one fails the check, and a download that needs it.
    package var problems: [String]
    /// The token file holds a login the Hub client recorded as expired.
    package var expiredLogin: StoredLogin?
    /// Said without failing the check (the expired login).
    package var warnings: [String]

    /// Looks at the places (never printing a credential).
    /// - Parameters:
    ///   - environment: the process environment.
    ///   - now: seconds since 1970, against which a stored login's `expires_at` is read.
    package init(environment: [String: String], now: Double = SystemClock.wallSeconds()) {
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
        let files = [hf.fileInUse.flatMap { _ in hf.place }, netrc.existing].compactMap { $0 }
        for file in files {
            if let status = try? FileIO.statusFollowingLinks(file), status.kind == .regular, status.permissions & 0o044 != 0 {
                exposed.append("\(file) is readable by other users (mode \(String(status.permissions & 0o777, radix: 8))): chmod 600 \(file)")
            }
        }
        exposedFiles = exposed
        // Read as a download would read it (never shown): what stops it is a problem.
        do { _ = try hf.resolve(); problems = [] } catch { problems = [error.description] }
        expiredLogin = hf.expiredLogin(now: now)
        warnings = expiredLogin.map { login in
            let date = login.expiresAt.flatMap { CivilTime.iso8601(Double($0)) } ?? "an unknown time"
            return ["the Hugging Face login (\(login.name)) expired at \(date): run 'hf auth login' to renew it (public models still download without it)"]
        } ?? []
    }
}

extension DownloadOptions {
    /// These options, with the Hugging Face token allowed to the origins of `model`'s sources
    /// that ask for it, as this run fetches them: the catalog URL, or its `HF_ENDPOINT`
    /// rewrite (then only the endpoint gets the token, never https://huggingface.co). A
    /// `--mirror` or a redirect target is another origin, and gets no token.
    /// - Throws: `.transfer(.hubEndpoint)` when `HF_ENDPOINT` cannot be used and a source
    ///   of `model` would be fetched through it (no `--mirror`).
    func authorizing(_ model: CatalogModel) throws(LocalModelError) -> DownloadOptions {
        if mirror == nil, let endpoint = policy.hubEndpoint, let problem = endpoint.problem,
           model.sources.contains(where: { HubEndpoint.isOnHub($0.primaryURL) }) {
            throw .transfer(.hubEndpoint(value: endpoint.url, problem: problem), modelId: model.id)
        }
        var copy = self
        copy.policy.credentials.bearerOrigins = Set(model.sources.compactMap { source in
            model.sourceAuth[source] == .huggingface ? URLOrigin.of(endpointURL(source.primaryURL)) : nil
        })
        return copy
    }

    /// A catalog URL as this run fetches it: `--mirror` replaces every origin; without one,
    /// `HF_ENDPOINT` replaces `https://huggingface.co` (the Hub client's convention).
    func fetchURL(_ url: String) -> String {
        if let mirror { return MirrorRewrite.apply(mirror, to: url) }
        return endpointURL(url)
    }

    /// `url` with `HF_ENDPOINT` applied, unless a `--mirror` replaces every origin.
    func endpointURL(_ url: String) -> String {
        guard mirror == nil, let endpoint = policy.hubEndpoint else { return url }
        return endpoint.apply(to: url)
    }
}

/// The environment's conventions: a true flag, the home folder, a path as the Hub client
/// expands it.
enum EnvironmentFlag {
    /// `1`, `ON`, `YES`, `TRUE` in any case (the Hub client's and most tools' reading).
    static func isTrue(_ value: String?) -> Bool {
        guard let value else { return false }
        return ["1", "ON", "YES", "TRUE"].contains(value.trimmingWhitespace().uppercased())
    }

    /// `$HOME`, else (unset or empty) this user's home in the password database.
    static func home(_ environment: [String: String]) -> String? {
        if let home = environment["HOME"], !home.isEmpty { return home }
        return ProcessEnvironment.homeDirectoryFromPasswordDatabase()
    }

    /// A path as the Hub client expands the paths it is given (`HF_HOME`, `HF_HUB_CACHE`,
    /// `HF_TOKEN_PATH`…): `os.path.expanduser`, then `os.path.expandvars`.
    static func expandPath(_ path: String, environment: [String: String]) -> String {
        expandVariables(expandUser(path, environment: environment), environment: environment)
    }

    /// Python's `os.path.expanduser`: `~` and `~/…` become the home folder (`home`); `~user`
    /// and `~user/…` that user's home from the password database; the home's trailing `/`
    /// dropped (`/` when nothing is left). An unknown user, or no home, leaves the path as it is.
    static func expandUser(_ path: String, environment: [String: String]) -> String {
        let b = Array(path.utf8)
        guard b.first == UInt8(ascii: "~") else { return path }
        let end = b[1...].firstIndex(of: UInt8(ascii: "/")) ?? b.endIndex
        let user = String(decoding: b[1..<end], as: UTF8.self)
        guard let home = user.isEmpty ? home(environment) : ProcessEnvironment.homeDirectory(ofUser: user) else { return path }
        var base = Array(home.utf8)
        while base.last == UInt8(ascii: "/") { base.removeLast() }
        let expanded = String(decoding: base + b[end...], as: UTF8.self)
        return expanded.isEmpty ? "/" : expanded
    }

    /// Python's `os.path.expandvars`: `$NAME` (ASCII letters, digits, `_`) and `${NAME}` are
    /// replaced by the variable's value when it is set (empty included); an unset one is
    /// left as written, and a value put in is not expanded again.
    static func expandVariables(_ path: String, environment: [String: String]) -> String {
        let b = Array(path.utf8)
        guard b.contains(UInt8(ascii: "$")) else { return path }
        func isWord(_ c: UInt8) -> Bool {
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "_")
        }
        var out: [UInt8] = []
        var i = 0
        while i < b.count {
            guard b[i] == UInt8(ascii: "$"), i + 1 < b.count else {
                out.append(b[i])
                i += 1
                continue
            }
            let nameRange: Range<Int>
            let end: Int
            if b[i + 1] == UInt8(ascii: "{"), let close = b[(i + 2)...].firstIndex(of: UInt8(ascii: "}")) {
                (nameRange, end) = ((i + 2)..<close, close + 1)
            } else if isWord(b[i + 1]) {
                var j = i + 1
                while j < b.count && isWord(b[j]) { j += 1 }
                (nameRange, end) = ((i + 1)..<j, j)
            } else {
                out.append(b[i])
                i += 1
                continue
            }
            if let value = environment[String(decoding: b[nameRange], as: UTF8.self)] {
                out += Array(value.utf8)
            } else {
                out += b[i..<end]
            }
            i = end
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Python's `os.path.join` of two parts: `b` when it is absolute or `a` empty, else
    /// `a` + `/` (unless `a` ends with one) + `b`.
    static func join(_ a: String, _ b: String) -> String {
        if b.hasPrefix("/") || a.isEmpty { return b }
        return a.hasSuffix("/") ? a + b : a + "/" + b
    }

    /// Python's `os.path.dirname`: everything before the last `/`, trailing `/` dropped
    /// unless that leaves nothing but slashes.
    static func dirname(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        var head = String(path[...slash])
        if head.contains(where: { $0 != "/" }) {
            while head.hasSuffix("/") { head.removeLast() }
        }
        return head
    }

    /// What Python's `str.strip()` removes: `str.isspace()` characters.
    static func isPythonWhitespace(_ s: Unicode.Scalar) -> Bool {
        switch s.value {
        case 0x09...0x0D, 0x1C...0x20, 0x85, 0xA0, 0x1680, 0x2000...0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000: return true
        default: return false
        }
    }
}

/// Where the Hub client (`huggingface_hub`, its `constants.py`) keeps its files, by its
/// rules, so that this tool reads the same ones:
/// - its home: `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`;
/// - the token file: `$HF_TOKEN_PATH`, else `<home>/token`; `stored_tokens` beside it;
/// - the hub cache: `$HF_HUB_CACHE`, else `$HUGGINGFACE_HUB_CACHE`, else `<home>/hub`.
/// Each is expanded as the client expands it (`EnvironmentFlag.expandPath`: `~`, `~user`,
/// `$VAR`, `${VAR}`), the defaults built from the home included; an empty variable counts
/// as unset. Nil where a default needs a home folder and none is known.
package struct HubClientPaths: Sendable, Equatable {
    /// The Hub client's home folder (`$HF_HOME`, …), expanded.
    package let home: String?
    /// The variable that decided `home`: `HF_HOME`, `XDG_CACHE_HOME`, or `HOME` for the default.
    package let homeNamedBy: String
    /// The token file, expanded.
    package let tokenFile: String?
    /// `HF_TOKEN_PATH`, else `homeNamedBy`.
    package let tokenFileNamedBy: String
    /// `stored_tokens` beside the token file: the client's record of its logins.
    package let storedTokensFile: String?
    /// The hub cache folder (`models--ORG--REPO/` inside), expanded.
    package let hubCache: String?

    /// The places for this environment (nothing is read).
    /// - Parameter environment: the process environment.
    package init(environment: [String: String]) {
        func named(_ key: String) -> String? {
            guard let value = environment[key], !value.isEmpty else { return nil }
            return value
        }
        func expand(_ path: String) -> String { EnvironmentFlag.expandPath(path, environment: environment) }
        let userHome = EnvironmentFlag.expandUser("~", environment: environment)
        let cache: String? = userHome == "~" ? nil : EnvironmentFlag.join(userHome, ".cache")
        if let hfHome = named("HF_HOME") {
            (home, homeNamedBy) = (expand(hfHome), "HF_HOME")
        } else if let xdg = named("XDG_CACHE_HOME") {
            (home, homeNamedBy) = (expand(EnvironmentFlag.join(xdg, "huggingface")), "XDG_CACHE_HOME")
        } else {
            (home, homeNamedBy) = (cache.map { expand(EnvironmentFlag.join($0, "huggingface")) }, "HOME")
        }
        if let path = named("HF_TOKEN_PATH") {
            (tokenFile, tokenFileNamedBy) = (expand(path), "HF_TOKEN_PATH")
        } else {
            (tokenFile, tokenFileNamedBy) = (home.map { expand(EnvironmentFlag.join($0, "token")) }, homeNamedBy)
        }
        storedTokensFile = tokenFile.map { EnvironmentFlag.join(EnvironmentFlag.dirname($0), "stored_tokens") }
        if let hub = named("HF_HUB_CACHE") ?? named("HUGGINGFACE_HUB_CACHE") {
            hubCache = expand(hub)
        } else {
            hubCache = home.map { expand(EnvironmentFlag.join($0, "hub")) }
        }
    }
}
