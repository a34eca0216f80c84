/// Hashes on a second thread while the transfer thread receives and writes, so SHA-256
/// costs no wall time on a machine with two cores. Chunks are copied into a bounded queue
/// (backpressure keeps memory flat whatever the file size); per hasher they are processed
/// in order.
final class HashWorker: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`; a hasher handed over in an item is
    // touched only by the worker until `drain()` returns, then only by its job again.
    private struct Item {
        let hasher: SHA256Hasher
        let bytes: UnsafeMutableRawBufferPointer
    }
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

    func feed(_ hasher: SHA256Hasher, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        copy.copyMemory(from: bytes)
        condition.lock()
        while queuedBytes > limit && !stopping { condition.wait() }
        queue.append(Item(hasher: hasher, bytes: copy))
        queuedBytes += bytes.count
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

            item.hasher.update(UnsafeRawBufferPointer(item.bytes))
            let count = item.bytes.count
            item.bytes.deallocate()

            condition.lock()
            busy = false
            queuedBytes -= count
            condition.broadcast()
            condition.unlock()
        }
    }
}
