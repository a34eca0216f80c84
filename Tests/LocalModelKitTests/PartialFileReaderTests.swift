// The transfer drives a reader of the partial file (an archive unpacked as it arrives)
// directly: each write reaches it as it lands and a restart before any new byte, with no
// progress tick in between (ticks every hour here). Real libcurl against the fault server.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// What a reader heard, in order.
final class RecordingReader: PartialFileReader, @unchecked Sendable {
    // @unchecked: every field is read and written under `lock`.
    enum Heard: Equatable { case written(Int64), restarted }
    private let lock = NSLock()
    private var heard: [Heard] = []

    func written(upTo bytes: Int64) { lock.withLock { heard.append(.written(bytes)) } }
    func restarted(reason: String) { lock.withLock { heard.append(.restarted) } }
    var log: [Heard] { lock.withLock { heard } }
    var furthest: Int64 { lock.withLock { heard.reduce(0) { if case .written(let n) = $1 { max($0, n) } else { $0 } } } }
}

/// A session on a thread of its own, as a download runs it; its result when it ends.
final class SessionRun: @unchecked Sendable {
    // @unchecked: `result` is written once under `lock` and read under it.
    private let lock = NSLock()
    private var result: Result<TransferResult, TransferFault>?

    let cancellation = CancellationFlag()

    init(_ requests: [FileRequest], reader: RecordingReader, policy: TransferPolicy) {
        Threads.start(name: "test-session") { [self] in
            let session = TransferSession(policy: policy, cancellation: cancellation, allowPlainHTTPRedirects: true,
                                          tickInterval: 3600, onEvent: { _ in }, onTick: { _ in })
            let answer = Result { () throws(TransferFault) in try session.run(requests, readers: [0: reader]) }
            lock.withLock { result = answer }
        }
    }

    var finished: Result<TransferResult, TransferFault>? { lock.withLock { result } }
}

@Suite("A reader of the partial file, driven by the transfer", .ownThreads, .networkGuard)
struct PartialFileReaderTests {
    static let size = 600_000

    func request(_ world: TransferWorld, _ file: ServedFile, etag: String? = nil) -> FileRequest {
        FileRequest(name: file.path, url: world.server.origin + world.serverPath("r", file.path),
                    partialPath: world.partialFile("r", file.path), boundary: world.root, size: Int64(file.size),
                    sha256: file.sha256, etag: etag)
    }

    @Test("the server holds back the rest: the reader already has the bytes written (one staging buffer), no tick having run; an interruption writes the rest received and says so")
    func writesReachTheReaderAsTheyLand() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("a.bin", size: Self.size, seed: 31)
            // More than one staging buffer, less than two: one write while the server holds.
            let held = HashWorker.bufferSize + 137_856
            try world.serve("r", file, ["hold": held, "hold_times": 99])
            let reader = RecordingReader()
            let run = SessionRun([request(world, file)], reader: reader, policy: transferTestPolicy(stallTimeout: 60))
            #expect(await transferEventually(20) { reader.furthest == Int64(HashWorker.bufferSize) },
                    "the first buffer's bytes reached the reader as they were written (heard: \(reader.furthest))")
            #expect(run.finished == nil, "the transfer still waits for the held bytes")
            run.cancellation.cancel()
            #expect(await transferEventually(20) { run.finished != nil }, "the transfer ended once cancelled")
            let result = try #require(try run.finished?.get())
            #expect(result.outcomes[0] == .failed(.cancelled))
            #expect(result.bytesOnDisk == Int64(held), "every byte received is kept on disk, and the result says how many")
            #expect(FileIO.regularFileSize(world.partialFile("r", file.path)) == Int64(held))
            #expect(reader.furthest == Int64(held), "the reader heard of the last write too")
            let offsets = reader.log.compactMap { if case .written(let n) = $0 { n } else { nil } }
            #expect(!reader.log.contains(.restarted) && offsets == offsets.sorted(), "offsets only grow: \(offsets)")
        }
    }

    @Test("a partial the server will not continue (the whole file answered to a range): the reader hears of the restart before any new byte")
    func restartReachesTheReaderFirst() async throws {
        try await withTransferWorld { world in
            let file = try ServedFile("b.bin", size: Self.size, seed: 32)
            let kept = 300_000
            try world.writePartial("r", file.path, Array(file.bytes[0..<kept]))
            try world.serve("r", file, ["ignore_range": true])
            let reader = RecordingReader()
            let run = SessionRun([request(world, file, etag: file.etag)], reader: reader, policy: transferTestPolicy())
            #expect(await transferEventually(60) { run.finished != nil }, "the transfer ended")
            let result = try #require(try run.finished?.get())
            #expect(result.bytesOnDisk == Int64(Self.size))
            let log = reader.log
            // The resume base first, then the restart, then the new bytes from zero.
            try #require(log.first == .written(Int64(kept)), "the kept bytes were offered first: \(log.prefix(3))")
            let restart = try #require(log.firstIndex(of: .restarted), "the reader heard of the restart")
            let after = log[(restart + 1)...].compactMap { if case .written(let n) = $0 { n } else { nil } }
            #expect(log[1..<restart].allSatisfy { $0 == .written(Int64(kept)) }, "nothing new before the restart: \(log[1..<restart])")
            #expect(after.first.map { $0 < Int64(kept) } == true && after.last == Int64(Self.size),
                    "after the restart the offsets start again below the kept bytes and reach the whole file: \(after.prefix(3))…")
        }
    }
}
