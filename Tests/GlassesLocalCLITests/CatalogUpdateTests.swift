import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `catalog update`: a signed catalog served by a real nginx is accepted only when a trusted
/// key signed it, it is newer, unexpired and valid; every refusal leaves the stored catalog
/// as it was. Keys are made at test time and trusted through EXTENTOS_CATALOG_KEYS.
@Suite("Signed catalogs: update", .ownThreads, .networkGuard)
struct CatalogUpdateTests {
    /// A world with a publisher key (trusted), a stranger's key (not trusted), and helpers
    /// to publish catalogs on its nginx.
    struct Publisher {
        let w: World
        let key: String
        let strangerKey: String
        var trusted: String { w.root + "/trusted" }
        var env: [String: String] { ["EXTENTOS_CATALOG_KEYS": trusted] }

        init() throws {
            w = try World()
            try FileManager.default.createDirectory(atPath: w.root + "/trusted", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: w.root + "/keys", withIntermediateDirectories: true)
            key = w.root + "/keys/publisher"
            strangerKey = w.root + "/keys/stranger"
            for k in [key, strangerKey] {
                let r = try w.run(["catalog", "keygen", k], catalog: nil)
                try #require(r.status == 0, "\(r)")
            }
            try FileManager.default.copyItem(atPath: key + ".pub", toPath: w.root + "/trusted/publisher.pub")
        }

        /// Writes `text` as `<mirror>/<name>` and signs it with `key` (default: the publisher's).
        /// Returns its URL.
        @discardableResult
        func publish(_ name: String, _ text: String, key signingKey: String? = nil) throws -> String {
            let path = w.nginx.mirror + "/" + name
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            let r = try w.run(["catalog", "sign", path, "--key", signingKey ?? key], catalog: nil)
            try #require(r.status == 0, "\(r)")
            return w.nginx.origin + "/" + name
        }

        func update(_ url: String, json: Bool = false) throws -> CLIResult {
            try w.run(["catalog", "update", "--from", url, "--retries", "1", "--retry-delay", "0"] + (json ? ["--json"] : []),
                      catalog: nil, env: env, timeout: 60)
        }

        /// The stored catalogs: file name → bytes.
        func stored() -> [String: Data] {
            let dir = w.store + "/.catalog"
            var out: [String: Data] = [:]
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
                out[name] = FileManager.default.contents(atPath: dir + "/" + name)
            }
            return out
        }

        func list() throws -> CLIResult { try w.run(["list"], catalog: nil, env: env) }
        func history() throws -> String { try w.run(["history"], catalog: nil, env: env).stdout }
    }

    static func catalog(version: Int, id: String = "huge-model", expiresAt: String? = nil) -> String {
        var text = Fixtures.catalog(version: version, id: id)
        if let expiresAt {
            text = text.replacingOccurrences(of: #""generatedAt": "2026-01-01T00:00:00Z","#,
                                             with: #""generatedAt": "2026-01-01T00:00:00Z", "expiresAt": "\#(expiresAt)","#)
        }
        return text
    }

    @Test("a newer catalog signed by a trusted key is accepted, stored and used; the same version again is nothing to do; a fast-forward is accepted")
    func acceptUpToDateFastForward() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let before = try p.list()
        #expect(before.status == 0 && !before.stdout.contains("v2-model"), "\(before)")

        let url = try p.publish("cat/catalog.json", Self.catalog(version: 12, id: "v2-model"))
        let r = try p.update(url)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("catalog version 12 accepted") && r.stdout.contains("publisher"), "\(r)")
        #expect(Set(p.stored().keys) == ["12.json", "12.json.sig"], "\(p.stored().keys)")
        let after = try p.list()
        #expect(after.status == 0 && after.stdout.contains("v2-model"), "the accepted catalog is used from now on\n\(after)")
        #expect(try p.history().contains("catalog version 12 accepted from \(url), signed by publisher"))

        let same = try p.update(url, json: true)
        #expect(same.status == 0, "\(same)")
        #expect(try same.jsonObject()["outcome"] as? String == "upToDate", "\(same)")

        let far = try p.publish("cat/catalog.json", Self.catalog(version: 500, id: "v500-model"))
        let ff = try p.update(far, json: true)
        #expect(ff.status == 0, "\(ff)")
        let doc = try ff.jsonObject()
        #expect(doc["outcome"] as? String == "accepted" && doc["catalogVersion"] as? Int == 500 && doc["previousVersion"] as? Int == 12, "\(ff)")
        #expect(Set(p.stored().keys) == ["500.json", "500.json.sig"], "older stored catalogs are removed")
        #expect(try p.list().stdout.contains("v500-model"))

        // Without the key the store's catalog is not trusted and not used: the built-in one
        // stands in for reading (said on stderr), and nothing is downloaded by it, since the
        // store has seen version 500 (CatalogTamperTests has the rest).
        let untrusted = try p.w.run(["list"], catalog: nil)
        #expect(untrusted.status == 0 && untrusted.stderr.contains("catalog version 500") && untrusted.stderr.contains("stands in")
                && !untrusted.stdout.contains("v500-model"), "\(untrusted)")
        let download = try p.w.run(["download", "local-qwen3-0.6b"], catalog: nil)
        #expect(download.status == 6 && download.stderr.contains("catalog update"), "\(download)")
    }

    struct Refusal: CustomTestStringConvertible, Sendable {
        var name: String
        var status: Int32
        var code: String
        var message: String
        var testDescription: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "signed by an unknown key", status: 4, code: "signatureInvalid", message: "not valid for any trusted key"),
        Refusal(name: "the signature of another file", status: 4, code: "signatureInvalid", message: "not valid for any trusted key"),
        Refusal(name: "one byte changed after signing", status: 4, code: "signatureInvalid", message: "not valid for any trusted key"),
        Refusal(name: "a lower version (rollback)", status: 6, code: "catalogRollback", message: "rollback"),
        Refusal(name: "an expired catalog", status: 6, code: "catalogExpired", message: "expired at 2026-02-01T00:00:00Z"),
        Refusal(name: "an invalid catalog, validly signed", status: 6, code: "invalidCatalog", message: "models[0].files[0].size"),
        Refusal(name: "no signature at all (404)", status: 1, code: "httpStatus", message: "HTTP 404"),
    ]

    @Test("refused with a clear message, and the stored catalog unchanged", arguments: refusals)
    func refused(_ c: Refusal) throws {
        let p = try Publisher(); defer { p.w.remove() }
        let v5 = try p.publish("good/catalog.json", Self.catalog(version: 15, id: "v5-model"))
        try #require(try p.update(v5).status == 0)
        let stored = p.stored()
        try #require(stored.count == 2)

        let url: String
        switch c.name {
        case "signed by an unknown key":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16), key: p.strangerKey)
        case "the signature of another file":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16))
            try FileManager.default.removeItem(atPath: p.w.nginx.mirror + "/bad/catalog.json.sig")
            try FileManager.default.copyItem(atPath: p.w.nginx.mirror + "/good/catalog.json.sig", toPath: p.w.nginx.mirror + "/bad/catalog.json.sig")
        case "one byte changed after signing":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16))
            let path = p.w.nginx.mirror + "/bad/catalog.json"
            let text = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(of: "\"catalogVersion\": 16", with: "\"catalogVersion\": 17")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        case "a lower version (rollback)":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 14))
        case "an expired catalog":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16, expiresAt: "2026-02-01T00:00:00Z"))
        case "an invalid catalog, validly signed":
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16).replacingOccurrences(of: "1099511627776", with: "-1"))
        default:
            url = try p.publish("bad/catalog.json", Self.catalog(version: 16))
            try FileManager.default.removeItem(atPath: p.w.nginx.mirror + "/bad/catalog.json.sig")
        }
        let r = try p.update(url, json: true)
        #expect(r.status == c.status, "\(r)")
        #expect(r.stderr.contains(c.message), "\(r)")
        let error = try #require(try r.jsonObject()["error"] as? [String: Any], "\(r)")
        #expect(error["code"] as? String == c.code, "\(r)")
        #expect(p.stored() == stored, "the stored catalog is unchanged")
        #expect(try p.list().stdout.contains("v5-model"), "the catalog already trusted is still used")
        if c.code == "catalogRollback" {
            #expect(try p.history().contains("refused catalog version 14 from \(url)"), "the refused rollback is in the history")
        }
    }

    @Test("a catalog larger than the cap, or a body that never ends, is refused after at most the cap; the stored catalog is unchanged")
    func capped() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let v5 = try p.publish("good/catalog.json", Self.catalog(version: 15, id: "v5-model"))
        try #require(try p.update(v5).status == 0)
        let stored = p.stored()
        let server = try PortServer(python: HostileServerNumberTests.faultServerScript)
        defer { server.stop() }
        for query in ["size=3000000&seed=1", "size=1&seed=1&endless=1"] {
            let r = try p.update("http://127.0.0.1:\(server.port)/c/catalog.json?\(query)", json: true)
            #expect(r.status == 6, "\(query): \(r)")
            #expect(r.stderr.contains("larger than the 1048576-byte cap"), "\(query): \(r)")
            let error = try #require(try r.jsonObject()["error"] as? [String: Any], "\(r)")
            #expect(error["code"] as? String == "invalidCatalog", "\(r)")
            #expect(p.stored() == stored)
        }
        #expect(!FileManager.default.fileExists(atPath: p.w.store + "/.partial/@catalog"), "nothing is left behind")
    }

    @Test("prefetch with EXTENTOS_CATALOG_URL updates the catalog first and fetches what the new catalog offers; a failed update is a warning and the run goes on with the trusted catalog")
    func prefetchUpdatesFirst() throws {
        let p = try Publisher(); defer { p.w.remove() }
        try p.w.addModel("pf", files: [("weights.bin", 300 * 1024), ("config.json", 600)])
        let hashed = try p.w.run(["catalog", "hash", p.w.nginx.mirror + "/pf", "--id", "pf", "--base-url", p.w.nginx.baseURL("pf"),
                                  "--required-mb", "1000", "--auto-eligible"], catalog: nil)
        try #require(hashed.status == 0, "\(hashed)")
        let v2 = hashed.stdout.replacingOccurrences(of: "\"catalogVersion\": 1,", with: "\"catalogVersion\": 12,")
        try #require(v2 != hashed.stdout)
        let device = ["EXTENTOS_MEMORY_MB": "8192", "EXTENTOS_MEMORY_AVAILABLE_MB": "6000"]

        // The update URL is down: a warning, and the run goes on over the built-in catalog
        // (on a device too small for any built-in model, so nothing leaves 127.0.0.1).
        var env = p.env.merging(["EXTENTOS_MEMORY_MB": "1024", "EXTENTOS_MEMORY_AVAILABLE_MB": "900"]) { $1 }
        env["EXTENTOS_CATALOG_URL"] = p.w.nginx.origin + "/missing/catalog.json"
        let down = try p.w.run(["prefetch", "--dry-run", "--retries", "0"], catalog: nil, env: env)
        #expect(down.status == 0 && down.stdout.contains("would update the catalog from"), "a dry run only says so\n\(down)")
        let failed = try p.w.run(["prefetch", "--retries", "0", "--json"], catalog: nil, env: env)
        #expect(failed.status == 0, "\(failed)")
        #expect(failed.stdout.contains("\"event\":\"catalog-update-failed\"") && failed.stdout.contains("\"code\":\"httpStatus\""), "\(failed)")
        #expect(failed.stdout.contains("\"event\":\"nothing\""), "the run went on: \(failed)")
        #expect(p.stored().isEmpty)

        let url = try p.publish("cat/catalog.json", v2)
        env = p.env.merging(device) { $1 }
        env["EXTENTOS_CATALOG_URL"] = url
        let r = try p.w.run(["prefetch"], catalog: nil, env: env)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("prefetch: catalog version 12 accepted from \(url)"), "\(r)")
        #expect(r.stdout.contains("prefetch: pf installed in"), "the new catalog's model is fetched in the same run\n\(r)")
        #expect(try p.w.run(["verify", "pf"], catalog: nil, env: p.env).status == 0)
        let again = try p.w.run(["prefetch"], catalog: nil, env: env)
        #expect(again.status == 0 && again.stdout.contains("catalog version 12 is current"), "\(again)")
    }

    @Test("--catalog URL on any command goes through the same checks: a signed newer catalog is accepted and used, a forged one refused")
    func catalogURLOption() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let good = try p.publish("cat/catalog.json", Self.catalog(version: 13, id: "v3-model"))
        let r = try p.w.run(["list", "--catalog", good], catalog: nil, env: p.env)
        #expect(r.status == 0 && r.stdout.contains("v3-model"), "\(r)")
        #expect(Set(p.stored().keys) == ["13.json", "13.json.sig"])
        let forged = try p.publish("bad/catalog.json", Self.catalog(version: 14, id: "v4-model"), key: p.strangerKey)
        let bad = try p.w.run(["info", "v4-model", "--catalog", forged], catalog: nil, env: p.env)
        #expect(bad.status == 4 && bad.stderr.contains("not valid for any trusted key"), "\(bad)")
        #expect(try p.list().stdout.contains("v3-model"), "the trusted catalog is still used")
        let ftp = try p.w.run(["list", "--catalog", "http://example.com/catalog.json"], catalog: nil, env: p.env)
        #expect(ftp.status == 2 && ftp.stderr.contains("--catalog http://example.com/catalog.json"), "plain http only on loopback\n\(ftp)")
    }

    /// `text` with a `nextKey` naming the public key in `pubPath`.
    static func naming(_ text: String, nextKey name: String, pubPath: String) throws -> String {
        let pem = try String(contentsOfFile: pubPath, encoding: .utf8)
        let escaped = pem.replacingOccurrences(of: "\n", with: "\\n")
        return text.replacingOccurrences(of: #""generatedAt": "2026-01-01T00:00:00Z","#,
                                         with: #""generatedAt": "2026-01-01T00:00:00Z", "nextKey": {"name": "\#(name)", "publicKey": "\#(escaped)"},"#)
    }

    @Test("key rotation: a next key named by a catalog the current key signed is trusted from then on; one never named is not")
    func rotation() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let next = p.w.root + "/keys/next"
        try #require(try p.w.run(["catalog", "keygen", next], catalog: nil).status == 0)

        // Signed by the next key before any catalog named it: refused.
        let early = try p.publish("early/catalog.json", Self.catalog(version: 12, id: "early-model"), key: next)
        let refused = try p.update(early)
        #expect(refused.status == 4 && refused.stderr.contains("not valid for any trusted key"), "\(refused)")

        // The current key signs a catalog that names the next key.
        let v2 = try p.publish("cat/catalog.json", try Self.naming(Self.catalog(version: 12, id: "v2-model"), nextKey: "next", pubPath: next + ".pub"))
        let a = try p.update(v2)
        #expect(a.status == 0, "\(a)")
        #expect(try p.history().contains("it names the next signing key next, trusted from now on"))
        // The next key now signs on its own, and its catalog verifies whenever it is read.
        let v3 = try p.publish("cat/catalog.json", Self.catalog(version: 13, id: "v3-model"), key: next)
        let b = try p.update(v3)
        #expect(b.status == 0 && b.stdout.contains("signed by next"), "\(b)")
        #expect(try p.list().stdout.contains("v3-model"))
        // A catalog signed by a stranger that names the stranger's key gains nothing.
        let sneaky = try p.publish("bad/catalog.json", try Self.naming(Self.catalog(version: 14), nextKey: "stranger", pubPath: p.strangerKey + ".pub"),
                                   key: p.strangerKey)
        #expect(try p.update(sneaky).status == 4)
        #expect(!FileManager.default.fileExists(atPath: p.w.store + "/.catalog/keys/stranger.pub"))
    }

    @Test("an accepted catalog that has since expired keeps serving (installed models keep working), and doctor says to get a current one")
    func acceptedThenExpired() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let formatter = ISO8601DateFormatter()
        // An hour of validity, and the commands after it run with their clock two hours
        // ahead (libfaketime): no race with the real clock, however slow the machine.
        let expiry = formatter.string(from: Date().addingTimeInterval(3600))
        let url = try p.publish("cat/catalog.json", Self.catalog(version: 12, id: "v2-model", expiresAt: expiry))
        try #require(try p.update(url).status == 0)
        let before = try p.w.run(["doctor", "--json"], catalog: nil, env: p.env)
        let catalogBefore = try #require(try before.jsonObject()["catalog"] as? [String: Any], "\(before)")
        #expect(catalogBefore["expired"] as? Bool == false && catalogBefore["expiresAt"] as? String == expiry, "\(before)")
        let later = "+2h"
        let list = try p.w.run(["list"], catalog: nil, env: p.env, clockAhead: later)
        #expect(list.status == 0 && list.stdout.contains("v2-model"), "still used after its expiresAt\n\(list)")
        let doctor = try p.w.run(["doctor"], catalog: nil, env: p.env, clockAhead: later)
        #expect(doctor.stdout.contains("FAIL catalog: version 12") && doctor.stdout.contains("expired at \(expiry)"), "\(doctor)")
        #expect(doctor.stdout.contains("glasses-local catalog update"), "doctor says what to do\n\(doctor)")
        // Offered again once expired, the same catalog is refused.
        let again = try p.w.run(["catalog", "update", "--from", url, "--retries", "1", "--retry-delay", "0"], catalog: nil,
                                env: p.env, clockAhead: later)
        #expect(again.status == 6 && again.stderr.contains("expired at \(expiry)"), "\(again)")
    }

    @Test("no URL is a usage error that says how to give one; EXTENTOS_CATALOG_URL is used when --from is absent")
    func urlFromEnvironment() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let none = try p.w.run(["catalog", "update"], catalog: nil, env: p.env)
        #expect(none.status == 2 && none.stderr.contains("EXTENTOS_CATALOG_URL"), "\(none)")
        let url = try p.publish("cat/catalog.json", Self.catalog(version: 13, id: "v3-model"))
        var env = p.env
        env["EXTENTOS_CATALOG_URL"] = url
        let r = try p.w.run(["catalog", "update"], catalog: nil, env: env)
        #expect(r.status == 0 && r.stdout.contains("catalog version 13 accepted"), "\(r)")
    }

    @Test("a .catalog that is a symbolic link: never read through, removed by the next command, and catalog update restores the store's catalog (the outside folder untouched)")
    func catalogFolderLink() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let url = try p.publish("cat/catalog.json", Self.catalog(version: 12, id: "v2-model"))
        try #require(try p.update(url).status == 0)
        // The store's catalog folder is replaced by a link to an outside copy of it.
        let outside = p.w.root + "/outside-catalog"
        try FileManager.default.moveItem(atPath: p.w.store + "/.catalog", toPath: outside)
        try FileManager.default.createSymbolicLink(atPath: p.w.store + "/.catalog", withDestinationPath: outside)
        let before = Disk.tree(outside)

        let list = try p.list()
        #expect(list.status == 0 && !list.stdout.contains("v2-model"), "the catalog behind the link is not used\n\(list)")
        let isLink = (try? FileManager.default.destinationOfSymbolicLink(atPath: p.w.store + "/.catalog")) != nil
        #expect(!isLink, "the link is gone after a command opened the store")
        let restore = try p.update(url)
        #expect(restore.status == 0, "catalog update can restore the store\n\(restore)")
        let after = try p.list()
        #expect(after.stdout.contains("v2-model"), "\(after)")
        #expect(Disk.tree(outside) == before, "nothing written through the link")
    }

    @Test("doctor never prints the password of EXTENTOS_CATALOG_URL (text or --json): the URL is shown as https://***@…")
    func doctorRedactsCatalogURL() throws {
        let p = try Publisher(); defer { p.w.remove() }
        let url = try p.publish("cat/catalog.json", Self.catalog(version: 12, id: "v2-model"))
        try #require(try p.update(url).status == 0)
        let env = p.env.merging(["EXTENTOS_CATALOG_URL": "https://publisher:Pa55word-42@catalog.example/c.json"]) { $1 }
        for arguments in [["doctor"], ["doctor", "--json"]] {
            let r = try p.w.run(arguments, catalog: nil, env: env)
            #expect(!r.stdout.contains("Pa55word-42") && !r.stderr.contains("Pa55word-42"), "\(arguments): \(r)")
        }
        let json = try p.w.run(["doctor", "--json"], catalog: nil, env: env)
        let catalog = try #require(try json.jsonObject()["catalog"] as? [String: Any], "\(json)")
        #expect(catalog["updateURL"] as? String == "https://***@catalog.example/c.json", "\(json)")
    }
}
