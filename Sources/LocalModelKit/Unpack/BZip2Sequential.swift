/// The whole input through one libbz2 decoder, stream after stream, as bunzip2 reads it:
/// what `BZip2Blocks` falls back to when its block-by-block view of the input fails. It
/// starts from the input's first byte and skips the `skip` output bytes already handed
/// out, so the reader sees one unbroken stream of bytes either way.
final class SequentialBZip2 {
    private let input: CompressedInput
    private var skip: Int64
    private let inBuffer = ByteBuffer(capacity: 1 << 20)
    private var inStart = 0
    private var inputEnded = false
    /// Input bytes before `inBuffer[0]`, for messages.
    private var inputBase: Int64 = 0
    private let outBuffer = ByteBuffer(capacity: BZip2Blocks.chunkBytes)
    private var stream: BZip2Stream?
    private var streams = 0
    private var done = false

    init(input: CompressedInput, skip: Int64) {
        self.input = input
        self.skip = skip
    }

    /// The next decoded bytes, valid until the next call; empty at the end.
    func next() throws(UnpackError) -> UnsafeRawBufferPointer {
        while !done {
            if stream == nil {
                try fill(atLeast: 10)
                let rest = UnsafeRawBufferPointer(rebasing: inBuffer.bytes[inStart...])
                // After a stream: another one, or the end (trailing data is ignored, as
                // bunzip2 and libarchive ignore it).
                if streams > 0 && !BZip2Format.opensStream(rest) {
                    done = true
                    break
                }
                do { stream = try BZip2Stream(describing: "bzip2 stream \(streams + 1)") } catch { throw Self.unpackError(error) }
            }
            guard let stream else { break }
            if inStart == inBuffer.count { try fill(atLeast: 1) }
            let step: BZip2Stream.Step
            do {
                step = try stream.decompress(UnsafeRawBufferPointer(rebasing: inBuffer.bytes[inStart...]), into: outBuffer.memory)
            } catch {
                throw Self.unpackError(error, at: inputBase + Int64(inStart))
            }
            inStart += step.consumed
            if step.ended {
                self.stream = nil
                streams += 1
            }
            if step.produced > 0 {
                if skip >= Int64(step.produced) {
                    skip -= Int64(step.produced)
                    continue
                }
                let from = Int(skip)
                skip = 0
                return UnsafeRawBufferPointer(rebasing: outBuffer.memory[from..<step.produced])
            }
            if !step.ended && step.consumed == 0 {
                if inputEnded {
                    throw .unreadable("the bzip2 data ends before its end-of-stream marker (truncated at compressed byte \(inputBase + Int64(inStart)))")
                }
                try fill(atLeast: inBuffer.count - inStart + 1)
            }
        }
        return UnsafeRawBufferPointer(start: nil, count: 0)
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
