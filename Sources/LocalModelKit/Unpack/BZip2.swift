// The only Swift file that touches libbz2. https://sourceware.org/bzip2/manual/manual.html
// (section 3.3, the low-level interface). libbz2 is opened on first use (CLibraryLoader).
internal import CBZip2

/// Why libbz2 refused its input: its return code and what was being decoded.
struct BZip2Error: Error, Equatable, CustomStringConvertible {
    var code: Int32
    /// "bzip2 block 12 (compressed bytes 1048576…2097151): the data is damaged (BZ_DATA_ERROR)".
    var message: String
    var description: String { message }

    /// True when the bytes are at fault (damaged, not bzip2), not the machine (memory, a
    /// missing library).
    var isDataError: Bool { code == BZ_DATA_ERROR || code == BZ_DATA_ERROR_MAGIC || code == BZ_UNEXPECTED_EOF }

    /// The one checker of libbz2's return codes: its meaning, with what was being done.
    init(code: Int32, _ what: String) {
        self.code = code
        let meaning: String
        switch code {
        case BZ_DATA_ERROR: meaning = "the data is damaged (BZ_DATA_ERROR: a CRC or a structure check failed)"
        case BZ_DATA_ERROR_MAGIC: meaning = "not bzip2 data (BZ_DATA_ERROR_MAGIC)"
        case BZ_UNEXPECTED_EOF: meaning = "the data ends too soon (BZ_UNEXPECTED_EOF)"
        case BZ_MEM_ERROR: meaning = "out of memory (BZ_MEM_ERROR)"
        case BZ_CONFIG_ERROR:
            meaning = glasses_bz2_load_error().map { String(cString: $0) } ?? "libbz2 is misconfigured (BZ_CONFIG_ERROR)"
        default: meaning = "libbz2 error \(code)"
        }
        message = "\(what): \(meaning)"
    }
}

/// One libbz2 decompression stream (`BZ2_bzDecompressInit` … `BZ2_bzDecompressEnd`),
/// fed and drained by the caller: the block decoders of `BZip2Blocks` (each block
/// re-wrapped as a stream of its own) and the sequential decoder it falls back to.
///
/// ```swift
/// let stream = try BZip2Stream(describing: "bzip2 block 3")
/// let step = try stream.decompress(input, into: output)   // consumed, produced, ended
/// ```
final class BZip2Stream {
    // libbz2 keeps a pointer back to the bz_stream in its state and checks it on every
    // call: the struct needs an address that never moves.
    private let stream = UnsafeMutablePointer<bz_stream>.allocate(capacity: 1)
    private let what: String
    /// Where libbz2's tables come from, when not malloc; kept alive until the stream ends.
    private let memory: BZip2Memory?

    /// What one `decompress` call did.
    struct Step {
        var consumed: Int
        var produced: Int
        /// The end-of-stream marker was read and the stream's CRCs matched.
        var ended: Bool
    }

    /// - Parameters:
    ///   - what: what is being decoded, for the messages of its errors.
    ///   - memory: reuses the tables of the streams before this one (one thread's decoder
    ///     after another); nil: libbz2 allocates and frees them with malloc.
    init(describing what: String, memory: BZip2Memory? = nil) throws(BZip2Error) {
        self.what = what
        self.memory = memory
        stream.initialize(to: bz_stream())
        if let memory {
            stream.pointee.opaque = Unmanaged.passUnretained(memory).toOpaque()
            stream.pointee.bzalloc = { opaque, items, size in
                guard let opaque, items >= 0, size >= 0 else { return nil }
                return Unmanaged<BZip2Memory>.fromOpaque(opaque).takeUnretainedValue().allocate(Int(items) * Int(size))
            }
            stream.pointee.bzfree = { opaque, pointer in
                guard let opaque, let pointer else { return }
                Unmanaged<BZip2Memory>.fromOpaque(opaque).takeUnretainedValue().free(pointer)
            }
        }
        let rc = glasses_BZ2_bzDecompressInit(stream, 0, 0)
        guard rc == BZ_OK else {
            stream.deinitialize(count: 1)
            stream.deallocate()
            throw BZip2Error(code: rc, "start decoding \(what)")
        }
    }

    deinit {
        _ = glasses_BZ2_bzDecompressEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Decodes from `input` into `output` until one of them is used up or the stream ends.
    /// libbz2 checks each block's CRC as the block's last byte leaves, and the stream's
    /// combined CRC at its end marker.
    func decompress(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(BZip2Error) -> Step {
        // libbz2 reads next_in through a char * that it never writes through.
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: CChar.self))
        stream.pointee.avail_in = UInt32(clamping: input.count)
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: CChar.self)
        stream.pointee.avail_out = UInt32(clamping: output.count)
        let inBefore = stream.pointee.avail_in
        let outBefore = stream.pointee.avail_out
        let rc = glasses_BZ2_bzDecompress(stream)
        guard rc == BZ_OK || rc == BZ_STREAM_END else { throw BZip2Error(code: rc, "decode \(what)") }
        return Step(consumed: Int(inBefore - stream.pointee.avail_in), produced: Int(outBefore - stream.pointee.avail_out),
                    ended: rc == BZ_STREAM_END)
    }

    /// A truncated stream's error, in libbz2's words.
    static func truncated(_ what: String) -> BZip2Error { BZip2Error(code: BZ_UNEXPECTED_EOF, what) }

    /// A damaged stream's error, in libbz2's words (a check made outside libbz2 failed).
    static func damaged(_ what: String) -> BZip2Error { BZip2Error(code: BZ_DATA_ERROR, what) }
}

@available(*, unavailable) extension BZip2Stream: Sendable {}

/// libbz2's tables kept from one stream to the next (bz_stream's bzalloc and bzfree): a
/// decoder of level 9 allocates 3.6 MB for each block it decodes, and a worker decodes
/// one block after another. Reused, the memory is faulted in once instead of for every
/// block, and no multi-megabyte block is freed over and over: glibc's malloc raises its
/// mmap threshold past the size of each mmapped block freed, after which the other
/// buffers of a download (the megabyte ones of the blocks, the transfer's) come from
/// heaps that keep their memory instead of being given back. One thread's: the streams
/// that use it run one after another.
final class BZip2Memory {
    private var kept: [Int: [UnsafeMutableRawPointer]] = [:]
    private var sizes: [UnsafeMutableRawPointer: Int] = [:]

    init() {}

    deinit {
        for (_, pointers) in kept { for pointer in pointers { pointer.deallocate() } }
        for (pointer, _) in sizes { pointer.deallocate() }
    }

    fileprivate func allocate(_ bytes: Int) -> UnsafeMutableRawPointer? {
        let pointer = kept[bytes]?.popLast() ?? UnsafeMutableRawPointer.allocate(byteCount: max(bytes, 1), alignment: 16)
        sizes[pointer] = bytes
        return pointer
    }

    fileprivate func free(_ pointer: UnsafeMutableRawPointer) {
        guard let bytes = sizes.removeValue(forKey: pointer) else { return }
        kept[bytes, default: []].append(pointer)
    }
}

@available(*, unavailable) extension BZip2Memory: Sendable {}
