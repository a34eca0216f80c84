import FoundationEssentials

/// Decodes bzip2 on several cores, as lbzip2 does, and hands the output out in order.
///
/// One thread (the splitter) reads the input and cuts it into blocks at their magics; up
/// to `workers` threads decode one block each through libbz2, the block re-wrapped as a
/// stream of its own (`BZip2Format.wrap`), so libbz2 checks every block's CRC; the
/// caller of `next()` (the extractor) gets each block's output in order and checks each
/// stream's combined CRC. No byte is handed out before its block's CRC matched, on either
/// path: a block's output is kept until its last byte is checked.
///
/// Memory is bounded by what the reader (the extractor, which writes the files) takes:
/// at most `workers + 1` blocks are in flight, the one being read and one for each worker
/// (the splitter cuts the next only when the reader has finished one), and a block keeps
/// at most 8 MiB of output; a bigger one (runs: a block can decode to 45 MB) is only
/// checked by its worker, then decoded again, streaming, when the reader gets to it. The
/// blocks' buffers (compressed and decoded) come from a pool and go back to it, so the
/// same memory serves every block instead of a megabyte allocated and freed on each
/// thread for each block (which the allocator keeps, not the process). A slow reader
/// therefore holds the decoder, the splitter, and with them the reading of the input (an
/// archive still downloading is read from its file, never buffered here).
///
/// Anything the splitter's view of the input cannot explain (a block that fails to decode,
/// a "block" longer than any block can be, a combined CRC that does not match, no end
/// marker) sends the rest to `SequentialBZip2`: the whole input again through one libbz2
/// decoder, skipping what was already handed out, each block's output held until libbz2
/// has checked its CRC. So a 48-bit magic that happens to occur inside compressed data
/// costs time, never correctness, and a damaged stream fails with libbz2's own verdict
/// (`UnpackError.unreadable`).
///
/// ```swift
/// let decoder = BZip2Blocks(input: try FileInput(path: path))
/// defer { decoder.close() }
/// while case let bytes = try decoder.next(), !bytes.isEmpty { consume(bytes) }
/// ```
final class BZip2Blocks: @unchecked Sendable {
    // @unchecked: the fields under "shared" are touched only holding `lock`; `input` by one
    // thread at a time (the splitter until `close` has joined it, then `next`'s caller);
    // the fields under "reader" only by `next`'s caller.

    /// Decoding threads: the cores this process may use, at most 4 (past that the
    /// extractor's writing and hashing, on one thread, is the limit).
    static var defaultWorkers: Int { min(4, max(1, ProcessInfo.processInfo.activeProcessorCount)) }

    /// Output is handed out in chunks of this size, decoded in steps of `step` bytes
    /// (between steps a worker notices `close`).
    static let chunkBytes = 1 << 20
    static let step = 256 << 10
    /// The most output a block keeps for the reader; past it the block is decoded again
    /// when the reader gets to it.
    static let keptCap = 8 << 20
    /// Output chunks kept in the pool for reuse, at most (beyond it they are freed on return).
    static let pooledChunks = 8
    /// A compressed block's buffer is a multiple of this, so that one buffer fits most
    /// blocks of a stream.
    static let blockBufferStep = 256 << 10

    /// A block for a worker.
    private struct Job {
        var index: Int
        var block: BlockSplitter.Cut
    }

    /// What the reader finds for a block.
    private struct Slot {
        var crc: UInt32
        /// The stream's combined CRC when this block is the stream's last.
        var endCRC: UInt32?
        /// The checked output (empty when the block was too big to keep).
        var chunks: [ByteBuffer] = []
        var done = false
        var failure: BZip2Error?
        /// The block as a stream of its own, kept when its output was not: checked, to be
        /// decoded again by the reader.
        var replay: (wrapped: ByteBuffer, what: String)?
    }

    private enum SplitEnd {
        /// Every stream was cut into blocks.
        case complete
        /// The input is not what the splitter can cut: the sequential decoder decides.
        case unexplained
        /// The input could not be read (the download was abandoned, a read failed).
        case failed(UnpackError)
    }

    private let input: CompressedInput
    private let lock = Threads.Lock()
    /// The bytes of the blocks' buffers, compressed and decoded, in use or pooled.
    private let ledger = BufferLedger()

    // Shared, under `lock`.
    private var workers = 0
    private var pending: [Job] = []
    private var slots: [Int: Slot] = [:]
    private var cut = 0
    private var head = 0
    private var splitEnd: SplitEnd?
    private var closing = false
    private var running = 0
    /// Blocks in flight at most: `cut - head` (the one being read included).
    private var inFlightLimit = 1
    private var peakInFlight = 0
    /// Blocks whose decoding ended (in any order).
    private var decoded = 0
    private var waitingForRoom = false
    /// Reusable output chunks, and compressed blocks' buffers.
    private var chunkPool: [ByteBuffer] = []
    private var blockPool: [ByteBuffer] = []

    // Reader.
    private var current: ByteBuffer?
    /// The head block being decoded again here (its output was too big to keep).
    private var replay: BlockReplay?
    private var replayed = 0
    private var delivered: Int64 = 0
    private var combined: UInt32 = 0
    private var sequential: SequentialBZip2?
    private var finished = false

    /// Starts the splitter and the workers; `close()` must follow.
    /// - Parameter blocksInFlight: blocks cut ahead of the reader at most, the one it reads
    ///   included; by default one for each worker that started, and one for the reader.
    init(input: CompressedInput, workers: Int = BZip2Blocks.defaultWorkers, blocksInFlight: Int? = nil) {
        self.input = input
        var started = 0
        for i in 0..<max(1, workers) {
            if spawn("gl-bz2-\(i)", { $0.work() }) { started += 1 }
        }
        lock.withLock {
            self.workers = started
            inFlightLimit = max(1, blocksInFlight ?? started + 1)
            lock.broadcast()
        }
        if started == 0 || !spawn("gl-bz2-split", { $0.split() }) {
            // No threads to be had: one decoder on the caller's thread.
            close()
            input.rewind()
            sequential = SequentialBZip2(input: input, skip: 0)
        }
    }

    private func spawn(_ name: String, _ body: @escaping @Sendable (BZip2Blocks) -> Void) -> Bool {
        lock.withLock { running += 1 }
        let started = Threads.tryStart(name: name) { [self] in
            body(self)
            lock.withLock {
                running -= 1
                lock.broadcast()
            }
        }
        if !started { lock.withLock { running -= 1 } }
        return started
    }

    /// Stops the threads and waits for them to end (at most one decoding step each).
    /// Call it once the output is no longer wanted, whether or not it was all read.
    func close() {
        lock.withLock {
            closing = true
            lock.broadcast()
        }
        input.interrupt()
        lock.withLock {
            while running > 0 { lock.wait() }
            pending.removeAll()
            slots.removeAll()
            chunkPool.removeAll()
            blockPool.removeAll()
        }
    }

    /// What happened so far, for tests.
    struct Statistics: CustomStringConvertible {
        /// The threads that decode.
        var workers: Int
        /// The blocks cut.
        var blocks: Int
        /// The blocks decoded again by the reader (too big to keep).
        var replayed: Int
        /// Whether the rest went to one sequential decoder.
        var fellBack: Bool
        /// The most blocks in flight at once (cut and not yet read, the one being read
        /// included), and their bound.
        var peakInFlight: Int
        var inFlightLimit: Int
        /// The most bytes the blocks' buffers held at once: compressed and decoded, in use
        /// or pooled (a replayed block's streaming buffer aside).
        var peakBufferBytes: Int
        /// The splitter is waiting for the reader to finish a block (the bound is reached,
        /// not only every worker busy), or has cut the whole input.
        var splitterHeld: Bool

        var description: String {
            "\(workers) workers, \(blocks) blocks, \(replayed) replayed, fell back: \(fellBack), at most \(peakInFlight) in flight "
                + "(bound \(inFlightLimit)), at most \(peakBufferBytes) bytes of buffers"
        }
    }

    var statistics: Statistics {
        let (workers, blocks, peak, limit, held) = lock.withLock {
            (self.workers, cut, peakInFlight, inFlightLimit, waitingForRoom || splitEnd != nil)
        }
        return Statistics(workers: workers, blocks: blocks, replayed: replayed, fellBack: sequential != nil, peakInFlight: peak,
                          inFlightLimit: limit, peakBufferBytes: ledger.peak, splitterHeld: held)
    }

    // MARK: The pools

    /// An output chunk, from the pool when one is free. Under `lock`.
    private func takeChunk() -> ByteBuffer {
        if let chunk = chunkPool.popLast() {
            chunk.count = 0
            return chunk
        }
        return ByteBuffer(capacity: Self.chunkBytes, ledger: ledger)
    }

    /// A buffer for a compressed block of `capacity` bytes, from the pool when one is big
    /// enough (sizes rounded up to 256 KiB, so that one buffer fits most blocks of a stream).
    private func takeBlockBuffer(_ capacity: Int) -> ByteBuffer {
        lock.withLock {
            if let i = blockPool.lastIndex(where: { $0.capacity >= capacity }) {
                let buffer = blockPool.remove(at: i)
                buffer.count = 0
                return buffer
            }
            let step = Self.blockBufferStep
            return ByteBuffer(capacity: (capacity + step - 1) / step * step, ledger: ledger)
        }
    }

    /// Buffers no longer used, back to their pools. Under `lock`.
    private func giveBack(chunks: [ByteBuffer] = [], block: ByteBuffer? = nil) {
        for chunk in chunks where chunkPool.count < Self.pooledChunks { chunkPool.append(chunk) }
        if let block, blockPool.count < workers + 1 { blockPool.append(block) }
    }

    // MARK: The reader

    /// The next decoded bytes, valid until the next call; empty at the end of the input.
    /// Every byte comes from a block whose CRC matched.
    /// - Throws: `UnpackError.unreadable` for damaged or truncated bzip2 data, the input's
    ///   own error (`.abandoned`, `.system`), `.system` when libbz2 cannot run.
    func next() throws(UnpackError) -> UnsafeRawBufferPointer {
        if let sequential { return try sequential.next() }
        // The bytes handed out last are no longer needed.
        if let chunk = current {
            current = nil
            lock.withLock { giveBack(chunks: [chunk]) }
        }
        if finished { return UnsafeRawBufferPointer(start: nil, count: 0) }
        while true {
            if let replay {
                let bytes: UnsafeRawBufferPointer?
                do { bytes = try replay.next() } catch {
                    guard error.isDataError else { throw .system(SystemError(message: error.message)) }
                    return try fallBack()
                }
                if let bytes {
                    delivered += Int64(bytes.count)
                    return bytes
                }
                self.replay = nil
            }
            lock.lock()
            while true {
                if let slot = slots[head], slot.done {
                    if let failure = slot.failure {
                        lock.unlock()
                        guard failure.isDataError else { throw .system(SystemError(message: failure.message)) }
                        return try fallBack()
                    }
                    if !slot.chunks.isEmpty {
                        let chunk = slots[head]?.chunks.removeFirst()
                        lock.unlock()
                        current = chunk
                        guard let chunk else { break }
                        delivered += Int64(chunk.count)
                        return chunk.bytes
                    }
                    if let block = slot.replay {
                        slots[head]?.replay = nil
                        lock.unlock()
                        replayed += 1
                        do { replay = try BlockReplay(block.wrapped, what: block.what) } catch {
                            guard error.isDataError else { throw .system(SystemError(message: error.message)) }
                            return try fallBack()
                        }
                        break
                    }
                    combined = BZip2Format.fold(combined, slot.crc)
                    if let endCRC = slot.endCRC {
                        guard endCRC == combined else {
                            lock.unlock()
                            return try fallBack()
                        }
                        combined = 0
                    }
                    slots[head] = nil
                    head += 1
                    lock.broadcast()
                    continue
                }
                if slots[head] == nil, head == cut, let end = splitEnd {
                    lock.unlock()
                    switch end {
                    case .complete:
                        finished = true
                        current = nil
                        return UnsafeRawBufferPointer(start: nil, count: 0)
                    case .unexplained: return try fallBack()
                    case .failed(let error): throw error
                    }
                }
                lock.wait()
            }
        }
    }

    /// The rest through one decoder: stop the threads, read the input again from its
    /// start, skip what was handed out.
    private func fallBack() throws(UnpackError) -> UnsafeRawBufferPointer {
        close()
        input.rewind()
        let decoder = SequentialBZip2(input: input, skip: delivered)
        sequential = decoder
        current = nil
        replay = nil
        return try decoder.next()
    }

    // MARK: The workers

    private func work() {
        let memory = BZip2Memory()
        while let job = takeJob() {
            decode(job, memory: memory)
        }
    }

    private func takeJob() -> Job? {
        lock.withLock {
            while pending.isEmpty && !closing && splitEnd == nil { lock.wait() }
            if closing || pending.isEmpty { return nil }
            return pending.removeFirst()
        }
    }

    private func decode(_ job: Job, memory: BZip2Memory) {
        let block = job.block
        let what = "bzip2 block \(job.index + 1) (compressed byte \(block.offset))"
        let wrapped = block.wrapped
        var chunks: [ByteBuffer] = []
        var kept = 0
        var tooBig = false
        var failure: BZip2Error?
        var spare: ByteBuffer?
        do throws(BZip2Error) {
            let stream = try BZip2Stream(describing: what, memory: memory)
            let input = wrapped.bytes
            var consumed = 0
            var chunk = lock.withLock { takeChunk() }
            while true {
                if lock.withLock({ closing }) { return }
                let room = min(Self.step, chunk.capacity - chunk.count)
                let step = try stream.decompress(UnsafeRawBufferPointer(rebasing: input[consumed...]),
                                                  into: UnsafeMutableRawBufferPointer(rebasing: chunk.memory[chunk.count..<(chunk.count + room)]))
                consumed += step.consumed
                chunk.count += step.produced
                if step.ended {
                    // libbz2 stops at the first end marker: one that came before the one
                    // added here means the cut was not at a block's end.
                    if consumed != input.count { throw BZip2Stream.damaged("\(what): the block ends before its next magic") }
                    break
                }
                if chunk.count == chunk.capacity {
                    if tooBig {
                        chunk.count = 0   // checked only: the reader decodes it again
                    } else {
                        chunks.append(chunk)
                        kept += chunk.count
                        chunk = lock.withLock { takeChunk() }
                        if kept >= Self.keptCap {
                            tooBig = true
                            lock.withLock { giveBack(chunks: chunks) }
                            chunks = []
                        }
                    }
                } else if step.consumed == 0 && step.produced == 0 {
                    throw BZip2Stream.truncated("\(what): the block ends before its next magic")
                }
            }
            if !tooBig && chunk.count > 0 { chunks.append(chunk) } else { spare = chunk }
        } catch {
            failure = error
        }
        lock.withLock {
            decoded += 1
            slots[job.index]?.done = true
            slots[job.index]?.failure = failure
            if failure == nil {
                slots[job.index]?.chunks = chunks
                if tooBig { slots[job.index]?.replay = (wrapped, what) }
            } else {
                giveBack(chunks: chunks)
            }
            giveBack(chunks: spare.map { [$0] } ?? [], block: failure == nil && tooBig ? nil : wrapped)
            lock.broadcast()
        }
    }

    // MARK: The splitter

    private func split() {
        let end: SplitEnd
        do {
            try BlockSplitter(input: input, buffer: { [self] in takeBlockBuffer($0) })
                .run(room: { () throws(BlockSplitter.Stop) in try waitForRoom() }) { cut throws(BlockSplitter.Stop) in try queue(cut) }
            end = .complete
        } catch {
            switch error {
            case .unexplained: end = .unexplained
            case .input(let failure): end = .failed(failure)
            case .closed: end = .failed(.cancelled)
            }
        }
        lock.withLock {
            splitEnd = end
            lock.broadcast()
        }
    }

    /// Waits while `inFlightLimit` blocks are cut and not yet read, or every worker has a
    /// block, before the next is copied out (and takes memory): the back-pressure from the
    /// reader to the splitter, and so to the reading of the input. (A block cut before a
    /// worker is free would only wait, holding its megabyte.)
    private func waitForRoom() throws(BlockSplitter.Stop) {
        try lock.withLock { () throws(BlockSplitter.Stop) in
            while !closing && (cut - head >= inFlightLimit || cut - decoded >= workers) {
                waitingForRoom = cut - head >= inFlightLimit
                lock.wait()
            }
            waitingForRoom = false
            if closing { throw .closed }
        }
    }

    /// Queues a block for the workers (`waitForRoom` made room for it).
    private func queue(_ block: BlockSplitter.Cut) throws(BlockSplitter.Stop) {
        try lock.withLock { () throws(BlockSplitter.Stop) in
            while !closing && cut - head >= inFlightLimit { lock.wait() }
            if closing { throw .closed }
            slots[cut] = Slot(crc: block.crc, endCRC: block.endCRC)
            pending.append(Job(index: cut, block: block))
            cut += 1
            peakInFlight = max(peakInFlight, cut - head)
            lock.broadcast()
        }
    }
}

/// A checked block decoded again on the reader's thread, its output streamed: for blocks
/// whose output was too big to keep.
private final class BlockReplay {
    private let wrapped: ByteBuffer
    private let what: String
    private let stream: BZip2Stream
    private let output = ByteBuffer(capacity: BZip2Blocks.chunkBytes)
    private var consumed = 0
    private var ended = false

    init(_ wrapped: ByteBuffer, what: String) throws(BZip2Error) {
        self.wrapped = wrapped
        self.what = what + ", decoded again"
        stream = try BZip2Stream(describing: self.what)
    }

    /// The next output, valid until the next call; nil once the block is done.
    func next() throws(BZip2Error) -> UnsafeRawBufferPointer? {
        while !ended {
            let step = try stream.decompress(UnsafeRawBufferPointer(rebasing: wrapped.bytes[consumed...]), into: output.memory)
            consumed += step.consumed
            ended = step.ended
            if step.produced > 0 { return UnsafeRawBufferPointer(rebasing: output.memory[0..<step.produced]) }
            if !ended && step.consumed == 0 { throw BZip2Stream.truncated("\(what): the block ends before its next magic") }
        }
        return nil
    }
}
