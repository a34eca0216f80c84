// The bzip2 decoder of tar.bz2 installs (Unpack/BZip2*.swift): blocks cut at their magics
// and decoded on several threads give bunzip2's bytes; damage and truncation are typed
// errors; closing or cancelling stops its threads, also while it waits for bytes still
// downloading.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

/// Serialized: the thread checks count this process's `gl-bz2` threads, which only this
/// suite starts in process.
@Suite("bzip2 decoded block by block on several cores", .ownThreads, .serialized, .networkGuard)
struct BZip2Tests {
    // MARK: Fixtures

    /// Bytes that give blocks of every kind: random stretches, short runs (bzip2's first
    /// run-length stage), and a long run of zeros whose one block decodes to megabytes.
    static func mixedBytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
        var state = seed
        func next() -> UInt64 {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return state
        }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var longRun = count >= 2 << 20
        while out.count < count {
            let r = next()
            if longRun && out.count >= count / 2 {
                out += [UInt8](repeating: 0, count: 5 << 20)
                longRun = false
            }
            switch r % 4 {
            case 0: out += [UInt8](repeating: UInt8(truncatingIfNeeded: r >> 8), count: Int((r >> 16) % 3000))
            case 1: for _ in 0..<512 { out.append(UInt8(truncatingIfNeeded: next())) }
            default: for _ in 0..<512 { out.append(UInt8(truncatingIfNeeded: next() % 64) + 32) }
            }
        }
        return Array(out.prefix(count))
    }

    /// Compresses `bytes` with the bzip2 tool at `level` (blocks of level × 100 kB).
    static func compress(_ bytes: [UInt8], level: Int, in dir: String, name: String = "data") throws -> [UInt8] {
        let path = dir + "/" + name
        try StoreTestSupport.writeFile(path, bytes)
        let r = try ChildProcess.run("/bin/sh", ["-c", "bzip2 -\(level) -c \"$1\" > \"$1.bz2\"", "sh", path])
        try #require(r.status == 0, "\(r)")
        return try StoreTestSupport.readFile(path + ".bz2")
    }

    /// What bunzip2 makes of `compressed`, and whether it accepted it.
    static func bunzip2(_ compressed: [UInt8], in dir: String) throws -> (bytes: [UInt8], ok: Bool) {
        let path = dir + "/reference.bz2"
        try StoreTestSupport.writeFile(path, compressed)
        let r = try ChildProcess.run("/bin/sh", ["-c", "bzip2 -dc \"$1\" > \"$1.out\"", "sh", path])
        return (try StoreTestSupport.readFile(path + ".out"), r.status == 0)
    }

    /// Everything a decoder yields.
    static func decodeAll(_ decoder: BZip2Blocks) throws(UnpackError) -> [UInt8] {
        var out: [UInt8] = []
        while true {
            let bytes = try decoder.next()
            if bytes.isEmpty { return out }
            out += bytes
        }
    }

    /// What a decoder hands out until it ends or throws, and the error if it threw: the
    /// bytes the extractor would have written before the error.
    static func decodeUntilError(_ next: () throws(UnpackError) -> UnsafeRawBufferPointer) -> (bytes: [UInt8], error: UnpackError?) {
        var out: [UInt8] = []
        do {
            while true {
                let bytes = try next()
                if bytes.isEmpty { return (out, nil) }
                let at = out.count
                out += [UInt8](repeating: 0, count: bytes.count)
                out.withUnsafeMutableBytes { UnsafeMutableRawBufferPointer(rebasing: $0[at...]).copyMemory(from: bytes) }
            }
        } catch {
            return (out, error)
        }
    }

    /// Where `bytes` stop being the start of `data` (nil: they are its first bytes). A Bool
    /// to expect on: a failed == of megabytes has the test library print them.
    static func divergence(_ bytes: [UInt8], from data: [UInt8]) -> Int? {
        let n = min(bytes.count, data.count)
        let same = bytes.withUnsafeBytes { a in
            data.withUnsafeBytes { b in
                guard n > 0, let a = a.baseAddress, let b = b.baseAddress else { return true }
                return memcmp(a, b, n) == 0
            }
        }
        if !same { return (0..<n).first { bytes[$0] != data[$0] } }
        return bytes.count > data.count ? data.count : nil
    }

    /// Where each block's output starts in the decoded bytes of `compressed`, and where the
    /// output ends, found without the decoder under test: bzip2recover writes each block as
    /// a stream of its own, bunzip2 decodes each one.
    static func blockOutputStarts(_ compressed: [UInt8], in dir: String) throws -> [Int] {
        let folder = dir + "/recover"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try StoreTestSupport.writeFile(folder + "/in.bz2", compressed)
        let r = try ChildProcess.run("/bin/sh", ["-c", "cd \"$1\" && bzip2recover in.bz2 >/dev/null 2>&1 && for f in rec*in.bz2; do bzip2 -dc \"$f\" | wc -c; done", "sh", folder])
        try #require(r.status == 0, "\(r)")
        var starts = [0]
        for line in r.stdout.split(separator: "\n") {
            starts.append(try #require(starts.last) + (try #require(Int(line.trimmingCharacters(in: .whitespaces)), "\(r)")))
        }
        return starts
    }

    /// The block magics' bit positions in `bytes`, found the way the splitter finds them.
    static func blockStarts(_ bytes: [UInt8]) -> [Int] {
        var starts: [Int] = []
        var resume = 0
        var from = 32
        while let found = bytes.withUnsafeBytes({ BZip2Format.findMagic(in: $0, from: from, resume: &resume) }), !found.isEnd {
            starts.append(found.position)
            from = found.position + 48
            resume = 0
        }
        return starts
    }

    /// Flips the lowest bit of the block's BWT origin pointer (after the 48-bit magic, the
    /// 32-bit CRC and the randomised bit): the block still decodes, to other bytes, and
    /// only its CRC, checked after its last byte, says so.
    static func flipOrigin(_ bytes: inout [UInt8], blockAt start: Int) {
        let bit = start + 48 + 32 + 1 + 23
        bytes[bit >> 3] ^= UInt8(0x80) >> UInt8(bit & 7)
    }

    /// Whether this process's bzip2 threads are all gone. A thread that `close()` has
    /// joined may still be returning from its last call for a moment: polled, with a hang
    /// guard, not a time bound.
    static func decoderThreadsEnd() -> Bool {
        StoreTestSupport.waitUntil(seconds: 60) { decoderThreads().isEmpty }
    }

    /// This process's bzip2 threads (their names, from /proc).
    static func decoderThreads() -> [String] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            .filter { $0.hasPrefix("gl-bz2") }
    }

    // MARK: Decoding

    @Test("a multi-block bzip2 file decodes block by block on 1, 2 and 4 threads, read whole or a few bytes at a time, to bunzip2's bytes",
          arguments: [(1, 1 << 20), (2, 1 << 20), (4, 1 << 20), (2, 997)])
    func parallelEqualsBunzip2(workers: Int, readSize: Int) throws {
        try StoreTestSupport.withTempDir { dir in
            let compressed = try Self.compress(Self.mixedBytes(6 << 20), level: 1, in: dir)
            let reference = try Self.bunzip2(compressed, in: dir)
            try #require(reference.ok)
            let decoder = BZip2Blocks(input: ChunkedInput(compressed, readSize: readSize), workers: workers)
            defer { decoder.close() }
            let decoded = try Self.decodeAll(decoder)
            #expect(decoded.count == reference.bytes.count)
            #expect(decoded == reference.bytes, "the blocks' output, in order, is bunzip2's")
            let stats = decoder.statistics
            #expect(stats.workers == workers && stats.blocks > 10 && !stats.fellBack,
                    "cut into blocks for \(workers) decoding threads, none refused: \(stats)")
        }
    }

    @Test("a block of runs that decodes to 45 MB is checked by its worker, then decoded again as the reader reaches it: bunzip2's bytes")
    func bigBlockIsReplayed() throws {
        try StoreTestSupport.withTempDir { dir in
            // Level 9 blocks of zeros: 900 kB of 5-byte runs each, 45 MB out.
            let data = Self.mixedBytes(1 << 20, seed: 7) + [UInt8](repeating: 0, count: 100 << 20) + Self.mixedBytes(1 << 20, seed: 8)
            let compressed = try Self.compress(data, level: 9, in: dir)
            let reference = try Self.bunzip2(compressed, in: dir)
            try #require(reference.ok && reference.bytes == data)
            let decoder = BZip2Blocks(input: ChunkedInput(compressed, readSize: 1 << 20), workers: 2)
            defer { decoder.close() }
            #expect(try Self.decodeAll(decoder) == reference.bytes)
            let stats = decoder.statistics
            #expect(stats.replayed >= 2 && !stats.fellBack, "the 45 MB blocks were not kept but decoded again: \(stats)")
        }
    }

    @Test("streams back to back (pbzip2's layout), an empty stream among them, and trailing bytes decode to bunzip2's bytes")
    func concatenatedStreams() throws {
        try StoreTestSupport.withTempDir { dir in
            let a = try Self.compress(Self.mixedBytes(700 << 10, seed: 1), level: 2, in: dir, name: "a")
            let empty = try Self.compress([], level: 9, in: dir, name: "empty")
            let b = try Self.compress(Self.mixedBytes(300 << 10, seed: 2), level: 9, in: dir, name: "b")
            let joined = a + empty + b
            let reference = try Self.bunzip2(joined, in: dir)
            try #require(reference.ok)
            for input in [joined, joined + Array("trailing, not bzip2\n".utf8)] {
                let decoder = BZip2Blocks(input: ChunkedInput(input, readSize: 4093), workers: 2)
                defer { decoder.close() }
                #expect(try Self.decodeAll(decoder) == reference.bytes)
                #expect(!decoder.statistics.fellBack, "\(decoder.statistics)")
            }
        }
    }

    /// The symbol map of a block (16 bits saying which ranges of 16 byte values occur, then
    /// 16 bits per range used) spells the block magic 0x314159265359 when the data uses just
    /// these byte values: ranges 2, 3, 7, 9 and 15 (0x3141), in range 2 the values of
    /// 0x5926, in range 3 those of 0x5359. So every block holds a false magic 105 bits in.
    static let magicSpellingAlphabet: [UInt8] = [33, 35, 36, 39, 42, 45, 46, 49, 51, 54, 55, 57, 59, 60, 63, 112, 144, 240]

    @Test("a block magic inside a block (its symbol map spells it) after blocks already handed out costs one sequential decode, never the output")
    func falseMagicFallsBack() throws {
        try StoreTestSupport.withTempDir { dir in
            // No byte twice in a row: a run of 4 would add its length byte to the map.
            var state: UInt64 = 42
            var data: [UInt8] = []
            while data.count < 900 << 10 {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                let byte = Self.magicSpellingAlphabet[Int(state % UInt64(Self.magicSpellingAlphabet.count))]
                if byte != data.last { data.append(byte) }
            }
            // A stream of ordinary blocks first, so that the fallback starts after output
            // was handed out and must skip exactly that.
            let ordinary = try Self.compress(Self.mixedBytes(1 << 20), level: 1, in: dir, name: "ordinary")
            let compressed = ordinary + (try Self.compress(data, level: 1, in: dir))
            // The map really spells the magic: 105 bits into the second stream's first block.
            let magicAt = compressed.withUnsafeBytes { BZip2Format.bits($0, at: ordinary.count * 8 + 32 + 105, count: 48) }
            try #require(magicAt == BZip2Format.blockMagic)
            let reference = try Self.bunzip2(compressed, in: dir)
            try #require(reference.ok)
            let decoder = BZip2Blocks(input: ChunkedInput(compressed, readSize: 1 << 20), workers: 2)
            defer { decoder.close() }
            #expect(try Self.decodeAll(decoder) == reference.bytes)
            #expect(decoder.statistics.fellBack, "the false cut was noticed and the rest decoded in one piece")
        }
    }

    // MARK: Damage

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case blockData = "a byte in the middle of block 4's data"
        case blockCRC = "block 3's stored CRC"
        case bigBlockCRC = "the stored CRC of the last block, which decodes to over a megabyte"
        case bigBlockOrigin = "the last block's BWT origin pointer (it decodes, to over a megabyte of other bytes, until its CRC)"
        case streamCRC = "the stream's combined CRC"
        case truncatedHalf = "cut in half"
        case truncatedEnd = "the end marker cut off"
        var testDescription: String { rawValue }
    }

    /// Damages `bytes`, whose blocks start at the bit positions `starts`; returns the index
    /// of the first block that can no longer be checked (nil: every block still checks).
    static func damage(_ bytes: inout [UInt8], _ damage: Damage, starts: [Int]) -> Int? {
        switch damage {
        case .blockData: bytes[(starts[3] + starts[4]) / 16] ^= 0x55; return 3
        case .blockCRC: bytes[(starts[2] + 48 + 8) / 8] ^= 0x01; return 2
        case .bigBlockCRC: bytes[(starts[starts.count - 1] + 48 + 8) / 8] ^= 0x01; return starts.count - 1
        case .bigBlockOrigin: flipOrigin(&bytes, blockAt: starts[starts.count - 1]); return starts.count - 1
        case .streamCRC: bytes[bytes.count - 2] ^= 0x10; return nil
        case .truncatedHalf:
            bytes = Array(bytes.prefix(bytes.count / 2))
            return starts.lastIndex { $0 < bytes.count * 8 }
        case .truncatedEnd: bytes = Array(bytes.prefix(bytes.count - 8)); return nil
        }
    }

    @Test("damaged or truncated bzip2 data fails with UnpackError.unreadable in libbz2's words, as bunzip2 refuses it; what was handed out before the error is the data, and none of it from a block whose CRC did not match",
          arguments: Damage.allCases)
    func damageIsTyped(_ damage: Damage) throws {
        try StoreTestSupport.withTempDir { dir in
            let data = Self.mixedBytes(2 << 20)
            var bytes = try Self.compress(data, level: 1, in: dir)
            let starts = Self.blockStarts(bytes)
            try #require(starts.count > 5 && starts[0] == 32, "\(starts.count) blocks")
            let outputStarts = try Self.blockOutputStarts(bytes, in: dir)
            try #require(outputStarts.count == starts.count + 1 && outputStarts.last == data.count, "\(outputStarts)")
            try #require(data.count - outputStarts[starts.count - 1] > 1 << 20, "the last block decodes to over a megabyte: \(outputStarts)")
            let firstBad = Self.damage(&bytes, damage, starts: starts)
            #expect(try !Self.bunzip2(bytes, in: dir).ok, "bunzip2 refuses it too")
            let decoder = BZip2Blocks(input: ChunkedInput(bytes, readSize: 1 << 20), workers: 2)
            defer { decoder.close() }
            let (handed, error) = Self.decodeUntilError { () throws(UnpackError) in try decoder.next() }
            guard case .unreadable(let message)? = error else {
                Issue.record("not .unreadable: \(String(describing: error))")
                return
            }
            switch damage {
            case .blockData, .blockCRC, .bigBlockCRC, .bigBlockOrigin, .streamCRC: #expect(message.contains("damaged"), "\(message)")
            case .truncatedHalf, .truncatedEnd: #expect(message.contains("truncated"), "\(message)")
            }
            // What the extractor was given before the error: the data, and nothing of a block
            // libbz2 did not check.
            let limit = firstBad.map { outputStarts[$0] } ?? data.count
            #expect(handed.count <= limit, "\(handed.count) bytes handed out, \(handed.count - limit) of them from block \((firstBad ?? 0) + 1) before its CRC")
            let wrong = Self.divergence(handed, from: data)
            #expect(wrong == nil, "bytes handed out before the error are not the data from byte \(wrong ?? 0)")
        }
    }

    @Test("the sequential decoder (the fallback) hands out every checked block and no byte of a block before libbz2 checked its CRC",
          arguments: [Damage.blockData, .blockCRC, .bigBlockCRC, .bigBlockOrigin, .truncatedHalf])
    func sequentialHoldsEachBlockUntilItsCRC(_ damage: Damage) throws {
        try StoreTestSupport.withTempDir { dir in
            let data = Self.mixedBytes(2 << 20)
            var bytes = try Self.compress(data, level: 1, in: dir)
            let starts = Self.blockStarts(bytes)
            let outputStarts = try Self.blockOutputStarts(bytes, in: dir)
            try #require(starts.count > 5 && outputStarts.count == starts.count + 1, "\(outputStarts)")
            let firstBad = try #require(Self.damage(&bytes, damage, starts: starts))
            let decoder = SequentialBZip2(input: ChunkedInput(bytes, readSize: 4093), skip: 0)
            let (handed, error) = Self.decodeUntilError { () throws(UnpackError) in try decoder.next() }
            guard case .unreadable? = error else {
                Issue.record("not .unreadable: \(String(describing: error))")
                return
            }
            #expect(handed.count == outputStarts[firstBad], "blocks 1…\(firstBad) whole, nothing of block \(firstBad + 1): \(handed.count) bytes handed out, block \(firstBad + 1) starts at \(outputStarts[firstBad])")
            let wrong = Self.divergence(handed, from: data)
            #expect(wrong == nil, "bytes handed out before the error are not the data from byte \(wrong ?? 0)")
        }
    }

    @Test("the sequential decoder gives bunzip2's bytes: streams back to back, trailing bytes, a block of runs that decodes to 20 MB, skipping what was handed out")
    func sequentialEqualsBunzip2() throws {
        try StoreTestSupport.withTempDir { dir in
            let a = try Self.compress(Self.mixedBytes(700 << 10, seed: 1), level: 2, in: dir, name: "a")
            let empty = try Self.compress([], level: 9, in: dir, name: "empty")
            let runs = try Self.compress(Self.mixedBytes(300 << 10, seed: 7) + [UInt8](repeating: 0, count: 20 << 20), level: 9, in: dir, name: "runs")
            let joined = a + empty + runs + Array("trailing, not bzip2\n".utf8)
            let reference = try Self.bunzip2(joined, in: dir)
            try #require(reference.ok)
            for (skip, readSize) in [(0, 1 << 20), (0, 997), (1_234_567, 65_536)] {
                let decoder = SequentialBZip2(input: ChunkedInput(joined, readSize: readSize), skip: Int64(skip))
                let (out, error) = Self.decodeUntilError { () throws(UnpackError) in try decoder.next() }
                #expect(error == nil, "\(String(describing: error))")
                let expected = Array(reference.bytes[skip...])
                #expect(out.count == expected.count && Self.divergence(out, from: expected) == nil,
                        "skip \(skip), reads of \(readSize): \(out.count) bytes, not bunzip2's from byte \(Self.divergence(out, from: expected) ?? out.count)")
            }
        }
    }

    // MARK: Memory

    @Test("a reader slower than the decoder holds it: never more than one block per worker and the one being read in flight, and their buffers bounded, however long the input",
          arguments: [1, 2, 4])
    func slowReaderBoundsTheBlocksInFlight(workers: Int) throws {
        try StoreTestSupport.withTempDir { dir in
            // Bytes bzip2 cannot shrink: level 1 cuts them into about 60 blocks of 100 kB,
            // each decoding to one output chunk.
            var state: UInt64 = 0x2545_F491_4F6C_DD1D
            let data = (0..<(6 << 20)).map { _ -> UInt8 in
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                return UInt8(truncatingIfNeeded: state)
            }
            let compressed = try Self.compress(data, level: 1, in: dir)
            let decoder = BZip2Blocks(input: ChunkedInput(compressed, readSize: 1 << 20), workers: workers)
            defer { decoder.close() }
            var decoded: [UInt8] = []
            decoded.reserveCapacity(data.count)
            while true {
                // The slow writer: before taking more, it lets the splitter and the workers
                // run until the bound holds them (or the input is all cut).
                #expect(StoreTestSupport.waitUntil(seconds: 120) { decoder.statistics.splitterHeld }, "\(decoder.statistics)")
                let bytes = try decoder.next()
                if bytes.isEmpty { break }
                decoded += bytes
            }
            #expect(decoded == data)
            let stats = decoder.statistics
            #expect(stats.blocks > 40 && !stats.fellBack, "\(stats)")
            #expect(stats.peakInFlight == workers + 1, "one block per worker and the one being read, reached and held: \(stats)")
            // Each block in flight: one output chunk and one compressed buffer, reused.
            let bound = (workers + 1) * (BZip2Blocks.chunkBytes + BZip2Blocks.blockBufferStep)
            #expect(stats.peakBufferBytes <= bound, "at most \(bound) bytes of buffers: \(stats)")
        }
    }

    @Test("an archive downloading faster than it unpacks waits for the unpacking: never more than the lead unread on disk, every file extracted")
    func downloadWaitsForTheUnpacking() throws {
        try StoreTestSupport.withTempDir { dir in
            let (archive, files) = try Self.tarBz2(in: dir, files: 6, size: 900 << 10)
            let size = Int64(try StoreTestSupport.readFile(archive).count)
            let lead: Int64 = 256 << 10, step: Int64 = 64 << 10
            try #require(size > 8 * lead, "\(size) bytes")
            let feed = ArchiveFeed(path: archive, lead: lead)
            let written = Locked<Int64>(0)
            // The "download": as fast as it can, 64 KiB at a time.
            Threads.start(name: "test-feed") {
                var at: Int64 = 0
                while at < size {
                    at = min(size, at + step)
                    feed.advance(to: at)
                    written.withLock { $0 = at }
                }
                feed.finish(at: size)
            }
            // Nothing read yet: the download is held at the lead.
            #expect(StoreTestSupport.waitUntil(seconds: 60) { feed.pacing.writerWaiting }, "\(feed.pacing)")
            #expect(written.withLock { $0 } <= lead + step, "held at \(written.withLock { $0 }) of \(size) bytes")
            let staging = dir + "/staging"
            try FileIO.createDirectory(staging)
            let result = try ArchiveExtractor.extract(feed: feed, format: .tarBz2, stripComponents: 1, into: staging, files: files)
            for file in files { #expect(result.hashes[file.path] == file.sha256, "\(file.path)") }
            #expect(written.withLock { $0 } == size)
            #expect(feed.pacing.peakLead <= lead + step, "the download never ran further ahead: \(feed.pacing)")
            #expect(Self.decoderThreadsEnd(), "\(Self.decoderThreads())")
        }
    }

    @Test("an extraction that stops early (a file that fails its hash) lets the download run on to its end")
    func downloadRunsOnWhenTheUnpackingStops() throws {
        try StoreTestSupport.withTempDir { dir in
            var (archive, files) = try Self.tarBz2(in: dir, files: 6, size: 900 << 10)
            let size = Int64(try StoreTestSupport.readFile(archive).count)
            files[0].sha256 = String(repeating: "0", count: 64)
            let feed = ArchiveFeed(path: archive, lead: 256 << 10)
            let written = Locked<Int64>(0)
            Threads.start(name: "test-feed") {
                var at: Int64 = 0
                while at < size {
                    at = min(size, at + (64 << 10))
                    feed.advance(to: at)
                    written.withLock { $0 = at }
                }
            }
            let staging = dir + "/staging"
            try FileIO.createDirectory(staging)
            #expect(throws: UnpackError.self) {
                _ = try ArchiveExtractor.extract(feed: feed, format: .tarBz2, stripComponents: 1, into: staging, files: files)
            }
            #expect(StoreTestSupport.waitUntil(seconds: 60) { written.withLock { $0 } == size },
                    "the download was not held by an extraction that ended: \(written.withLock { $0 }) of \(size)")
            feed.finish(at: size)
        }
    }

    // MARK: Stopping

    @Test("close() mid-stream ends every decoder thread, also while the splitter waits for bytes still downloading")
    func closeWhileWaitingForBytes() throws {
        try StoreTestSupport.withTempDir { dir in
            let compressed = try Self.compress(Self.mixedBytes(3 << 20), level: 1, in: dir)
            // A third of the archive has arrived, and the download goes on (no finish).
            let path = dir + "/partial.bz2"
            try StoreTestSupport.writeFile(path, compressed)
            let feed = ArchiveFeed(path: path)
            feed.advance(to: Int64(compressed.count / 3))
            let decoder = BZip2Blocks(input: feed, workers: 2)
            let first = try decoder.next()
            #expect(!first.isEmpty, "the first block decoded from the bytes that arrived")
            #expect(!Self.decoderThreads().isEmpty, "the decoder runs on threads of its own")
            let closed = Locked(false)
            Threads.start(name: "test-close") {
                decoder.close()
                closed.withLock { $0 = true }
            }
            // A hang guard, not a time bound: close waits for at most one decoding step.
            #expect(StoreTestSupport.waitUntil(seconds: 120) { closed.withLock { $0 } }, "close() returned")
            #expect(Self.decoderThreadsEnd(), "no decoder thread outlives close(): \(Self.decoderThreads())")
        }
    }

    @Test("an extraction cancelled mid-decode throws .cancelled and leaves no decoder thread")
    func cancelMidDecode() throws {
        try StoreTestSupport.withTempDir { dir in
            let (archive, files) = try Self.tarBz2(in: dir, files: 12, size: 700 << 10)
            let staging = dir + "/staging"
            try FileIO.createDirectory(staging)
            let checks = Locked(0)
            let error = #expect(throws: UnpackError.self) {
                _ = try ArchiveExtractor.extract(archivePath: archive, format: .tarBz2, stripComponents: 1, into: staging,
                                                 files: files, isCancelled: { checks.withLock { $0 += 1; return $0 > 3 } })
            }
            #expect(error == .cancelled)
            let written = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
            #expect(written.count < files.count, "stopped before the end: \(written.count) of \(files.count) files")
            #expect(Self.decoderThreadsEnd(), "\(Self.decoderThreads())")
        }
    }

    // MARK: Through the extractor

    /// A tar.bz2 of `files` files of `size` mixed bytes under `model/`, level 1 (many
    /// blocks), and the catalog's view of them.
    static func tarBz2(in dir: String, files count: Int, size: Int) throws -> (path: String, files: [CatalogFile]) {
        var files: [CatalogFile] = []
        for i in 0..<count {
            let bytes = mixedBytes(size + i, seed: UInt64(i + 1))
            try StoreTestSupport.writeFile(dir + "/src/model/part-\(i).bin", bytes)
            files.append(CatalogFile(path: "part-\(i).bin", size: Int64(bytes.count), sha256: try SHA256Hasher.hash(bytes)))
        }
        let archive = dir + "/model.tar.bz2"
        let r = try ChildProcess.run("/bin/sh", ["-c", "tar -C \"$1/src\" -cf - model | bzip2 -1 > \"$2\"", "sh", dir, archive])
        try #require(r.status == 0, "\(r)")
        return (archive, files)
    }

    @Test("a multi-block tar.bz2 extracts byte-identical from the finished file and from a feed that grows as it downloads")
    func extractorBothWays() throws {
        try StoreTestSupport.withTempDir { dir in
            let (archive, files) = try Self.tarBz2(in: dir, files: 6, size: 900 << 10)
            let size = Int64(try StoreTestSupport.readFile(archive).count)
            for way in ["file", "feed"] {
                let staging = dir + "/staging-" + way
                try FileIO.createDirectory(staging)
                let result: ArchiveExtractor.Result
                if way == "file" {
                    result = try ArchiveExtractor.extract(archivePath: archive, format: .tarBz2, stripComponents: 1,
                                                          into: staging, files: files)
                } else {
                    // The "download": the feed advances 64 KiB at a time from another thread.
                    let feed = ArchiveFeed(path: archive)
                    Threads.start(name: "test-feed") {
                        var at: Int64 = 0
                        while at < size {
                            at = min(size, at + (64 << 10))
                            feed.advance(to: at)
                            Threads.sleep(microseconds: 200)
                        }
                        feed.finish(at: size)
                    }
                    result = try ArchiveExtractor.extract(feed: feed, format: .tarBz2, stripComponents: 1, into: staging, files: files)
                }
                for file in files {
                    #expect(result.hashes[file.path] == file.sha256, "\(way): \(file.path)")
                    let bytes = try StoreTestSupport.readFile(staging + "/" + file.path)
                    #expect(try SHA256Hasher.hash(bytes) == file.sha256, "\(way): \(file.path) on disk")
                }
            }
            #expect(Self.decoderThreadsEnd(), "\(Self.decoderThreads())")
        }
    }

    @Test("a corrupt tar.bz2 is refused by the extractor with .unreadable; what it wrote before is the files' own bytes, none from the damaged block")
    func extractorRefusesDamage() throws {
        try StoreTestSupport.withTempDir { dir in
            // Files of 3 MB, each with a long run of zeros: a block that decodes to megabytes.
            let (archive, files) = try Self.tarBz2(in: dir, files: 2, size: 3 << 20)
            var bytes = try StoreTestSupport.readFile(archive)
            // The block with the most output still decodes, to other bytes: only its CRC says so.
            let starts = Self.blockStarts(bytes)
            let outputStarts = try Self.blockOutputStarts(bytes, in: dir)
            try #require(starts.count > 4 && outputStarts.count == starts.count + 1, "\(outputStarts)")
            let sizes = zip(outputStarts.dropFirst(), outputStarts).map { $0 - $1 }
            let biggest = try #require(sizes.indices.max { sizes[$0] < sizes[$1] })
            try #require(sizes[biggest] > 1 << 20, "\(sizes)")
            Self.flipOrigin(&bytes, blockAt: starts[biggest])
            try FileIO.writeFileAtomically(bytes, toPath: archive)
            let staging = dir + "/staging"
            try FileIO.createDirectory(staging)
            let error = #expect(throws: UnpackError.self) {
                _ = try ArchiveExtractor.extract(archivePath: archive, format: .tarBz2, stripComponents: 1, into: staging, files: files)
            }
            guard case .unreadable(let message)? = error else {
                Issue.record("not .unreadable: \(String(describing: error))")
                return
            }
            #expect(message.contains("bzip2") && message.contains("damaged"), "\(message)")
            // Every file written, whole or cut short by the error, holds its source's first bytes.
            let written = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
            #expect(!written.isEmpty, "the blocks before the damaged one were extracted")
            for name in written {
                let got = try StoreTestSupport.readFile(staging + "/" + name)
                let source = try StoreTestSupport.readFile(dir + "/src/model/" + name)
                let wrong = Self.divergence(got, from: source)
                #expect(wrong == nil, "\(name): bytes of the damaged block were written, from byte \(wrong ?? 0)")
            }
        }
    }
}

/// Compressed bytes from memory, `readSize` at most per read.
final class ChunkedInput: CompressedInput, @unchecked Sendable {
    // @unchecked: read by one thread at a time, as the decoder promises.
    private let bytes: [UInt8]
    private let readSize: Int
    private var offset = 0

    init(_ bytes: [UInt8], readSize: Int) {
        self.bytes = bytes
        self.readSize = readSize
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) throws(UnpackError) -> Int {
        let n = min(readSize, buffer.count, bytes.count - offset)
        bytes.withUnsafeBytes { source in
            if n > 0, let from = source.baseAddress, let to = buffer.baseAddress { to.copyMemory(from: from + offset, byteCount: n) }
        }
        offset += n
        return n
    }

    func rewind() { offset = 0 }
    func interrupt() {}
}
