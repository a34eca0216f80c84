/// The few facts of the bzip2 format the block splitter needs, in pure Swift (libbz2 does
/// the decoding: `BZip2.swift`).
///
/// A bzip2 stream is `BZh` + a level digit (`1`…`9`: blocks of at most 100k × level bytes),
/// then blocks, then an end-of-stream marker; a file may hold several streams back to back
/// (pbzip2, lbzip2). Nothing is byte-aligned after the header: each block starts with the
/// 48-bit magic 0x314159265359 and its 32-bit CRC at any bit offset, and the end marker is
/// the 48-bit 0x177245385090 followed by the stream's combined CRC (each block's CRC folded
/// in: `combined = (combined <<< 1) ^ block`), then zero bits to the next byte.
/// Blocks are independent, which is what lets them decode on several cores (as lbzip2
/// does): each one is cut out at its bit offsets and re-wrapped as a stream of its own.
enum BZip2Format {
    static let blockMagic: UInt64 = 0x3141_5926_5359
    static let endMagic: UInt64 = 0x1772_4538_5090

    /// The largest a block's compressed bits can be: 900,000 symbols of at most 20 bits,
    /// plus tables. A longer "block" means the input is not what the splitter thinks, and
    /// the sequential decoder decides.
    static let maxBlockBytes = 3 << 20

    /// The level of a stream header (`BZh1`…`BZh9`) at the start of `bytes`, else nil.
    static func level(ofHeader bytes: UnsafeRawBufferPointer) -> UInt8? {
        guard bytes.count >= 4, bytes[0] == 0x42, bytes[1] == 0x5A, bytes[2] == 0x68,
              (0x31...0x39).contains(bytes[3]) else { return nil }
        return bytes[3]
    }

    /// Whether `bytes` (at least 10 of them) open another stream after a finished one: a
    /// header, then a block or an end marker. Anything else after a stream is trailing
    /// data, ignored as bunzip2 and libarchive ignore it.
    static func opensStream(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 10, level(ofHeader: bytes) != nil else { return false }
        let magic = bits(bytes, at: 32, count: 48)
        return magic == blockMagic || magic == endMagic
    }

    /// `count` (at most 57) bits of `bytes` from bit `position` (most significant bit of
    /// each byte first). The caller guarantees the bytes are there.
    @inline(__always)
    static func bits(_ bytes: UnsafeRawBufferPointer, at position: Int, count: Int) -> UInt64 {
        let first = position >> 3
        let shift = position & 7
        let byteCount = (shift + count + 7) >> 3
        var value: UInt64 = 0
        for i in 0..<byteCount { value = value << 8 | UInt64(bytes[first + i]) }
        return (value >> UInt64(byteCount * 8 - shift - count)) & ((1 << UInt64(count)) - 1)
    }

    /// The CRC of a stream's blocks folded in order, as its end marker carries it.
    @inline(__always)
    static func fold(_ combined: UInt32, _ block: UInt32) -> UInt32 {
        ((combined << 1) | (combined >> 31)) ^ block
    }

    // MARK: Finding the magics

    /// For the byte right after a magic's first byte, and the one after that: which of the
    /// 16 (bit offset, magic) pairs it fits, bit `2 × offset + (0 for a block, 1 for the
    /// end marker)`, so that lower bits are earlier positions. Both bytes lie wholly inside
    /// a magic whatever its offset, so two table lookups a byte leave about one candidate
    /// in 4,000 to check in full.
    private static let tables: (first: [UInt16], second: [UInt16]) = {
        var first = [UInt16](repeating: 0, count: 256)
        var second = [UInt16](repeating: 0, count: 256)
        for (m, magic) in [blockMagic, endMagic].enumerated() {
            for shift in 0..<8 {
                let bit = UInt16(1) << UInt16(shift * 2 + m)
                first[Int((magic >> UInt64(32 + shift)) & 0xFF)] |= bit
                second[Int((magic >> UInt64(24 + shift)) & 0xFF)] |= bit
            }
        }
        return (first, second)
    }()

    /// Where the first block magic or end marker at or after bit `from` starts in `bytes`,
    /// and whether it is the end marker. Nil when none starts early enough to be whole in
    /// `bytes`; `resume` is then the byte from which a search over more bytes goes on
    /// (pass 0 the first time).
    static func findMagic(in bytes: UnsafeRawBufferPointer, from: Int, resume: inout Int) -> (position: Int, isEnd: Bool)? {
        let (first, second) = tables
        // Byte j is the second byte a magic touches: a magic at offset s of byte j - 1
        // ends in byte j + 5.
        var j = max(resume, (from >> 3) + 1)
        let limit = bytes.count - 5
        let found: (position: Int, isEnd: Bool)? = first.withUnsafeBufferPointer { first in
            second.withUnsafeBufferPointer { second in
                while j < limit {
                    let mask = first[Int(bytes[j])] & second[Int(bytes[j + 1])]
                    if mask != 0 {
                        for candidate in 0..<16 where mask & (1 << UInt16(candidate)) != 0 {
                            let position = (j - 1) * 8 + (candidate >> 1)
                            let isEnd = candidate & 1 == 1
                            if position >= from, bits(bytes, at: position, count: 48) == (isEnd ? endMagic : blockMagic) {
                                return (position, isEnd)
                            }
                        }
                    }
                    j += 1
                }
                return nil
            }
        }
        resume = j
        return found
    }

    // MARK: Re-wrapping a block

    /// A block cut out of its stream as a stream of its own: the header with the original
    /// level, the block's bits shifted to start on a byte, an end marker whose combined
    /// CRC is the block's own (one block folded into zero), zero bits to the byte. libbz2
    /// then checks the block's CRC against its output, as it would in the whole stream.
    /// - Parameters:
    ///   - bytes: the bytes holding the block, the first one holding its first bit.
    ///   - startBit: the block's first bit in `bytes[0]` (0 = most significant).
    ///   - bitCount: the block's length in bits, up to the next magic.
    ///   - buffer: gives a buffer of at least the capacity asked for (a pool's, to reuse memory).
    static func wrap(_ bytes: UnsafeRawBufferPointer, startBit: Int, bitCount: Int, level: UInt8, crc: UInt32,
                     buffer: (Int) -> ByteBuffer = { ByteBuffer(capacity: $0) }) -> ByteBuffer {
        let whole = bitCount >> 3
        let wrapped = buffer(4 + whole + 1 + 10 + 1)
        precondition(wrapped.capacity >= 4 + whole + 1 + 10 + 1, "a wrapped block's buffer is too small")
        let out = wrapped.memory
        out[0] = 0x42; out[1] = 0x5A; out[2] = 0x68; out[3] = level
        var n = 4
        if startBit == 0 {
            if whole > 0, let source = bytes.baseAddress, let target = out.baseAddress {
                (target + n).copyMemory(from: source, byteCount: whole)
            }
        } else {
            let left = UInt8(startBit), right = UInt8(8 - startBit)
            for k in 0..<whole { out[n + k] = bytes[k] << left | bytes[k + 1] >> right }
        }
        n += whole
        // The block's last bits, then the end marker and the CRC, through an accumulator.
        var acc: UInt64 = 0
        var accBits = 0
        func put(_ value: UInt64, _ width: Int) {
            for i in stride(from: width - 1, through: 0, by: -1) {
                acc = acc << 1 | (value >> UInt64(i)) & 1
                accBits += 1
                if accBits == 8 {
                    out[n] = UInt8(acc & 0xFF)
                    n += 1
                    acc = 0
                    accBits = 0
                }
            }
        }
        let tail = bitCount & 7
        if tail > 0 { put(bits(bytes, at: startBit + whole * 8, count: tail), tail) }
        put(endMagic, 48)
        put(UInt64(crc), 32)
        if accBits > 0 { put(0, 8 - accBits) }
        wrapped.count = n
        return wrapped
    }
}

/// Bytes in memory of their own, written by one thread and then handed to another under
/// a lock (a block's compressed bytes, a block's output), so that a pointer into them
/// stays valid while the holder keeps the object.
final class ByteBuffer: @unchecked Sendable {
    // @unchecked: filled by one thread, then only read once handed over through
    // BZip2Blocks' lock; never written by two threads.
    let memory: UnsafeMutableRawBufferPointer
    var count = 0
    /// Counts this buffer's bytes while it lives (the decoder's memory, for its statistics).
    private let ledger: BufferLedger?

    init(capacity: Int, ledger: BufferLedger? = nil) {
        memory = .allocate(byteCount: max(capacity, 1), alignment: 16)
        self.ledger = ledger
        ledger?.add(memory.count)
    }

    /// A copy of `bytes`.
    convenience init(copying bytes: UnsafeRawBufferPointer) {
        self.init(capacity: bytes.count)
        if let source = bytes.baseAddress, let target = memory.baseAddress {
            target.copyMemory(from: source, byteCount: bytes.count)
        }
        count = bytes.count
    }

    deinit {
        ledger?.add(-memory.count)
        memory.deallocate()
    }

    var capacity: Int { memory.count }
    /// The bytes written so far.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: memory[0..<count]) }
}

/// The bytes a set of buffers holds, now and at most so far: what `BZip2Blocks` keeps in
/// memory for the blocks in flight (their compressed bytes and their output), so a test
/// can check that a slow reader bounds it.
final class BufferLedger: Sendable {
    private let state = Locked<(now: Int, peak: Int)>((0, 0))

    func add(_ bytes: Int) {
        state.withLock {
            $0.now += bytes
            $0.peak = max($0.peak, $0.now)
        }
    }

    var now: Int { state.withLock { $0.now } }
    var peak: Int { state.withLock { $0.peak } }
}
