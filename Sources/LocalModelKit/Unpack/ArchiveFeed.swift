/// An archive's bytes as they arrive: the extractor reads the partial archive up to what
/// the transfer has written and waits for more, so unpacking runs beside the download
/// (an archive install takes about max(download, extraction), not their sum). A resumed
/// download's kept bytes come first, then the network's.
///
/// The transfer thread moves it forward (`advance`), ends it (`finish`), or gives it up
/// (`abandon`: a restart from zero, a failure, a cancel); the extractor thread reads.
///
/// The transfer waits in `advance` while `lead` bytes are on disk that the extractor has
/// not read yet: back-pressure from the unpacking to the network receive. A network faster
/// than the decoding then runs at the decoding's pace (the install takes as long either way:
/// the decoding is the longer), and the transfer's buffers stay empty instead of filling up
/// to their bound. Its waits end once the reader stops for good (`release`: the extraction
/// ended, or the decoder was stopped or went back to the first byte to decode again), so a
/// download never waits on an extraction that will not read on.
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

    /// Unread bytes on disk past which the transfer waits for the extractor.
    static let defaultLead: Int64 = 1 << 20

    let path: String
    private let lead: Int64
    private let lock = Threads.Lock()
    private var available: Int64 = 0
    private var end: End?
    private var interrupted = false
    /// The furthest byte read so far (under `lock`; `offset` moves back on a rewind).
    private var readUpTo: Int64 = 0
    /// The reader no longer paces the transfer.
    private var released = false
    /// The most bytes on disk ahead of the reader when the transfer moved on, and whether it
    /// is waiting now (for tests).
    private var peakLead: Int64 = 0
    private var writerWaiting = false
    private var file: FileDescriptor?
    private var offset: Int64 = 0

    /// - Parameter lead: unread bytes on disk past which the transfer waits (nil: it never
    ///   waits).
    init(path: String, lead: Int64? = ArchiveFeed.defaultLead) {
        self.path = path
        self.lead = lead ?? .max
    }

    // MARK: The transfer's side

    /// `bytes` of the archive are on disk. Fewer than before means the file was restarted:
    /// what was read is no longer this download's. Returns once the reader is less than
    /// `lead` bytes behind (or no longer reads).
    func advance(to bytes: Int64) {
        lock.withLock {
            guard end == nil else { return }
            if bytes < available {
                end = .abandoned("the download restarted from zero")
            } else {
                available = bytes
            }
            lock.broadcast()
            while end == nil && !released && available - readUpTo > lead {
                writerWaiting = true
                lock.wait()
            }
            writerWaiting = false
            peakLead = max(peakLead, available - readUpTo)
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

    /// What the pacing did (for tests): the most unread bytes on disk when the transfer
    /// moved on, whether the transfer is waiting for the reader now, and how far it read.
    var pacing: (peakLead: Int64, writerWaiting: Bool, readUpTo: Int64) {
        lock.withLock { (peakLead, writerWaiting, readUpTo) }
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
        let n: Int
        do {
            n = try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<want]), at: offset)
        } catch {
            throw .system(error)
        }
        offset += Int64(n)
        let read = offset
        lock.withLock {
            if read > readUpTo {
                readUpTo = read
                lock.broadcast()
            }
        }
        return n
    }

    /// Reads from the first byte again (the bzip2 decoder's sequential fallback).
    func rewind() {
        lock.withLock { interrupted = false }
        offset = 0
    }

    /// Wakes a `read` waiting for bytes: the reader is being stopped (the bzip2 decoder's
    /// `close`). Reads throw `.cancelled` until `rewind`. The transfer is no longer paced:
    /// what follows is the end of the extraction or a decode from the first byte again,
    /// which would hold the download for as long as it takes to catch up.
    func interrupt() {
        lock.withLock {
            interrupted = true
            released = true
            lock.broadcast()
        }
    }

    /// The extraction ended (or will not read on): the transfer no longer waits for it.
    func release() {
        lock.withLock {
            released = true
            lock.broadcast()
        }
    }
}
