// The only Swift file that touches libcrypto.
// https://www.openssl.org/docs/man3.0/man3/EVP_DigestInit.html
internal import CCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A libcrypto failure, with OpenSSL's own message.
public struct CryptoError: Error, Sendable, CustomStringConvertible {
    public var description: String

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
public final class SHA256Hasher {
    private let context: OpaquePointer
    private var finished = false
    /// Bytes fed so far.
    public private(set) var count: Int64 = 0

    public init() throws(CryptoError) {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError("create SHA-256 context") }
        guard EVP_DigestInit_ex(ctx, EVP_sha256(), nil) == 1 else {
            EVP_MD_CTX_free(ctx)
            throw CryptoError("initialise SHA-256")
        }
        context = ctx
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        // EVP_DigestUpdate on an initialised SHA-256 context cannot fail.
        let ok = EVP_DigestUpdate(context, base, bytes.count)
        precondition(ok == 1 && !finished, "SHA-256 update after finalize")
        count += Int64(bytes.count)
    }

    public func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hex characters.
    public func finalize() throws(CryptoError) -> String {
        precondition(!finished, "SHA-256 finalized twice")
        finished = true
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else { throw CryptoError("finish SHA-256") }
        return hex(digest.prefix(Int(length)))
    }

    /// Hashes a whole file in 1 MiB reads; returns the hash and the byte count.
    /// - Parameter limit: stop after this many bytes (used to hash a partial's prefix).
    public static func hashFile(atPath path: String, limit: Int64 = .max) throws -> (sha256: String, size: Int64) {
        let hasher = try SHA256Hasher()
        let file = try FileDescriptor.open(path, flags: O_RDONLY)
        let bufferSize = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var remaining = limit
        while remaining > 0 {
            let want = Int(min(Int64(bufferSize), remaining))
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]))
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            remaining -= Int64(n)
        }
        return (try hasher.finalize(), hasher.count)
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
