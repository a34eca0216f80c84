import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// `expiresAt`: an optional RFC 3339 UTC moment after which a catalog is no longer
/// trusted (a frozen mirror cannot keep serving an old, validly signed catalog).
@Suite(.networkGuard)
struct CatalogExpiryTests {
    static func text(expiresAt: String?) -> [UInt8] {
        let field = expiresAt.map { #""expiresAt":"\#($0)","# } ?? ""
        return Array(#"{"schemaVersion":1,"catalogVersion":2,"generatedAt":"2026-11-30T00:00:00Z",\#(field)"models":[]}"#.utf8)
    }

    @Test func timestampsConvertToEpochSeconds() {
        #expect(CatalogRules.epochSeconds("1970-01-01T00:00:00Z") == 0)
        #expect(CatalogRules.epochSeconds("2000-03-01T00:00:00Z") == 951_868_800)
        #expect(CatalogRules.epochSeconds("2026-11-30T12:34:56Z") == 1_796_042_096)
        // Fractions are dropped, not rounded.
        #expect(CatalogRules.epochSeconds("2026-11-30T12:34:56.999Z") == 1_796_042_096)
        #expect(CatalogRules.epochSeconds("2026-02-29T00:00:00Z") == nil)
        #expect(CatalogRules.epochSeconds("2026-11-30 12:34:56Z") == nil)
        #expect(CatalogRules.epochSeconds("2026-11-30T12:34:56+01:00") == nil)
    }

    @Test func aCatalogWithoutExpiresAtNeverExpires() throws {
        guard let catalog = CatalogTests.expectAccepted(Self.text(expiresAt: nil)) else { return }
        #expect(catalog.expiresAt == nil)
        #expect(!catalog.isExpired(now: Int64.max))
        #expect(BundledCatalog.catalog.expiresAt == nil, "the built-in catalog is the floor and never expires")
    }

    @Test func expiresAtIsReadAndComparedWithNow() throws {
        guard let catalog = CatalogTests.expectAccepted(Self.text(expiresAt: "2027-03-01T00:00:00Z")) else { return }
        #expect(catalog.expiresAt == "2027-03-01T00:00:00Z")
        let end = try #require(CatalogRules.epochSeconds("2027-03-01T00:00:00Z"))
        #expect(!catalog.isExpired(now: end - 1))
        #expect(catalog.isExpired(now: end), "the moment itself is expired")
        #expect(catalog.isExpired(now: end + 86_400))
    }

    @Test func anExpiresAtThatIsNotATimestampIsRejected() {
        CatalogTests.expectRejected(Self.text(expiresAt: "next year"), at: "expiresAt", saying: "not an RFC 3339 UTC time")
        CatalogTests.expectRejected(Array(#"{"schemaVersion":1,"catalogVersion":2,"generatedAt":"2026-11-30T00:00:00Z","expiresAt":1798761600,"models":[]}"#.utf8),
                                    at: "expiresAt", saying: "expected a string, found integer")
    }

    @Test func anExpiresAtNotAfterGeneratedAtIsRejected() {
        CatalogTests.expectRejected(Self.text(expiresAt: "2026-11-30T00:00:00Z"), at: "expiresAt", saying: "is not after generatedAt")
        CatalogTests.expectRejected(Self.text(expiresAt: "2025-01-01T00:00:00Z"), at: "expiresAt", saying: "is not after generatedAt")
    }

    @Test func nextKeyMustBeANamedEd25519PublicKey() throws {
        func text(_ nextKey: String) -> [UInt8] {
            Array(#"{"schemaVersion":1,"catalogVersion":2,"generatedAt":"2026-11-30T00:00:00Z","nextKey":\#(nextKey),"models":[]}"#.utf8)
        }
        let pem = "-----BEGIN PUBLIC KEY-----\\nMCowBQYDK2VwAyEA7Qz9y5nyh3Wp8H0oRE94KzBdN4sdPEwCwgd9VUSQBSA=\\n-----END PUBLIC KEY-----\\n"
        let good = try #require(CatalogTests.expectAccepted(text(#"{"name":"publisher-2027","publicKey":"\#(pem)"}"#)))
        #expect(good.nextKey?.name == "publisher-2027")
        #expect(good.nextKey?.publicKey.hasPrefix("-----BEGIN PUBLIC KEY-----\n") == true)
        CatalogTests.expectRejected(text(#"{"name":"../evil","publicKey":"\#(pem)"}"#), at: "nextKey.name", saying: "not a key name")
        CatalogTests.expectRejected(text(#"{"name":"k","publicKey":"not a key"}"#), at: "nextKey.publicKey", saying: "not an Ed25519 public key")
        CatalogTests.expectRejected(text(#"{"name":"k"}"#), at: "nextKey.publicKey", saying: "missing")
    }
}
