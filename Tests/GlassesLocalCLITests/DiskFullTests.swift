import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Disk full on a real small filesystem (a 64 MiB tmpfs holding the store; the tests run
/// as root). The up-front check refuses what cannot fit before any byte moves; a disk
/// that fills up mid-way stops the download with exit 3, keeps the partial data, and the
/// next download resumes it.
///
/// The store keeps a safety margin of 32 MiB + 1 % (`StorageMargin`), so the filesystem
/// is 64 MiB rather than 20: a model must be able to pass the check at all.
@Suite("Reliability: disk full on a real small filesystem", .ownThreads, .networkGuard)
struct DiskFullTests {
    static let sizeMb = 64
    static let size = 8 << 20
    static let files: [(String, Int)] = [("weights.bin", size), ("config.json", 1000)]
    static var total: Int64 { Int64(files.reduce(0) { $0 + $1.1 }) }

    /// A world whose store lives on a fresh tmpfs, with model `mid` on the mirror.
    struct FullDisk {
        let w: World
        let fs: TmpfsMount
        let slow: String
        let fast: String
        var filler: String { fs.path + "/filler" }
        var partial: String { w.partialRoot + "/mid/weights.bin" }

        init() throws {
            w = try World()
            do {
                fs = try TmpfsMount(at: w.outer + "/fs", sizeMb: DiskFullTests.sizeMb)
            } catch {
                w.remove()
                throw error
            }
            w.store = fs.path + "/store"
            do {
                try w.addModel("mid", files: DiskFullTests.files)
                slow = try w.filesCatalog("mid", id: "mid", slow: true)
                fast = try w.filesCatalog("mid", id: "mid")
            } catch {
                fs.unmount()
                w.remove()
                throw error
            }
        }

        func remove() {
            fs.unmount()
            w.remove()
        }

        /// Starts a slowed download, fills the filesystem behind its back once it has
        /// written 128 KiB (leaving `leaveFree` bytes), and returns what the download did.
        func downloadIntoFillingDisk(leaveFree: Int, sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
            let p = try w.start(["download", "mid"], catalog: slow)
            let started = p.waitUntil(timeout: 60) { (Disk.fileSize(partial) ?? 0) >= 128 << 10 }
            try #require(started, "the download never started writing\n\(p.wait())", sourceLocation: sourceLocation)
            let fill = max(0, fs.availableBytes - Int64(leaveFree))
            // dd may itself meet ENOSPC when the download wrote meanwhile: the disk is full either way.
            _ = try World.tool("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(filler)", "bs=1M", "count=\(fill)", "iflag=count_bytes"])
            #expect(fs.availableBytes <= Int64(leaveFree) + (64 << 10), "the filesystem is nearly full: \(fs.availableBytes) bytes free",
                    sourceLocation: sourceLocation)
            return p.wait(timeout: 60, sourceLocation: sourceLocation)
        }

        /// Exit 3 with a message naming the file and how much to free; returns the partial bytes kept.
        func expectDiskFullError(_ r: CLIResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> Int64 {
            #expect(r.status == 3, "a full disk is exit 3\n\(r)", sourceLocation: sourceLocation)
            #expect(r.stderr.contains("the disk filled up while writing weights.bin of mid"), "\(r)", sourceLocation: sourceLocation)
            let freeAtLeast = try #require(r.stderr.firstRange(of: "Free at least ").map { r.stderr[$0.upperBound...].prefix { $0.isNumber } },
                                           "the message says how much to free\n\(r)", sourceLocation: sourceLocation)
            let kept = w.bytesUnder(w.partialRoot + "/mid")
            #expect((Disk.fileSize(partial) ?? 0) > 0 && kept < DiskFullTests.total, "the partial data is kept: \(w.leftovers)",
                    sourceLocation: sourceLocation)
            #expect((Int64(freeAtLeast) ?? 0) << 20 >= DiskFullTests.total - kept,
                    "freeing \(freeAtLeast) MiB must be enough for the \(DiskFullTests.total - kept) bytes left\n\(r)", sourceLocation: sourceLocation)
            #expect(r.stderr.contains("the \(kept) bytes already downloaded are kept"), "\(r)", sourceLocation: sourceLocation)
            #expect(!Disk.exists(w.installFolder("mid")), "nothing is installed", sourceLocation: sourceLocation)
            return kept
        }
    }

    /// Model `big` (48 MiB of weights) on the mirror, and the store on `fs`; its catalog.
    static func bigModel(_ w: World, storeIn fs: TmpfsMount) throws -> String {
        w.store = fs.path + "/store"
        try w.nginx.writeMirrorFile("big/weights.bin", Data(count: 48 << 20))
        try w.nginx.addRandomFile("big/config.json", size: 1000)
        return try w.filesCatalog("big", id: "big")
    }

    @Test("a model bigger than the free space: download exits 3 before transferring anything, saying how much to free")
    func refusedUpFront() throws {
        let w = try World(); defer { w.remove() }
        let fs = try TmpfsMount(at: w.outer + "/fs", sizeMb: Self.sizeMb); defer { fs.unmount() }
        let catalog = try Self.bigModel(w, storeIn: fs)

        let r = try w.run(["download", "big"], catalog: catalog)
        #expect(r.status == 3, "\(r)")
        #expect(r.stderr.contains("big needs") && r.stderr.contains("MiB is available") && r.stderr.contains("Free ")
                && r.stderr.contains("Nothing was downloaded"), "the message says how much to free\n\(r)")
        #expect(w.nginx.accessLog().isEmpty, "no request was made: \(w.nginx.accessLog())")
        #expect(w.bytesUnder(w.partialRoot) == 0, "nothing was written: \(w.leftovers)")

        let json = try w.run(["download", "big", "--json"], catalog: catalog)
        #expect(json.status == 3, "\(json)")
        let last = try #require(Check.jsonLines(json).last, "\(json)")
        #expect(last["event"] as? String == "error" && last["code"] as? String == "insufficientStorage" && last["exitCode"] as? Int == 3,
                "\(json)")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
        #expect(try !w.isInstalled("big", catalog: catalog))
        #expect(!Disk.exists(w.installFolder("big")))
        try w.expectRecordsIntact(catalog: catalog)
    }

    @Test("import from another filesystem of a model bigger than the free space: exit 3 before copying anything, saying how much to free")
    func importRefusedUpFront() throws {
        let w = try World(); defer { w.remove() }
        let fs = try TmpfsMount(at: w.outer + "/fs", sizeMb: Self.sizeMb); defer { fs.unmount() }
        let catalog = try Self.bigModel(w, storeIn: fs)
        // The mirror folder is on the test's disk, the store on the tmpfs: every file is a copy.
        let r = try w.run(["import", "big", w.nginx.mirror + "/big", "--json"], catalog: catalog)
        #expect(r.status == 3 && r.stdout.contains("\"code\":\"insufficientStorage\""), "\(r)")
        #expect(r.stderr.contains("big needs") && r.stderr.contains("Free "), "the message says how much to free\n\(r)")
        #expect(w.bytesUnder(w.partialRoot) == 0, "nothing was copied: \(w.leftovers)")
        #expect(try !w.isInstalled("big", catalog: catalog))
    }

    @Test("the disk fills up mid-download (filler written after the check): exit 3, how much to free, partial kept, nothing installed; free it → resumes with Range, exit 0",
          arguments: [0, 1 << 20])
    func filledMidway(leaveFree: Int) throws {
        let d = try FullDisk(); defer { d.remove() }
        let w = d.w
        let r = try d.downloadIntoFillingDisk(leaveFree: leaveFree)
        let kept = try d.expectDiskFullError(r)
        let keptBig = Disk.fileSize(d.partial) ?? 0

        try FileManager.default.removeItem(atPath: d.filler)
        #expect(try !w.isInstalled("mid", catalog: d.fast))
        w.nginx.clearLog()
        let again = try w.run(["download", "mid"], catalog: d.fast)
        #expect(again.status == 0, "\(again)")
        let resume = w.nginx.requests(for: "mid/weights.bin")
        #expect(resume.count == 1 && resume.first?.rangeStart == keptBig && resume.first?.status == 206 && resume.first?.ifRange != nil,
                "the download resumed at byte \(keptBig): \(w.nginx.accessLog())")
        #expect(resume.first?.bytesSent == Int64(Self.size) - keptBig, "only the missing bytes were fetched: \(resume)")
        let sent = w.nginx.accessLog().reduce(Int64(0)) { $0 + $1.bytesSent }
        #expect(sent == Self.total - kept, "nothing kept was fetched again: \(w.nginx.accessLog())")
        w.expectInstalledMatchesMirror("mid", folder: "mid")
        let v = try w.run(["verify", "mid"], catalog: d.fast)
        #expect(v.status == 0, "\(v)")
        #expect(w.leftovers.isEmpty, "\(w.leftovers)")
        try w.expectRecordsIntact(catalog: d.fast)
    }

    @Test("a disk filled by someone else: list still shows the installed model and delete frees its space")
    func deleteMakesRoomOnFullDisk() throws {
        let d = try FullDisk(); defer { d.remove() }
        let w = d.w
        let r = try w.run(["download", "mid"], catalog: d.fast)
        try #require(r.status == 0, "\(r)")
        _ = try World.tool("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(d.filler)", "bs=1M"])
        #expect(d.fs.availableBytes < 64 << 10, "the filesystem is full: \(d.fs.availableBytes) bytes free")

        let list = try w.run(["list", "--json"], catalog: d.fast)
        #expect(list.status == 0, "list must work on a full disk\n\(list)")
        let before = d.fs.availableBytes
        let del = try w.run(["delete", "mid"], catalog: d.fast)
        #expect(del.status == 0 && del.stdout.contains("mid: deleted, "), "delete must work on a full disk (it is how space is freed)\n\(del)")
        #expect(!Disk.exists(w.installFolder("mid")), "the model's folder is gone")
        #expect(d.fs.availableBytes >= before + Int64(Self.size), "the space came back: \(before) → \(d.fs.availableBytes)")
        try FileManager.default.removeItem(atPath: d.filler)
        #expect(try !w.isInstalled("mid", catalog: d.fast))
        try w.expectRecordsIntact(catalog: d.fast)
    }

    @Test("on the full disk the advice can be followed: list works, download is refused up front (exit 3), delete frees the partial data")
    func fullDiskStillManageable() throws {
        let d = try FullDisk(); defer { d.remove() }
        let w = d.w
        let r = try d.downloadIntoFillingDisk(leaveFree: 0)
        let kept = try d.expectDiskFullError(r)

        // The disk is still full: a user looks, retries, then deletes to make room.
        let list = try w.run(["list", "--json"], catalog: d.fast)
        #expect(list.status == 0, "list must work on a full disk\n\(list)")
        w.nginx.clearLog()
        let retry = try w.run(["download", "mid"], catalog: d.fast)
        #expect(retry.status == 3 && retry.stderr.contains("Free "), "a retry on the full disk is refused up front as does-not-fit\n\(retry)")
        #expect(w.nginx.accessLog().isEmpty, "\(w.nginx.accessLog())")
        #expect(w.bytesUnder(w.partialRoot + "/mid") == kept, "the partial data is untouched")

        let before = d.fs.availableBytes
        let del = try w.run(["delete", "mid"], catalog: d.fast)
        #expect(del.status == 0 && del.stdout.contains("mid: deleted, "), "delete must work on a full disk (it is how space is freed)\n\(del)")
        #expect(w.leftovers.isEmpty, "delete removed the partial data: \(w.leftovers)")
        #expect(d.fs.availableBytes >= before + kept - (64 << 10), "the space came back: \(before) → \(d.fs.availableBytes)")
        try w.expectRecordsIntact(catalog: d.fast)
    }

    @Test("the disk fills between a command's checks and its records write: verify exits 3 and says how much to free; delete frees the files first then and succeeds; nothing is lost",
          arguments: ["verify", "delete"])
    func recordsWriteOnFullDisk(command: String) throws {
        let d = try FullDisk(); defer { d.remove() }
        let installed = try d.w.run(["download", "mid"], catalog: d.fast)
        try #require(installed.status == 0, "\(installed)")
        let p = try d.w.start([command, "mid"], catalog: d.fast, env: ["GLASSES_LOCAL_TEST_HOOK": "pause@records-write"])
        try #require(p.waitForStderr("PAUSE records-write", timeout: 60), "\(p.wait())")
        // Stopped (SIGSTOP) just before the write; fill the filesystem to the last byte.
        try #require(p.waitUntil(timeout: 10) { Self.processState(p.pid) == "T" }, "the process stopped itself")
        _ = try World.tool("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(d.filler)", "bs=1M"])
        _ = try World.tool("/usr/bin/env", ["dd", "if=/dev/zero", "of=\(d.filler)-tail", "bs=4k"])
        #expect(d.fs.availableBytes < 64 << 10, "the filesystem is full: \(d.fs.availableBytes) bytes free")
        p.send(SIGCONT)
        let r = p.wait(timeout: 60)
        if command == "verify" {
            #expect(r.status == 3, "a records write on a full disk is exit 3, as a full disk mid-download is\n\(r)")
            #expect(r.stderr.contains("the disk is full") && r.stderr.contains("Free at least 4 MiB"), "the message says how much to free\n\(r)")
        } else {
            // The delete's intent cannot be recorded on the full disk: the files go first,
            // which makes the room the records then take.
            #expect(r.status == 0 && r.stdout.contains("mid: deleted, "), "delete is how space is freed, also when the disk fills under it\n\(r)")
        }
        try FileManager.default.removeItem(atPath: d.filler)
        try FileManager.default.removeItem(atPath: d.filler + "-tail")
        if command == "verify" {
            // Nothing was lost: the model is installed and verifies once there is room.
            let again = try d.w.run(["verify", "mid"], catalog: d.fast)
            #expect(again.status == 0, "\(again)")
        } else {
            #expect(try !d.w.isInstalled("mid", catalog: d.fast))
            #expect(!Disk.exists(d.w.installFolder("mid")))
        }
        try d.w.expectRecordsIntact(catalog: d.fast)
    }

    /// The state letter of /proc/<pid>/stat ("T" when stopped).
    static func processState(_ pid: Int32) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        return text[text.index(after: close)...].split(separator: " ").first.map(String.init)
    }
}
