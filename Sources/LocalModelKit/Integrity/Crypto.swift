// The only Swift file that touches libcrypto.
// https://www.openssl.org/docs/man3.0/man3/EVP_DigestInit.html
internal import CCrypto

/// A libcrypto failure, with OpenSSL's own message.
package struct CryptoError: Error, Sendable, CustomStringConvertible {
    /// What was attempted, then OpenSSL's message (`ERR_error_string_n`).
    package var description: String

    init(_ what: String) {
        let code = ERR_get_error()
        var buffer = [CChar](repeating: 0, count: 256)
        if code != 0 { ERR_error_string_n(code, &buffer, buffer.count) }
        let detail = code != 0 ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "unknown error"
        description = "\(what): \(detail)"
    }
}

/// Streaming SHA-256 over libcrypto's EVP interface.
///
/// Feed it the bytes as they arrive (`update`), then `finalize()` once. A
/// resumed download first feeds the partial file's bytes, then the network's,
/// so no file is ever read twice.
///
/// ```swift
/// let hasher = try SHA256Hasher()
/// hasher.update(chunk)
/// let hex = try hasher.finalize()
/// ```
package final class SHA256Hasher {
    private let context: OpaquePointer
    private var finished = false
    /// Bytes fed so far.
    package private(set) var count: Int64 = 0

    /// A fresh SHA-256 context.
    /// - Throws: ``CryptoError`` when libcrypto cannot make one (out of memory).
    package init() throws(CryptoError) {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError("create SHA-256 context") }
        guard EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1 else {
            EVP_MD_CTX_free(ctx)
            throw CryptoError("initialise SHA-256")
        }
        context = ctx
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Feeds `bytes` (after ``finalize()`` is a bug, and traps).
    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        // EVP_DigestUpdate on an initialised SHA-256 context cannot fail.
        let ok = EVP_DigestUpdate(context, base, bytes.count)
        precondition(ok == 1 && !finished, "SHA-256 update after finalize")
        count += Int64(bytes.count)
    }

    /// Feeds `bytes`.
    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hex characters.
    package func finalize() throws(CryptoError) -> String {
        precondition(!finished, "SHA-256 finalized twice")
        finished = true
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else { throw CryptoError("finish SHA-256") }
        return hex(digest.prefix(Int(length)))
    }

    /// The SHA-256 of `bytes` as 64 lowercase hex characters.
    package static func hash(_ bytes: [UInt8]) throws(CryptoError) -> String {
        let hasher = try SHA256Hasher()
        hasher.update(bytes)
        return try hasher.finalize()
    }

    /// Hashes a whole file in 1 MiB reads; returns the hash and the byte count.
    /// - Parameters:
    ///   - path: the file (links are followed: callers pass paths they control).
    ///   - limit: stop after this many bytes (used to hash a partial's prefix).
    package static func hashFile(atPath path: String, limit: Int64 = .max) throws(FileHashError) -> (sha256: String, size: Int64) {
        let hasher: SHA256Hasher
        do { hasher = try SHA256Hasher() } catch { throw .crypto(error) }
        let bufferSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        do {
            // Non-blocking and checked after the open: a FIFO or a device put where a file was
            // expected is refused, never waited on.
            let file = try FileDescriptor.open(path, .readOnly, options: .nonBlocking)
            try file.requireRegularFile()
            var remaining = limit
            while remaining > 0 {
                let want = Int(min(Int64(bufferSize), remaining))
                let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]))
                if n == 0 { break }
                hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                remaining -= Int64(n)
            }
        } catch {
            throw .system(error)
        }
        do { return (try hasher.finalize(), hasher.count) } catch { throw .crypto(error) }
    }
}

/// Why a file could not be hashed: reading it, or libcrypto.
package enum FileHashError: Error, Sendable, CustomStringConvertible {
    /// Opening or reading the file failed.
    case system(SystemError)
    /// libcrypto failed.
    case crypto(CryptoError)

    /// The underlying message.
    package var description: String {
        switch self {
        case .system(let error): return error.message
        case .crypto(let error): return "\(error)"
        }
    }
}

@available(*, unavailable)
extension SHA256Hasher: Sendable {}

private let hexDigits = Array("0123456789abcdef".utf8)

func hex<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
    var out: [UInt8] = []
    for b in bytes {
        out.append(hexDigits[Int(b >> 4)])
        out.append(hexDigits[Int(b & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Ed25519 signatures over libcrypto (`EVP_PKEY_ED25519`), for signed catalogs. Keys are
/// PEM as OpenSSL writes them (PKCS#8 private keys, SubjectPublicKeyInfo public keys);
/// signatures are the raw 64 bytes, interoperable with `openssl pkeyutl -sign -rawin`.
package enum Ed25519 {
    /// A new key pair, as PEM text: (private, public).
    package static func generate() throws(CryptoError) -> (privatePEM: String, publicPEM: String) {
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else { throw CryptoError("create an Ed25519 key context") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_keygen(ctx, &key) == 1, let key else { throw CryptoError("generate an Ed25519 key") }
        defer { EVP_PKEY_free(key) }
        let privatePEM = try pem { bio in PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) }
        let publicPEM = try pem { bio in PEM_write_bio_PUBKEY(bio, key) }
        return (privatePEM, publicPEM)
    }

    /// The public key (PEM) of a private key (PEM).
    package static func publicKey(ofPrivate privatePEM: String) throws(CryptoError) -> String {
        let key = try readKey(privatePEM, isPrivate: true)
        defer { EVP_PKEY_free(key) }
        return try pem { bio in PEM_write_bio_PUBKEY(bio, key) }
    }

    /// The 64-byte signature of `message`.
    package static func sign(_ message: [UInt8], privatePEM: String) throws(CryptoError) -> [UInt8] {
        let key = try readKey(privatePEM, isPrivate: true)
        defer { EVP_PKEY_free(key) }
        guard let md = EVP_MD_CTX_new() else { throw CryptoError("create a signing context") }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestSignInit(md, nil, nil, nil, key) == 1 else { throw CryptoError("start an Ed25519 signature (is it an Ed25519 key?)") }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = signature.count
        let rc = message.withUnsafeBufferPointer { m in
            EVP_DigestSign(md, &signature, &length, m.baseAddress, m.count)
        }
        guard rc == 1, length == 64 else { throw CryptoError("sign") }
        return signature
    }

    /// True only when `signature` is `message`'s Ed25519 signature by `publicPEM`'s key.
    package static func verify(_ message: [UInt8], signature: [UInt8], publicPEM: String) -> Bool {
        guard signature.count == 64, let key = try? readKey(publicPEM, isPrivate: false) else { return false }
        defer { EVP_PKEY_free(key) }
        guard let md = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(md) }
        guard EVP_DigestVerifyInit(md, nil, nil, nil, key) == 1 else { return false }
        let rc = message.withUnsafeBufferPointer { m in
            signature.withUnsafeBufferPointer { s in EVP_DigestVerify(md, s.baseAddress, s.count, m.baseAddress, m.count) }
        }
        ERR_clear_error()
        return rc == 1
    }

    /// Whether `pem` holds an Ed25519 public key.
    package static func isPublicKey(_ pem: String) -> Bool {
        guard let key = try? readKey(pem, isPrivate: false) else { return false }
        defer { EVP_PKEY_free(key) }
        return EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519
    }

    private static func readKey(_ pem: String, isPrivate: Bool) throws(CryptoError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let key: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(clamping: buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return isPrivate ? PEM_read_bio_PrivateKey(bio, nil, nil, nil) : PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let key else { throw CryptoError(isPrivate ? "read the private key (PEM, PKCS#8)" : "read the public key (PEM)") }
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_ED25519 else {
            EVP_PKEY_free(key)
            throw CryptoError("the key is not an Ed25519 key")
        }
        return key
    }

    /// Text a PEM writer put into a memory BIO.
    private static func pem(_ write: (OpaquePointer) -> Int32) throws(CryptoError) -> String {
        guard let method = BIO_s_mem(), let bio = BIO_new(method) else { throw CryptoError("create a memory BIO") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw CryptoError("write PEM") }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = BIO_read(bio, &chunk, Int32(chunk.count))
            if n <= 0 { break }
            out += chunk[0..<Int(n)]
        }
        return String(decoding: out, as: UTF8.self)
    }
}
