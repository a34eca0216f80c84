/// Compressed bytes for the bzip2 decoder, read in order from the first: a finished file
/// (`FileInput`) or an archive still downloading (`ArchiveFeed`). One thread reads at a
/// time.
protocol CompressedInput: AnyObject, Sendable {
    /// Reads the next bytes into `buffer`, waiting for them if they are still coming;
    /// 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(UnpackError) -> Int
    /// Starts again from the first byte (the sequential decoder after the parallel one).
    func rewind()
    /// Wakes a `read` waiting for bytes, which then throws `.cancelled`, as does every
    /// `read` until `rewind`.
    func interrupt()
}

/// A finished archive file, read from its start.
final class FileInput: CompressedInput, @unchecked Sendable {
    // @unchecked: one thread reads at a time, the splitter's and then (once it has been
    // joined under BZip2Blocks' lock) the extractor's.
    private let file: FileDescriptor
    private var offset: Int64 = 0

    init(path: String) throws(UnpackError) {
        do { file = try FileDescriptor.open(path, .readOnly) } catch { throw .system(error) }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(UnpackError) -> Int {
        do {
            let n = try file.read(into: buffer, at: offset)
            offset += Int64(n)
            return n
        } catch {
            throw .system(error)
        }
    }

    func rewind() { offset = 0 }
    func interrupt() {}
}

/// Cuts bzip2 input into blocks at their magics, for `BZip2Blocks`' workers: each block
/// re-wrapped as a stream of its own (`BZip2Format.wrap`), its stored CRC, and with a
/// stream's last block the stream's combined CRC. It only finds where things are; libbz2
/// checks them.
final class BlockSplitter {
    /// A block cut out of the input.
    struct Cut: Sendable {
        /// The block as a bzip2 stream of its own.
        var wrapped: ByteBuffer
        var crc: UInt32
        /// The stream's combined CRC, when the block is its stream's last.
        var endCRC: UInt32?
        /// Where the block starts in the input, for messages.
        var offset: Int64
    }

    /// Why the cutting stopped early.
    enum Stop: Error {
        /// The input is not what the splitter can cut (damage, truncation, a false magic
        /// that made a "block" too long): the sequential decoder decides.
        case unexplained
        /// The input could not be read.
        case input(UnpackError)
        /// The decoder is closing.
        case closed
    }

    /// Input is read this much at a time, straight into the window.
    static let readStep = 256 << 10

    private let input: CompressedInput
    /// Gives the buffer a block is re-wrapped into (the decoder's pool).
    private let buffer: (Int) -> ByteBuffer
    /// The input not yet cut: `window.bytes[0]` is input byte `base`. It holds the longest
    /// block the splitter accepts and a read more, and never grows: what is cut is moved out.
    private let window = ByteBuffer(capacity: BZip2Format.maxBlockBytes + 2 * BlockSplitter.readStep)
    private var base: Int64 = 0
    private var inputEnded = false

    init(input: CompressedInput, buffer: @escaping (Int) -> ByteBuffer = { ByteBuffer(capacity: $0) }) {
        self.input = input
        self.buffer = buffer
    }

    /// Cuts every stream of the input into blocks, handing each to `emit` in order.
    /// Trailing data after a stream that opens no other stream is ignored.
    /// - Parameter room: called before each block is copied out of the input; it returns
    ///   once the block may take memory (the decoder's back-pressure), or throws to stop.
    func run(room: () throws(Stop) -> Void = {}, _ emit: (Cut) throws(Stop) -> Void) throws(Stop) {
        var start = 0   // where the next stream's header is expected, in window bytes
        var streams = 0
        while true {
            try fill(to: start + 10)
            if streams > 0 {
                let opens = window.count - start >= 10
                    && BZip2Format.opensStream(UnsafeRawBufferPointer(rebasing: window.bytes[start..<(start + 10)]))
                if !opens { return }
            }
            guard window.count - start >= 10,
                  let level = BZip2Format.level(ofHeader: UnsafeRawBufferPointer(rebasing: window.bytes[start...])) else {
                throw .unexplained
            }
            var position = (start + 4) * 8
            var magic = bits(at: position, count: 48)
            let empty = magic == BZip2Format.endMagic
            while magic == BZip2Format.blockMagic {
                let (cut, next, isEnd) = try cutBlock(at: position, level: level, room: room)
                try emit(cut)
                // Drop what no later block needs.
                let drop = next >> 3
                if drop < window.count, let target = window.memory.baseAddress {
                    target.copyMemory(from: target + drop, byteCount: window.count - drop)
                }
                window.count -= drop
                base += Int64(drop)
                position = next - drop * 8
                magic = isEnd ? BZip2Format.endMagic : BZip2Format.blockMagic
            }
            guard magic == BZip2Format.endMagic else { throw .unexplained }
            try fill(to: (position + 80 + 7) >> 3)
            guard window.count * 8 >= position + 80 else { throw .unexplained }
            // A stream without blocks has a combined CRC of zero; the reader checks the others.
            if empty && bits(at: position + 48, count: 32) != 0 { throw .unexplained }
            start = (position + 80 + 7) >> 3
            streams += 1
        }
    }

    /// The block at bit `position`, up to the next magic; where that magic starts and
    /// whether it is the stream's end marker. The block is found in the window first, then
    /// copied out once `room` allows.
    private func cutBlock(at position: Int, level: UInt8, room: () throws(Stop) -> Void) throws(Stop) -> (Cut, next: Int, isEnd: Bool) {
        try fill(to: (position + 80 + 7) >> 3)
        guard window.count * 8 >= position + 80 else { throw .unexplained }
        let crc = UInt32(bits(at: position + 48, count: 32))
        var resume = 0
        var found: (position: Int, isEnd: Bool)?
        while true {
            found = BZip2Format.findMagic(in: window.bytes, from: position + 80, resume: &resume)
            if found != nil { break }
            if window.count - (position >> 3) > BZip2Format.maxBlockBytes || inputEnded { throw .unexplained }
            try readMore()
        }
        guard let (next, isEnd) = found, next - position <= BZip2Format.maxBlockBytes * 8 else { throw .unexplained }
        var endCRC: UInt32?
        if isEnd {
            try fill(to: (next + 80 + 7) >> 3)
            guard window.count * 8 >= next + 80 else { throw .unexplained }
            endCRC = UInt32(bits(at: next + 48, count: 32))
        }
        try room()
        let first = position >> 3
        let wrapped = BZip2Format.wrap(UnsafeRawBufferPointer(rebasing: window.bytes[first..<((next + 7) >> 3)]),
                                       startBit: position & 7, bitCount: next - position, level: level, crc: crc, buffer: buffer)
        let cut = Cut(wrapped: wrapped, crc: crc, endCRC: endCRC, offset: base + Int64(first))
        return (cut, next, isEnd)
    }

    /// Reads until the window holds `count` bytes or the input ends.
    private func fill(to count: Int) throws(Stop) {
        while window.count < count && !inputEnded { try readMore() }
    }

    private func readMore() throws(Stop) {
        let room = min(Self.readStep, window.capacity - window.count)
        // Full: a block longer than any block can be (the cut checks its length before
        // reading more), or a stream's tail the splitter cannot explain.
        guard room > 0 else { throw .unexplained }
        let n: Int
        do { n = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: window.memory[window.count..<(window.count + room)])) } catch {
            throw .input(error)
        }
        if n == 0 { inputEnded = true } else { window.count += n }
    }

    private func bits(at position: Int, count: Int) -> UInt64 {
        BZip2Format.bits(window.bytes, at: position, count: count)
    }
}

@available(*, unavailable) extension BlockSplitter: Sendable {}
