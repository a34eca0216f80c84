/// Hashes on a second thread while the transfer thread receives and writes, so SHA-256
/// costs no wall time on a machine with two cores. The transfer hands over whole staging
/// buffers (`takeBuffer`, filled, written to the file, then `feed(_:buffer:count:)`): no
/// copy and no allocation per chunk, and the buffer comes back to the pool once hashed.
/// The queue is bounded (backpressure keeps memory flat whatever the file size); per
/// hasher, chunks are processed in order.
final class HashWorker: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`; a hasher handed over in an item is
    // touched only by the worker until `drain()` returns, then only by its job again.
    private struct Item {
        let hasher: SHA256Hasher
        /// A staging buffer; its first `count` bytes are hashed.
        let buffer: UnsafeMutableRawBufferPointer
        let count: Int
    }
    /// The size of a staging buffer: one `write` and one hand-off per this many bytes.
    static let bufferSize = 256 << 10
    /// Buffers kept for reuse (more are freed when they come back).
    private static let poolLimit = 32
    private var pool: [UnsafeMutableRawBufferPointer] = []
    private let condition = Threads.Lock()
    private var queue: [Item] = []
    private var head = 0
    private var queuedBytes = 0
    private var busy = false
    private var stopping = false
    private let limit: Int

    init(maxQueuedBytes: Int = 4 << 20) {
        limit = maxQueuedBytes
        Threads.start(name: "gl-sha256") { [self] in self.loop() }
    }

    deinit {
        for buffer in pool { buffer.deallocate() }
    }

    /// A staging buffer of `bufferSize` bytes, from the pool when one is free.
    func takeBuffer() -> UnsafeMutableRawBufferPointer {
        condition.lock()
        let buffer = pool.popLast()
        condition.unlock()
        return buffer ?? .allocate(byteCount: Self.bufferSize, alignment: 16)
    }

    /// A staging buffer that was not handed over (its job ended), back to the pool.
    func giveBack(_ buffer: UnsafeMutableRawBufferPointer) {
        condition.lock()
        let kept = pool.count < Self.poolLimit
        if kept { pool.append(buffer) }
        condition.unlock()
        if !kept { buffer.deallocate() }
    }

    /// Hands over a staging buffer from `takeBuffer`: its first `count` bytes are hashed,
    /// then it returns to the pool. The caller no longer touches it.
    func feed(_ hasher: SHA256Hasher, buffer: UnsafeMutableRawBufferPointer, count: Int) {
        guard count > 0 else { return giveBack(buffer) }
        condition.lock()
        while queuedBytes > limit && !stopping { condition.wait() }
        queue.append(Item(hasher: hasher, buffer: buffer, count: count))
        queuedBytes += count
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every chunk fed so far has been hashed.
    func drain() {
        condition.lock()
        while head < queue.count || busy { condition.wait() }
        condition.unlock()
    }

    /// Ends the thread after the queue is empty.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while head == queue.count && !stopping { condition.wait() }
            if head == queue.count && stopping {
                condition.unlock()
                return
            }
            let item = queue[head]
            head += 1
            if head > 1024 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            busy = true
            condition.unlock()

            item.hasher.update(UnsafeRawBufferPointer(rebasing: item.buffer[0..<item.count]))
            var free: UnsafeMutableRawBufferPointer? = item.buffer

            condition.lock()
            if pool.count < Self.poolLimit {
                pool.append(item.buffer)
                free = nil
            }
            busy = false
            queuedBytes -= item.count
            condition.broadcast()
            condition.unlock()
            free?.deallocate()
        }
    }
}
