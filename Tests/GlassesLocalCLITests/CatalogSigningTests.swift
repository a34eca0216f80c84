import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `catalog keygen | sign | verify`, and OpenSSL interoperability both ways. Keys are made
/// at test time; none is ever committed (only Catalog/keys/*.pub, the public halves).
@Suite("Signed catalogs: publishing", .ownThreads, .networkGuard)
struct CatalogSigningTests {
    @Test("keygen writes a private key only its owner can read and never overwrites one")
    func keygen() throws {
        let w = try World(); defer { w.remove() }
        let key = w.root + "/signing.key"
        let r = try w.run(["catalog", "keygen", key], catalog: nil)
        #expect(r.status == 0, "\(r)")
        var st = stat()
        #expect(lstat(key, &st) == 0 && st.st_mode & 0o077 == 0, "no group or other bits: \(String(st.st_mode, radix: 8))")
        let pub = try String(contentsOfFile: key + ".pub", encoding: .utf8)
        #expect(pub.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        let again = try w.run(["catalog", "keygen", key], catalog: nil)
        #expect(again.status != 0 && again.stderr.contains("never overwrites"), "\(again)")
        // OpenSSL reads both.
        #expect(try World.tool("/usr/bin/env", ["openssl", "pkey", "-in", key, "-noout"]).status == 0)
        #expect(try World.tool("/usr/bin/env", ["openssl", "pkey", "-pubin", "-in", key + ".pub", "-noout"]).status == 0)
    }

    @Test("our signature verifies with openssl, openssl's with ours; a changed byte, another file's signature or another key is exit 4")
    func interoperability() throws {
        let w = try World(); defer { w.remove() }
        let key = w.root + "/k"
        #expect(try w.run(["catalog", "keygen", key], catalog: nil).status == 0)
        let catalog = PackageRoot.bundledCatalog
        let file = w.root + "/catalog.json"
        try FileManager.default.copyItem(atPath: catalog, toPath: file)

        let signed = try w.run(["catalog", "sign", file, "--key", key], catalog: nil)
        #expect(signed.status == 0, "\(signed)")
        let ours = try #require(Data(base64Encoded: try String(contentsOfFile: file + ".sig", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(ours.count == 64)
        try ours.write(to: URL(fileURLWithPath: w.root + "/ours.bin"))
        let opensslVerify = try World.tool("/usr/bin/env", ["openssl", "pkeyutl", "-verify", "-rawin", "-pubin", "-inkey", key + ".pub",
                                                            "-in", file, "-sigfile", w.root + "/ours.bin"])
        #expect(opensslVerify.status == 0 && opensslVerify.stdout.contains("Signature Verified Successfully"), "\(opensslVerify)")

        let opensslSign = try World.tool("/usr/bin/env", ["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", key, "-in", file,
                                                          "-out", w.root + "/theirs.bin"])
        #expect(opensslSign.status == 0, "\(opensslSign)")
        let theirs = try Data(contentsOf: URL(fileURLWithPath: w.root + "/theirs.bin"))
        try (theirs.base64EncodedString() + "\n").write(toFile: w.root + "/theirs.sig", atomically: true, encoding: .utf8)
        let ok = try w.run(["catalog", "verify", file, "--sig", w.root + "/theirs.sig", "--key", key + ".pub"], catalog: nil)
        #expect(ok.status == 0 && ok.stdout.contains("valid signature"), "\(ok)")

        // One byte changed after signing.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count / 2] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: w.root + "/changed.json"))
        let changed = try w.run(["catalog", "verify", w.root + "/changed.json", "--sig", file + ".sig", "--key", key + ".pub"], catalog: nil)
        #expect(changed.status == 4 && changed.stderr.contains("not valid"), "\(changed)")
        // Another file's signature.
        try Data("{}".utf8).write(to: URL(fileURLWithPath: w.root + "/other.json"))
        #expect(try w.run(["catalog", "sign", w.root + "/other.json", "--key", key], catalog: nil).status == 0)
        let other = try w.run(["catalog", "verify", file, "--sig", w.root + "/other.json.sig", "--key", key + ".pub"], catalog: nil)
        #expect(other.status == 4, "\(other)")
        // Another key.
        #expect(try w.run(["catalog", "keygen", w.root + "/k2"], catalog: nil).status == 0)
        let wrongKey = try w.run(["catalog", "verify", file, "--key", w.root + "/k2.pub"], catalog: nil)
        #expect(wrongKey.status == 4, "\(wrongKey)")
    }

    @Test("without --key the trusted keys decide: the shipped ones, plus EXTENTOS_CATALOG_KEYS")
    func trustedKeys() throws {
        let w = try World(); defer { w.remove() }
        let keys = w.root + "/trusted"
        try FileManager.default.createDirectory(atPath: keys, withIntermediateDirectories: true)
        #expect(try w.run(["catalog", "keygen", keys + "/test-publisher"], catalog: nil).status == 0)
        try FileManager.default.moveItem(atPath: keys + "/test-publisher", toPath: w.root + "/test-publisher.key")
        let file = w.root + "/catalog.json"
        try FileManager.default.copyItem(atPath: PackageRoot.bundledCatalog, toPath: file)
        #expect(try w.run(["catalog", "sign", file, "--key", w.root + "/test-publisher.key"], catalog: nil).status == 0)
        let untrusted = try w.run(["catalog", "verify", file, "--json"], catalog: nil)
        #expect(untrusted.status == 4, "a key nobody trusts: \(untrusted)")
        let trusted = try w.run(["catalog", "verify", file, "--json"], catalog: nil, env: ["EXTENTOS_CATALOG_KEYS": keys])
        #expect(trusted.status == 0, "\(trusted)")
        #expect(try trusted.jsonObject()["key"] as? String == "test-publisher")
    }

    @Test("the shipped Catalog/catalog.json carries Catalog/catalog.json.sig, a valid signature by a shipped key (checked by openssl too)")
    func shippedCatalogIsSigned() throws {
        let w = try World(); defer { w.remove() }
        let catalog = PackageRoot.bundledCatalog
        let r = try w.run(["catalog", "verify", catalog], catalog: nil)
        let shipped = try FileManager.default.contentsOfDirectory(atPath: PackageRoot.path() + "/Catalog/keys")
            .filter { $0.hasSuffix(".pub") }.map { String($0.dropLast(4)) }
        let signer = shipped.first { r.stdout.contains("valid signature by \($0)") }
        #expect(r.status == 0 && signer != nil, """
            \(r)
            Catalog/catalog.json changed after it was signed: the publisher re-signs it with its private key \
            (glasses-local catalog sign Catalog/catalog.json --key KEY). Without that key, make a new pair \
            (catalog keygen), put the .pub in Catalog/keys/, run Scripts/embed-catalog, and sign with it.
            """)
        let raw = w.root + "/sig.bin"
        let signature = try #require(Data(base64Encoded: try String(contentsOfFile: catalog + ".sig", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        try signature.write(to: URL(fileURLWithPath: raw))
        let keyPath = PackageRoot.path() + "/Catalog/keys/\(signer ?? "extentos-catalog-2026-12").pub"
        let openssl = try World.tool("/usr/bin/env", ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", keyPath, "-rawin",
                                                      "-in", catalog, "-sigfile", raw])
        #expect(openssl.status == 0, "\(openssl)")
    }
}
