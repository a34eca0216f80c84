import Foundation
import GlassesTestSupport
import Testing

/// `catalog validate` (every problem with its JSON path, rollback against a store) and
/// `catalog hash` (checked against the system's `sha256sum`).
@Suite("glasses-local: catalog validate and catalog hash", .ownThreads, .networkGuard)
struct CatalogCommandTests {
    // MARK: validate

    @Test("the shipped Catalog/catalog.json is valid")
    func validateBundled() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = PackageRoot.bundledCatalog
        #expect(FileManager.default.fileExists(atPath: file), "package root found from #filePath: \(file)")
        let r = try sb.run(["catalog", "validate", file])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        #expect(r.stdout.hasPrefix("\(file): valid"), "\(r)")
        #expect(r.stdout.contains("6 models"), "\(r)")
        #expect(r.stdout.contains("403 files"), "\(r)")

        let json = try sb.run(["catalog", "validate", file, "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(json.stderr.isEmpty, "\(json)")
        let doc = try json.jsonObject()
        #expect(doc["valid"] as? Bool == true)
        #expect((doc["issues"] as? [Any])?.isEmpty == true)
        #expect(doc["models"] as? Int == 6)
        #expect(doc["files"] as? Int == 403)
    }

    static let brokenCatalog = """
        {"schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-01-01T00:00:00Z", "models": [
          {"id": "broken", "kind": "llm", "displayName": "Broken", "requiredMb": 100, "autoEligible": false,
           "files": [{"path": "a.bin", "size": 10, "sha256": "not-a-hash"},
                     {"path": "../escape.bin", "size": -1, "sha256": null}],
           "sources": [{"type": "files", "baseURL": "ftp://example.com/broken/"}]}
        ]}
        """
    static let brokenPaths = ["models[0].files[0].sha256", "models[0].files[1].path", "models[0].files[1].size",
                              "models[0].sources[0].baseURL"]

    @Test("an invalid catalog: exit 6, stderr lists each problem with its JSON path")
    func validateListsEveryProblem() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = try sb.write("broken.json", Self.brokenCatalog)
        let r = try sb.run(["catalog", "validate", file])
        #expect(r.status == 6, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderrLines.first == "Error: catalog \(file) is invalid (4 problems):", "\(r)")
        for path in Self.brokenPaths {
            #expect(r.stderrLines.contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix(path + ": ") },
                    "\(path) is listed on its own line\n\(r)")
        }
        #expect(r.stderr.contains("../escape.bin"), "\(r)")
        #expect(r.stderr.contains("ftp://example.com/broken/"), "\(r)")
    }

    @Test("an invalid catalog with --json: {valid: false, issues: [{path, message}]}")
    func validateJSON() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = try sb.write("broken.json", Self.brokenCatalog)
        let r = try sb.run(["catalog", "validate", file, "--json"])
        #expect(r.status == 6, "\(r)")
        #expect(r.stderr.contains("models[0].files[0].sha256"), "the human list stays on stderr\n\(r)")
        let doc = try r.jsonObject()
        #expect(doc["valid"] as? Bool == false)
        let issues = try #require(doc["issues"] as? [[String: Any]], "\(r)")
        #expect(issues.compactMap { $0["path"] as? String } == Self.brokenPaths)
        #expect(issues.allSatisfy { !($0["message"] as? String ?? "").isEmpty })
    }

    struct InvalidCase: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var path: String
        var says: String
        var testDescription: String { name }
    }

    static let invalidCases: [InvalidCase] = [
        InvalidCase(name: "not JSON", text: "this is not json", path: "$", says: "JSON"),
        InvalidCase(name: "no models", text: #"{"schemaVersion": 1, "catalogVersion": 1, "generatedAt": "2026-01-01T00:00:00Z"}"#,
                    path: "models", says: "missing"),
        InvalidCase(name: "duplicate file path",
                    text: Fixtures.catalog(files: #"{"path": "w.bin", "size": 1, "sha256": null}, {"path": "w.bin", "size": 1, "sha256": null}"#),
                    path: "models[0].files[1].path", says: "duplicate"),
        InvalidCase(name: "base URL without trailing slash", text: Fixtures.catalog(baseURL: "https://models.example.com/huge"),
                    path: "models[0].sources[0].baseURL", says: "/"),
        InvalidCase(name: "bad model id", text: Fixtures.catalog(id: "Bad Id!"), path: "models[0].id", says: "Bad Id!"),
    ]

    @Test("each kind of invalid catalog: exit 6 with the JSON path of the problem", arguments: invalidCases)
    func validateInvalid(_ c: InvalidCase) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = try sb.write("invalid.json", c.text)
        let r = try sb.run(["catalog", "validate", file])
        #expect(r.status == 6, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderrLines.first?.hasPrefix("Error: catalog \(file) is invalid") == true, "\(r)")
        let line = r.stderrLines.dropFirst().first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(c.path + ": ") }
        #expect(line != nil, "\(c.path) is listed\n\(r)")
        #expect(line?.contains(c.says) == true, "\(r)")
    }

    @Test("validating a file that does not exist: exit 6 naming the file")
    func validateMissingFile() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = sb.root + "/no-such-catalog.json"
        let r = try sb.run(["catalog", "validate", file])
        #expect(r.status == 6, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: "), "\(r)")
        #expect(r.stderr.contains(file), "\(r)")
        #expect(r.stderr.contains("No such file"), "\(r)")

        let json = try sb.run(["catalog", "validate", file, "--json"])
        #expect(json.status == 6, "\(json)")
        #expect(try json.jsonObject()["valid"] as? Bool == false)
    }

    @Test("rollback: after the store recorded catalogVersion 5, a version-2 catalog is refused (exit 6)")
    func validateRollback() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let store = sb.root + "/other-store"
        let v5 = try sb.write("v5.json", Fixtures.catalog(version: 5))
        let v2 = try sb.write("v2.json", Fixtures.catalog(version: 2))

        // Before the store has seen version 5, version 2 is fine.
        let before = try sb.run(["catalog", "validate", v2, "--store", store])
        #expect(before.status == 0, "\(before)")
        #expect(before.stderr.isEmpty, "\(before)")

        let doctor = try sb.run(["doctor", "--catalog", v5, "--store", store],
                                env: ["EXTENTOS_MEMORY_MB": "4096", "EXTENTOS_MEMORY_AVAILABLE_MB": "4096"])
        #expect(doctor.status == 0, "\(doctor)")

        let r = try sb.run(["catalog", "validate", v2, "--store", store])
        #expect(r.status == 6, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: "), "\(r)")
        #expect(r.stderr.contains("rollback"), "\(r)")
        #expect(r.stderr.contains("catalogVersion"), "\(r)")
        #expect(r.stderr.contains(store), "the message names the store\n\(r)")

        let json = try sb.run(["catalog", "validate", v2, "--store", store, "--json"])
        #expect(json.status == 6, "\(json)")
        let issues = try #require(try json.jsonObject()["issues"] as? [[String: Any]], "\(json)")
        #expect(issues.contains { $0["path"] as? String == "catalogVersion" && ($0["message"] as? String ?? "").contains("rollback") })

        // The same version is not a rollback, and the store's own default (sandbox store) is unaffected.
        let same = try sb.run(["catalog", "validate", v5, "--store", store])
        #expect(same.status == 0, "\(same)")
        let elsewhere = try sb.run(["catalog", "validate", v2])
        #expect(elsewhere.status == 0, "\(elsewhere)")

        // Other commands refuse the older catalog for that store too.
        let list = try sb.run(["list", "--catalog", v2, "--store", store])
        #expect(list.status == 6, "\(list)")
        #expect(list.stderr.contains("rollback"), "\(list)")
    }

    /// Fixtures.catalog with an `expiresAt` field.
    static func catalog(version: Int, expiresAt: String) -> String {
        Fixtures.catalog(version: version).replacingOccurrences(
            of: #""generatedAt": "2026-01-01T00:00:00Z","#,
            with: #""generatedAt": "2026-01-01T00:00:00Z", "expiresAt": "\#(expiresAt)","#)
    }

    @Test("an expired catalog (a frozen mirror's) is refused by every command: exit 6, code catalogExpired; one not yet expired is used")
    func expiredCatalog() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let expired = try sb.write("expired.json", Self.catalog(version: 2, expiresAt: "2026-01-02T00:00:00Z"))
        let current = try sb.write("current.json", Self.catalog(version: 2, expiresAt: "2099-01-01T00:00:00Z"))
        #expect(try String(contentsOfFile: expired, encoding: .utf8).contains("expiresAt"), "the fixture carries the field")

        let list = try sb.run(["list", "--catalog", expired])
        #expect(list.status == 6, "\(list)")
        #expect(list.stdout.isEmpty, "\(list)")
        #expect(list.stderr.contains(expired) && list.stderr.contains("expired at 2026-01-02T00:00:00Z"), "\(list)")
        #expect(list.stderr.contains("built-in"), "the message says what to do next\n\(list)")

        let json = try sb.run(["info", "huge-model", "--catalog", expired, "--json"])
        #expect(json.status == 6, "\(json)")
        let error = try #require(try json.jsonObject()["error"] as? [String: Any], "\(json)")
        #expect(error["code"] as? String == "catalogExpired" && error["exitCode"] as? Int == 6, "\(json)")

        let validate = try sb.run(["catalog", "validate", expired, "--json"])
        #expect(validate.status == 6, "\(validate)")
        let issues = try #require(try validate.jsonObject()["issues"] as? [[String: Any]], "\(validate)")
        #expect(issues.contains { $0["path"] as? String == "expiresAt" && ($0["message"] as? String ?? "").contains("expired") }, "\(validate)")

        // Nothing was recorded from the refused catalog: the store still accepts version 1.
        let older = try sb.run(["list", "--catalog", try sb.write("v1.json", Fixtures.catalog(version: 1))])
        #expect(older.status == 0, "\(older)")

        let ok = try sb.run(["list", "--catalog", current])
        #expect(ok.status == 0, "\(ok)")
        #expect(ok.stdout.contains("huge-model"), "\(ok)")
        let valid = try sb.run(["catalog", "validate", current])
        #expect(valid.status == 0 && valid.stdout.contains("expires 2099-01-01T00:00:00Z"), "\(valid)")
    }

    // MARK: hash

    /// Files of a small model folder: nested folders, a 3 MiB file, byte-order names.
    static func makeModelFolder(in sb: Sandbox) throws -> (dir: String, sizes: [String: Int]) {
        let dir = sb.root + "/model"
        var big = Data(count: 3 * 1024 * 1024)
        big.withUnsafeMutableBytes { buffer in
            for i in 0..<buffer.count { buffer[i] = UInt8(truncatingIfNeeded: (i &* 2_654_435_761) >> 13) }
        }
        let files: [String: Data] = [
            "B.bin": Data([0, 1, 2, 3, 255]),
            "a.txt": Data("hello\n".utf8),
            "sub/x.json": Data(#"{"k": 1}"#.utf8),
            "sub/deep/w.bin": big,
        ]
        for (path, data) in files { try sb.write("model/" + path, data) }
        return (dir, files.mapValues(\.count))
    }

    /// `sha256sum` of each path, run in `dir`.
    static func sha256sum(_ paths: [String], in dir: String, sb: Sandbox) throws -> [String: String] {
        let r = try Sandbox.runProcess("/usr/bin/env", ["sha256sum", "--"] + paths, environment: sb.environment([:]),
                                       ioDirectory: sb.root + "/io", currentDirectory: dir)
        try #require(r.status == 0, "sha256sum failed: \(r)")
        var sums: [String: String] = [:]
        for line in r.stdoutLines {
            let parts = line.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { continue }
            sums[String(parts[1].drop { $0 == " " || $0 == "*" })] = String(parts[0])
        }
        return sums
    }

    @Test("catalog hash: sorted paths, real sizes, SHA-256 equal to sha256sum's, as JSON {files: [...]}")
    func hashFolder() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (dir, sizes) = try Self.makeModelFolder(in: sb)
        let r = try sb.run(["catalog", "hash", dir])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        #expect(doc.keySet == ["files"])
        let files = try #require(doc["files"] as? [[String: Any]], "\(r)")
        let paths = files.compactMap { $0["path"] as? String }
        #expect(paths == ["B.bin", "a.txt", "sub/deep/w.bin", "sub/x.json"], "byte-order sorted relative paths")
        let sums = try Self.sha256sum(paths, in: dir, sb: sb)
        for file in files {
            let path = file["path"] as? String ?? "?"
            #expect(file["size"] as? Int == sizes[path], "\(path)")
            let digest = file["sha256"] as? String
            #expect(digest != nil && digest == sums[path], "\(path): \(digest ?? "nil") vs sha256sum \(sums[path] ?? "nil")")
        }
        #expect(entry(files, "sub/deep/w.bin")?["size"] as? Int == 3 * 1024 * 1024)

        // --json changes nothing: the output is JSON already.
        let json = try sb.run(["catalog", "hash", dir, "--json"])
        #expect(json.status == 0, "\(json)")
        #expect(try canonicalJSON(json.json(), dropping: []) == canonicalJSON(r.json(), dropping: []))
    }

    private func entry(_ files: [[String: Any]], _ path: String) -> [String: Any]? {
        files.first { $0["path"] as? String == path }
    }

    @Test("catalog hash --id --base-url prints a whole catalog that validate and list accept")
    func hashWholeCatalog() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (dir, sizes) = try Self.makeModelFolder(in: sb)
        let r = try sb.run(["catalog", "hash", dir, "--id", "x", "--base-url", "http://127.0.0.1:9/m/"])
        #expect(r.status == 0, "\(r)")
        #expect(r.stderr.isEmpty, "\(r)")
        let doc = try r.jsonObject()
        let models = try #require(doc["models"] as? [[String: Any]], "\(r)")
        #expect(models.count == 1)
        #expect(models.first?["id"] as? String == "x")
        #expect((models.first?["files"] as? [Any])?.count == 4)

        let catalog = try sb.write("generated.json", r.stdout)
        let valid = try sb.run(["catalog", "validate", catalog])
        #expect(valid.status == 0, "\(valid)")
        #expect(valid.stderr.isEmpty, "\(valid)")
        #expect(valid.stdout.contains("valid"), "\(valid)")

        let list = try sb.run(["list", "--catalog", catalog, "--json"])
        #expect(list.status == 0, "\(list)")
        let listed = try #require(try list.jsonObject()["models"] as? [[String: Any]], "\(list)")
        #expect(listed.compactMap { $0["id"] as? String } == ["x"])
        #expect((listed.first?["downloadBytes"] as? NSNumber)?.intValue == sizes.values.reduce(0, +))
    }

    @Test("catalog hash --id without --base-url is a usage error")
    func hashIdWithoutBaseURL() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (dir, _) = try Self.makeModelFolder(in: sb)
        let r = try sb.run(["catalog", "hash", dir, "--id", "x"])
        #expect(r.status == 2, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderrLines.first?.hasPrefix("Error: ") == true && r.stderr.contains("--base-url"), "\(r)")
        #expect(r.stderrLines.dropFirst().first?.hasPrefix("Usage: glasses-local catalog hash") == true, "\(r)")
    }

    @Test("catalog hash of a folder with a symlink: exit 1 naming it")
    func hashSymlink() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (dir, _) = try Self.makeModelFolder(in: sb)
        try FileManager.default.createSymbolicLink(atPath: dir + "/sub/alias.bin", withDestinationPath: "deep/w.bin")
        let r = try sb.run(["catalog", "hash", dir])
        #expect(r.status == 1, "\(r)")
        #expect(r.stdout.isEmpty, "no partial list on stdout\n\(r)")
        #expect(r.stderr.hasPrefix("Error: "), "\(r)")
        #expect(r.stderr.contains("sub/alias.bin"), "\(r)")
        #expect(r.stderr.contains("symlink"), "the message says what to do\n\(r)")
    }

    @Test("catalog hash of an empty folder: exit 1 naming it")
    func hashEmpty() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let dir = sb.root + "/empty"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let r = try sb.run(["catalog", "hash", dir])
        #expect(r.status == 1, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: ") && r.stderr.contains(dir), "\(r)")
    }

    @Test("catalog hash of a folder that does not exist: exit 1 naming it")
    func hashMissing() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let dir = sb.root + "/no-such-folder"
        let r = try sb.run(["catalog", "hash", dir])
        #expect(r.status == 1, "\(r)")
        #expect(r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.hasPrefix("Error: ") && r.stderr.contains(dir), "\(r)")

        let json = try sb.run(["catalog", "hash", dir, "--json"])
        #expect(json.status == 1, "\(json)")
        let error = try #require(try json.jsonObject()["error"] as? [String: Any], "\(json)")
        #expect(error["exitCode"] as? Int == 1)
    }

    @Test("catalog hash of a missing folder says it does not exist (not 'Not a directory')")
    func hashMissingMessage() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let dir = sb.root + "/no-such-folder"
        let r = try sb.run(["catalog", "hash", dir])
        #expect(r.status == 1, "\(r)")
        #expect(!r.stderr.contains("Not a directory"), "the folder is missing, not a file\n\(r)")
        #expect(r.stderr.contains("No such file or directory") || r.stderr.contains("does not exist"), "\(r)")

        // A regular file in its place is the case where "not a directory" is right.
        let plain = try sb.write("plain-file", "x")
        let file = try sb.run(["catalog", "hash", plain])
        #expect(file.status == 1, "\(file)")
        #expect(file.stderr.contains(plain), "\(file)")
    }

    // MARK: Catalog URLs whose path can climb out

    /// Source URL paths that climb out of, or stay in, their folder by a dot segment or an
    /// encoded separator, however spelled.
    static let traversalPaths = [
        "/a/../b/", "/a/./b/", "/%2e%2e/b/", "/%2E%2E/b/", "/.%2e/b/", "/%2e./b/", "/%2e/b/",
        "/a%2F..%2Fb/", "/a%2fb/", "/a%5Cb/", "/a%5c..%5cb/", "/a%00b/", "/%252e%252e/b/", "/a\\\\..\\\\b/",
    ]

    @Test("a files source whose baseURL path has '..', '.', an encoded separator or a NUL: catalog validate exits 6 with the JSON path; loading it with --catalog is refused too",
          arguments: traversalPaths)
    func traversalBaseURLIsRefused(_ path: String) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let file = try sb.write("traversal.json", Fixtures.catalog(baseURL: "https://models.example.com" + path))
        let r = try sb.run(["catalog", "validate", file, "--json"])
        #expect(r.status == 6, "\(r)")
        let issues = (try r.jsonObject()["issues"] as? [[String: Any]]) ?? []
        #expect(issues.count == 1 && issues.first?["path"] as? String == "models[0].sources[0].baseURL", "\(r)")
        let message = issues.first?["message"] as? String ?? ""
        #expect(message.contains("URL path"), "\(r)")
        let list = try sb.run(["--catalog", file, "--store", sb.root + "/store", "list"])
        #expect(list.status == 6 && list.stderr.contains("models[0].sources[0].baseURL: "), "\(list)")
    }

    @Test("an archive source whose url path climbs out is refused the same way", arguments: ["/x/%2e%2e/v.tar.bz2", "/x/../v.tar.bz2", "/x%2Fv.tar.bz2"])
    func traversalArchiveURLIsRefused(_ path: String) throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let text = Fixtures.catalog().replacingOccurrences(
            of: #"{"type": "files", "baseURL": "https://models.example.com/huge/"}"#,
            with: #"{"type": "archive", "url": "https://models.example.com\#(path)", "format": "tar.bz2", "size": 10, "sha256": "\#(String(repeating: "a", count: 64))"}"#)
        let file = try sb.write("traversal.json", text)
        let r = try sb.run(["catalog", "validate", file])
        #expect(r.status == 6, "\(r)")
        #expect(r.stderrLines.contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("models[0].sources[0].url: ") }, "\(r)")
        let list = try sb.run(["--catalog", file, "--store", sb.root + "/store", "list"])
        #expect(list.status == 6 && list.stderr.contains("models[0].sources[0].url: "), "\(list)")
    }

    @Test("catalog hash --base-url whose path climbs out is a usage error (it would print a catalog that no load accepts)")
    func hashTraversalBaseURL() throws {
        let sb = try Sandbox(); defer { sb.remove() }
        let (dir, _) = try Self.makeModelFolder(in: sb)
        let r = try sb.run(["catalog", "hash", dir, "--id", "x", "--base-url", "https://models.example.com/a/%2e%2e/"])
        #expect(r.status == 2 && r.stdout.isEmpty, "\(r)")
        #expect(r.stderr.contains("--base-url: the URL path") && r.stderr.contains("'..' segment"), "\(r)")
    }

}
