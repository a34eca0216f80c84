// A repository on the Hugging Face Hub: how a person names it (`HubReference`), and what
// the Hub's model-information API says it holds at a revision (`HubRepositoryFiles`).

/// A repository and the revision asked for: `org/repo` at `main`.
public struct HubReference: Sendable, Equatable, CustomStringConvertible {
    /// The owner: a user or an organisation (`ORG`).
    public var organization: String
    /// The repository's name (`REPO`).
    public var name: String
    /// A branch, a tag or a commit; `main` when none was named.
    public var revision: String

    /// `organization/name` at `revision`.
    public init(organization: String, name: String, revision: String = "main") {
        self.organization = organization
        self.name = name
        self.revision = revision
    }

    /// `ORG/REPO`.
    public var repository: String { organization + "/" + name }

    /// `ORG/REPO@REV`.
    public var description: String { repository + "@" + revision }

    /// The forms a person writes: `hf://ORG/REPO[@REV]`, `ORG/REPO[@REV]`, or the page's
    /// address `https://huggingface.co/ORG/REPO[/tree/REV]` (or the same under `endpoint`,
    /// a Hub mirror's URL). REV defaults to `main`.
    /// - Throws: `invalidAddRequest` saying what is wrong and which forms are understood.
    public static func parse(_ text: String, endpoint: String? = nil) throws(LocalModelError) -> HubReference {
        func refuse(_ problem: String) -> LocalModelError {
            .invalidAddRequest(what: "'\(text.prefix(200))'",
                               problem: "\(problem); name a Hub repository as ORG/REPO, ORG/REPO@REV, hf://ORG/REPO[@REV] or https://huggingface.co/ORG/REPO[/tree/REV]")
        }
        var rest = Substring(text)
        var revision: String?
        let lower = text.lowercased()
        let pages = ["https://huggingface.co", "http://huggingface.co", "https://www.huggingface.co"]
            + (endpoint.map { [$0.lowercased()] } ?? [])
        if let page = pages.first(where: { lower.hasPrefix($0 + "/") }) {
            rest = rest.dropFirst(page.count + 1)
            while rest.hasSuffix("/") { rest = rest.dropLast() }
            let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count == 2 || (parts.count >= 4 && parts[2] == "tree") else {
                throw refuse("a page address names the repository's page (…/ORG/REPO) or a revision of it (…/ORG/REPO/tree/REV)")
            }
            rest = parts[0] + "/" + parts[1]
            if parts.count >= 4 { revision = parts[3...].joined(separator: "/") }
        } else if lower.contains("://") && !lower.hasPrefix("hf://") {
            throw refuse("only hf:// and the Hub's page addresses (https://huggingface.co/…) are understood")
        } else {
            if lower.hasPrefix("hf://") { rest = rest.dropFirst(5) }
            if let at = rest.firstIndex(of: "@") {
                revision = String(rest[rest.index(after: at)...])
                rest = rest[..<at]
                if revision?.isEmpty == true { throw refuse("nothing after '@' (a branch, tag or commit)") }
            }
        }
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw refuse("expected exactly one '/' between the organization and the repository") }
        for part in parts {
            if let problem = nameProblem(String(part)) { throw refuse(problem) }
        }
        let rev = revision ?? "main"
        if let problem = revisionProblem(rev) { throw refuse(problem) }
        return HubReference(organization: String(parts[0]), name: String(parts[1]), revision: rev)
    }

    /// Why `part` cannot be an organization or repository name on the Hub (letters, digits,
    /// `-`, `_`, `.`; at most 96; no `--` or `..`; not starting or ending with `-` or `.`).
    static func nameProblem(_ part: String) -> String? {
        let bytes = Array(part.utf8)
        if bytes.isEmpty { return "an empty organization or repository name" }
        if bytes.count > 96 { return "'\(part.prefix(40))…' is longer than the Hub's 96 characters" }
        let allowed = bytes.allSatisfy { isAlphanumeric($0) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
        if !allowed { return "'\(part.prefix(96))' holds a character the Hub does not allow in a name (letters, digits, '-', '_' and '.')" }
        if [0x2D, 0x2E].contains(bytes[0]) || [0x2D, 0x2E].contains(bytes[bytes.count - 1]) || part.contains("--") || part.contains("..") {
            return "'\(part)' is not a Hub name (it may not start or end with '-' or '.', nor hold '--' or '..')"
        }
        return nil
    }

    /// Why `revision` cannot be a branch, tag or commit: letters, digits, `.`, `_`, `-`, `+`
    /// and `/` between segments, at most 256 bytes, no `.` or `..` segment.
    static func revisionProblem(_ revision: String) -> String? {
        let bytes = Array(revision.utf8)
        if bytes.isEmpty || bytes.count > 256 { return "a revision has 1 to 256 characters" }
        guard bytes.allSatisfy({ isAlphanumeric($0) || [0x2D, 0x5F, 0x2E, 0x2B, 0x2F].contains($0) }) else {
            return "the revision '\(revision.prefix(80))' holds a character no branch, tag or commit has here (letters, digits, '.', '_', '-', '+', '/')"
        }
        if revision.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) {
            return "the revision '\(revision)' has an empty, '.' or '..' segment"
        }
        return nil
    }

    static func isAlphanumeric(_ b: UInt8) -> Bool {
        (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b)
    }

    /// The model-information API for this revision, with every file's size and LFS hash:
    /// `ENDPOINT/api/models/ORG/REPO/revision/REV?blobs=true` (REV percent-encoded whole, a
    /// `/` in a branch name included, as the Hub client sends it).
    public func modelInfoURL(endpoint: String) -> String {
        endpoint + "/api/models/" + repository + "/revision/" + Self.encodeSegment(revision) + "?blobs=true"
    }

    /// `ENDPOINT/ORG/REPO/resolve/COMMIT/`: where a pinned commit's files are fetched.
    public func resolveBase(endpoint: String, commit: String) -> String {
        endpoint + "/" + repository + "/resolve/" + commit + "/"
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func encodeSegment(_ text: String) -> String {
        ModelURL.percentEncode(text).replacingSlashes()
    }
}

private extension String {
    func replacingSlashes() -> String {
        var out = ""
        for c in self { out += c == "/" ? "%2F" : String(c) }
        return out
    }
}

/// One file of a repository at a revision, as the Hub lists it.
package struct HubFile: Sendable, Equatable {
    /// Its path in the repository (`rfilename`).
    package var path: String
    /// Its size in bytes.
    package var size: Int64
    /// The SHA-256 of a Git LFS file (`lfs.sha256`); nil for a file kept in Git itself.
    package var lfsSHA256: String?

    /// A file at `path` of `size` bytes, with its LFS SHA-256 when it has one.
    package init(path: String, size: Int64, lfsSHA256: String?) {
        self.path = path
        self.size = size
        self.lfsSHA256 = lfsSHA256
    }
}

/// What the Hub's model information says a revision holds: the commit it resolves to, and
/// the files.
package struct HubRepositoryFiles: Sendable, Equatable {
    /// The 40-hex commit (`sha`).
    package var commit: String
    /// Every file of the revision.
    package var files: [HubFile]

    /// A revision's commit and its files.
    package init(commit: String, files: [HubFile]) {
        self.commit = commit
        self.files = files
    }

    /// The most files a revision may list (a catalog's limit per model).
    static let maxFiles = CatalogLoader.maxFilesPerModel

    /// Reads `GET /api/models/ORG/REPO/revision/REV?blobs=true`'s JSON: `sha` and
    /// `siblings` (`rfilename`, `size`, `lfs.sha256`), checking every value (P12): a commit of
    /// 40 lowercase hex, sizes 0…1 TiB, SHA-256s of 64 lowercase hex, an LFS size equal to the
    /// file's, no name twice. Other keys are ignored.
    /// - Throws: what is wrong with the answer.
    static func parse(_ bytes: [UInt8]) throws(ReadProblem) -> HubRepositoryFiles {
        let root: JSONValue
        do { root = try JSONParser().parse(bytes) } catch { throw ReadProblem("not JSON (\(error))") }
        guard case .object = root else { throw ReadProblem("not a JSON object") }
        guard case .string(let sha)? = root["sha"], isCommit(sha) else {
            throw ReadProblem("no commit: 'sha' is missing or not 40 lowercase hex digits")
        }
        guard case .array(let siblings)? = root["siblings"] else {
            throw ReadProblem("no file list: 'siblings' is missing or not an array")
        }
        guard siblings.count <= maxFiles else { throw ReadProblem("\(siblings.count) files, more than the \(maxFiles) a model may have") }
        var files: [HubFile] = []
        var seen = Set<String>()
        for (n, sibling) in siblings.enumerated() {
            guard case .object = sibling, case .string(let path)? = sibling["rfilename"], !path.isEmpty, path.utf8.count <= 1024 else {
                throw ReadProblem("siblings[\(n)] has no 'rfilename' (a path of 1 to 1024 bytes)")
            }
            guard seen.insert(path).inserted else { throw ReadProblem("the file \(path) is listed twice") }
            guard case .int(let size)? = sibling["size"], (0...CatalogLoader.maxFileSize).contains(size) else {
                throw ReadProblem("\(path): 'size' is missing or not a whole number of 0 to 1 TiB bytes (ask with ?blobs=true)")
            }
            var lfs: String?
            if let value = sibling["lfs"], value != .null {
                guard case .object = value, case .string(let hash)? = value["sha256"], CatalogRules.isSHA256(hash) else {
                    throw ReadProblem("\(path): 'lfs.sha256' is missing or not 64 lowercase hex digits")
                }
                if let lfsSize = value["size"], lfsSize != .int(size) {
                    throw ReadProblem("\(path): 'lfs.size' differs from 'size' (\(size))")
                }
                lfs = hash
            }
            files.append(HubFile(path: path, size: size, lfsSHA256: lfs))
        }
        return HubRepositoryFiles(commit: sha, files: files)
    }

    /// 40 lowercase hex digits: a Git commit.
    static func isCommit(_ text: String) -> Bool {
        text.utf8.count == 40 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
