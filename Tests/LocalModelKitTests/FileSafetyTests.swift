import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

#if canImport(Glibc)
import Glibc
#endif

/// The file-system layer's two rules for paths it did not create: a read never waits (a
/// FIFO or a device is refused after a non-blocking open), and an atomic write never goes
/// through a name someone planted (exclusive random temporary name, `rename` replaces a
/// link at the destination instead of following it).
@Suite("File safety: reads that never wait, writes through no planted name", .ownThreads, .networkGuard)
struct FileSafetyTests {
    static func victim(_ dir: String) throws -> (path: String, bytes: [UInt8]) {
        let path = dir + "/outside/victim"
        let bytes = Array("the outside file; must never change\n".utf8)
        try StoreTestSupport.writeFile(path, bytes)
        return (path, bytes)
    }

    @Test("a link at the old predictable temporary name (PATH.tmp-<pid>) receives nothing; no temporary file is left")
    func plantedTemporaryName() throws {
        try StoreTestSupport.withTempDir { dir in
            let (victim, original) = try Self.victim(dir)
            try FileIO.createDirectory(dir + "/out")
            let target = dir + "/out/key.pub"
            #expect(symlink(victim, target + ".tmp-\(getpid())") == 0)
            try FileIO.writeFileAtomically(Array("new".utf8), toPath: target)
            #expect(try StoreTestSupport.readFile(victim) == original, "written through a planted temporary name")
            #expect(try StoreTestSupport.readFile(target) == Array("new".utf8))
            let left = try FileIO.listDirectory(dir + "/out").filter { $0.contains(".tmp-") && $0 != "key.pub.tmp-\(getpid())" }
            #expect(left.isEmpty, "temporary files left: \(left)")
        }
    }

    @Test("a link at the destination is replaced, never followed")
    func linkAtDestination() throws {
        try StoreTestSupport.withTempDir { dir in
            let (victim, original) = try Self.victim(dir)
            try FileIO.createDirectory(dir + "/out")
            let target = dir + "/out/catalog.json.sig"
            #expect(symlink(victim, target) == 0)
            try FileIO.writeFileAtomically(Array("sig".utf8), toPath: target)
            #expect(try StoreTestSupport.readFile(victim) == original)
            let st = try #require(try FileIO.status(target))
            #expect(st.kind == .regular, "the link was replaced by the file")
        }
    }

    @Test("replacing: false refuses anything already at the name, a dangling link included, and creates nothing through it")
    func noReplace() throws {
        try StoreTestSupport.withTempDir { dir in
            try FileIO.createDirectory(dir + "/out")
            let target = dir + "/out/private"
            let through = dir + "/outside-new-file"
            #expect(symlink(through, target) == 0)
            #expect(throws: SystemError.self) {
                try FileIO.writeFileAtomically(Array("secret".utf8), toPath: target, mode: 0o600, replacing: false)
            }
            #expect(!FileIO.exists(through), "a file was created through the dangling link")
            #expect(try FileIO.listDirectory(dir + "/out") == ["private"], "only the planted link is there; no temporary file left")

            let fresh = dir + "/out/fresh"
            try FileIO.writeFileAtomically(Array("secret".utf8), toPath: fresh, mode: 0o600, replacing: false)
            let st = try #require(try FileIO.status(fresh))
            #expect(st.permissions & 0o777 == 0o600, "the mode is set at creation")
        }
    }

    @Test("inside the store, a link in a parent folder is refused, not followed")
    func belowRoot() throws {
        try StoreTestSupport.withTempDir { dir in
            try FileIO.createDirectory(dir + "/store/.catalog")
            try FileIO.createDirectory(dir + "/elsewhere")
            #expect(symlink(dir + "/elsewhere", dir + "/store/.catalog/keys") == 0)
            #expect(throws: SystemError.self) {
                try FileIO.writeFileAtomically(Array("key".utf8), toPath: dir + "/store/.catalog/keys/next.pub", below: dir + "/store")
            }
            #expect(try FileIO.listDirectory(dir + "/elsewhere").isEmpty)
        }
    }

    @Test("a FIFO, a device and a folder are refused at once by reads of named paths; /proc files still read")
    func readsNeverWait() throws {
        try StoreTestSupport.withTempDir { dir in
            let fifo = dir + "/pipe"
            #expect(mkfifo(fifo, 0o644) == 0)
            // A blocking open of a FIFO with no writer never returns: this one must throw.
            for path in [fifo, "/dev/zero", dir] {
                #expect(throws: SystemError.self, "\(path)") { _ = try FileIO.readFile(atPath: path, limit: 1 << 20) }
            }
            let error = try #require(throws: SystemError.self) { _ = try FileIO.readFile(atPath: fifo, limit: 64) }
            #expect(error.message.contains("FIFO"), "\(error)")
            #expect(throws: FileHashError.self) { _ = try SHA256Hasher.hashFile(atPath: fifo) }
            #expect(try FileIO.readFile(atPath: "/proc/self/status", limit: 1 << 20).count > 0)
        }
    }

    @Test("installed files' sizes, looked up from their folder: a link on the way (the folder, a subfolder or the file) counts as absent, as do a folder or a FIFO in a file's place")
    func sizesBelowAFolder() throws {
        try StoreTestSupport.withTempDir { dir in
            let folder = dir + "/model"
            try StoreTestSupport.writeFile(folder + "/config.json", Array(repeating: 1, count: 10))
            try StoreTestSupport.writeFile(folder + "/sub/deeper/weights.bin", Array(repeating: 2, count: 300))
            try StoreTestSupport.writeFile(dir + "/outside/weights.bin", Array(repeating: 3, count: 300))
            try FileIO.createDirectory(folder + "/dir.json")
            #expect(mkfifo(folder + "/fifo.json", 0o600) == 0)
            #expect(symlink(dir + "/outside/weights.bin", folder + "/linked.bin") == 0)
            #expect(symlink(dir + "/outside", folder + "/linkedsub") == 0)
            let names = ["config.json", "sub/deeper/weights.bin", "missing.bin", "dir.json", "fifo.json",
                         "linked.bin", "linkedsub/weights.bin", "sub/missing/x.bin", "sub/deeper/weights.bin"]
            let sizes = try #require(FileIO.regularFileSizes(names, in: folder))
            #expect(sizes == [10, 300, nil, nil, nil, nil, nil, nil, 300])
            // The one-file look agrees with the batch, name by name.
            var checked = Set<String>()
            #expect(names.map { FileIO.regularFileSize($0, in: folder, checked: &checked) } == sizes)
            // A folder that is a link, or absent, or a file: nothing below it counts.
            #expect(symlink(folder, dir + "/linked-model") == 0)
            #expect(FileIO.regularFileSizes(["config.json"], in: dir + "/linked-model") == nil)
            #expect(FileIO.regularFileSizes(["config.json"], in: dir + "/absent") == nil)
            #expect(FileIO.regularFileSizes(["x"], in: folder + "/config.json") == nil)
            #expect(FileIO.regularFileSizes([], in: folder) == [])
        }
    }
}
