/// The whole input through one libbz2 decoder, stream after stream, as bunzip2 reads it:
/// what `BZip2Blocks` falls back to when its block-by-block view of the input fails. It
/// starts from the input's first byte and skips the `skip` output bytes already handed
/// out, so the reader sees one unbroken stream of bytes either way.
///
/// Like the block decoders, it hands out no byte of a block before libbz2 has checked
/// that block's CRC. libbz2 reads a block whole before it gives any of its output, checks
/// the CRC after the last byte, and needs more input only for the next block; so the
/// decoder alternates two kinds of call. A feed gives input and no room for output: libbz2
/// reads the next block (or the end marker) and stops when it would start giving output.
/// A drain gives room and no input: libbz2 gives the block's output, checks its CRC, and
/// stops at the next block's header, which it cannot read without input. A drain that
/// stops with room left has therefore seen the CRC match (a mismatch throws), and only
/// then is the block's output handed out. A block's output is held meanwhile: most are
/// under a megabyte, a block of runs up to about 46 MB (the format's limit).
final class SequentialBZip2 {
    private let input: CompressedInput
    private var skip: Int64
    private let inBuffer = ByteBuffer(capacity: 1 << 20)
    private var inStart = 0
    private var inputEnded = false
    /// Input bytes before `inBuffer[0]`, for messages.
    private var inputBase: Int64 = 0
    /// The checked output of the last block decoded, and the next of it to hand out.
    private var checked: [ByteBuffer] = []
    private var nextChecked = 0
    /// Chunks handed out before, for the next block's output.
    private var spare: [ByteBuffer] = []
    private var stream: BZip2Stream?
    private var streams = 0
    private var done = false

    init(input: CompressedInput, skip: Int64) {
        self.input = input
        self.skip = skip
    }

    /// The next decoded bytes, valid until the next call; empty at the end.
    func next() throws(UnpackError) -> UnsafeRawBufferPointer {
        while true {
            while nextChecked < checked.count {
                let chunk = checked[nextChecked]
                nextChecked += 1
                if skip >= Int64(chunk.count) {
                    skip -= Int64(chunk.count)
                    continue
                }
                let from = Int(skip)
                skip = 0
                return UnsafeRawBufferPointer(rebasing: chunk.bytes[from...])
            }
            // Everything handed out is no longer needed (the caller's bytes were valid until now).
            if !checked.isEmpty {
                spare += checked.prefix(2 - min(2, spare.count))
                checked = []
                nextChecked = 0
            }
            if done { return UnsafeRawBufferPointer(start: nil, count: 0) }
            try decodeBlock()
        }
    }

    /// Decodes the next block into `checked`, once its CRC matched; or ends a stream, or the
    /// input.
    private func decodeBlock() throws(UnpackError) {
        if stream == nil {
            try fill(atLeast: 10)
            let rest = UnsafeRawBufferPointer(rebasing: inBuffer.bytes[inStart...])
            // After a stream: another one, or the end (trailing data is ignored, as
            // bunzip2 and libarchive ignore it).
            if streams > 0 && !BZip2Format.opensStream(rest) {
                done = true
                return
            }
            do { stream = try BZip2Stream(describing: "bzip2 stream \(streams + 1)") } catch { throw Self.unpackError(error) }
        }
        guard let stream else { return }
        while true {
            // Drain: the rest of the block libbz2 has read, and its CRC.
            var output: [ByteBuffer] = []
            var ended = false
            while true {
                let chunk = spare.popLast() ?? ByteBuffer(capacity: BZip2Blocks.chunkBytes)
                let step = try decompress(stream, UnsafeRawBufferPointer(rebasing: inBuffer.bytes[inStart..<inStart]), into: chunk.memory)
                chunk.count = step.produced
                if step.produced > 0 { output.append(chunk) } else { spare.append(chunk) }
                ended = step.ended
                if ended || step.produced < chunk.capacity { break }
            }
            if ended {
                self.stream = nil
                streams += 1
            }
            if !output.isEmpty || ended {
                checked = output
                return
            }
            // Feed: libbz2 reads the next block, or the end marker. No room for output (it
            // writes nothing while avail_out is 0), so it stops where the output would begin.
            if inStart == inBuffer.count {
                try fill(atLeast: 1)
                if inStart == inBuffer.count {
                    throw .unreadable("the bzip2 data ends before its end-of-stream marker (truncated at compressed byte \(inputBase + Int64(inStart)))")
                }
            }
            let step = try decompress(stream, UnsafeRawBufferPointer(rebasing: inBuffer.bytes[inStart...]),
                                      into: UnsafeMutableRawBufferPointer(rebasing: inBuffer.memory[0..<0]))
            inStart += step.consumed
            if step.ended {
                self.stream = nil
                streams += 1
                return
            }
            // Reading a block, libbz2 takes input whenever it has some; with none taken and
            // no output to give it would only spin.
            if step.consumed == 0 {
                throw .unreadable("libbz2 took no input and gave no output at compressed byte \(inputBase + Int64(inStart))")
            }
        }
    }

    private func decompress(_ stream: BZip2Stream, _ input: UnsafeRawBufferPointer,
                            into output: UnsafeMutableRawBufferPointer) throws(UnpackError) -> BZip2Stream.Step {
        do {
            return try stream.decompress(input, into: output)
        } catch {
            throw Self.unpackError(error, at: inputBase + Int64(inStart))
        }
    }

    /// Moves the unread bytes to the front and reads until `count` are there or the input
    /// ends.
    private func fill(atLeast count: Int) throws(UnpackError) {
        let unread = inBuffer.count - inStart
        guard unread < count, !inputEnded else { return }
        if inStart > 0, let target = inBuffer.memory.baseAddress {
            if unread > 0 { target.copyMemory(from: target + inStart, byteCount: unread) }
            inputBase += Int64(inStart)
            inBuffer.count = unread
            inStart = 0
        }
        while inBuffer.count < count && inBuffer.count < inBuffer.capacity && !inputEnded {
            let n = try input.read(into: UnsafeMutableRawBufferPointer(rebasing: inBuffer.memory[inBuffer.count...]))
            if n == 0 { inputEnded = true }
            inBuffer.count += n
        }
    }

    /// libbz2's verdict as the extractor's error: damaged data is an unreadable archive,
    /// anything else (memory, a missing library) the machine's failure.
    static func unpackError(_ error: BZip2Error, at offset: Int64? = nil) -> UnpackError {
        guard error.isDataError else { return .system(SystemError(message: error.message)) }
        return .unreadable(offset.map { "\(error.message) (near compressed byte \($0))" } ?? error.message)
    }
}

@available(*, unavailable) extension SequentialBZip2: Sendable {}
