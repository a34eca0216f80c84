/// An archive's bytes as they arrive: the extractor reads the partial archive up to what
/// the transfer has written and waits for more, so unpacking runs beside the download
/// (an archive install takes about max(download, extraction), not their sum). A resumed
/// download's kept bytes come first, then the network's.
///
/// The transfer thread moves it forward (`advance`), ends it (`finish`), or gives it up
/// (`abandon`: a restart from zero, a failure, a cancel); the extractor thread reads.
final class ArchiveFeed: CompressedInput, @unchecked Sendable {
    // @unchecked: every field is read and written under `lock`, except `file` and `offset`,
    // which only the reading thread touches (the extractor's, or the bzip2 splitter's
    // until the extractor has joined it).
    enum End: Equatable {
        /// Everything is on disk: read to the end of the file.
        case complete
        /// The bytes being read are no longer the download's (it restarted, failed or was
        /// cancelled): the extraction stops.
        case abandoned(String)
    }

    let path: String
    private let lock = Threads.Lock()
    private var available: Int64 = 0
    private var end: End?
    private var interrupted = false
    private var file: FileDescriptor?
    private var offset: Int64 = 0

    init(path: String) {
        self.path = path
    }

    // MARK: The transfer's side

    /// `bytes` of the archive are on disk. Fewer than before means the file was restarted:
    /// what was read is no longer this download's.
    func advance(to bytes: Int64) {
        lock.withLock {
            guard end == nil else { return }
            if bytes < available {
                end = .abandoned("the download restarted from zero")
            } else {
                available = bytes
            }
            lock.broadcast()
        }
    }

    func finish(at bytes: Int64) {
        lock.withLock {
            if end == nil {
                available = max(available, bytes)
                end = .complete
            }
            lock.broadcast()
        }
    }

    func abandon(_ reason: String) {
        lock.withLock {
            if end == nil || end == .complete { end = .abandoned(reason) }
            lock.broadcast()
        }
    }

    var abandonment: String? {
        lock.withLock {
            if case .abandoned(let reason)? = end { return reason }
            return nil
        }
    }

    // MARK: The extractor's side

    /// Reads the next bytes into `buffer`, waiting until some are on disk. Returns 0 at
    /// the end of a complete archive; throws when the feed was abandoned.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(UnpackError) -> Int {
        let limit: Int64
        do {
            limit = try lock.withLock { () throws(UnpackError) -> Int64 in
                while offset >= available && end == nil && !interrupted { lock.wait() }
                if interrupted { throw UnpackError.cancelled }
                if case .abandoned(let reason)? = end { throw UnpackError.abandoned(reason) }
                return available
            }
        }
        if offset >= limit { return 0 }
        if file == nil {
            do { file = try FileDescriptor.open(path, .readOnly) } catch { throw .system(error) }
        }
        guard let file else { return 0 }
        let want = Int(min(Int64(buffer.count), limit - offset))
        do {
            let n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
            offset += Int64(n)
            return n
        } catch {
            throw .system(error)
        }
    }

    /// Reads from the first byte again (the bzip2 decoder's sequential fallback).
    func rewind() {
        lock.withLock { interrupted = false }
        offset = 0
    }

    /// Wakes a `read` waiting for bytes: the reader is being stopped (the bzip2 decoder's
    /// `close`). Reads throw `.cancelled` until `rewind`.
    func interrupt() {
        lock.withLock {
            interrupted = true
            lock.broadcast()
        }
    }
}
