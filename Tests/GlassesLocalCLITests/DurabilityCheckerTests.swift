import Foundation
import GlassesTestSupport
import Testing

/// The power-cut checker (`Tests/Tools/durability.py`) on small hand-written traces in
/// strace's own format: the correct pattern passes, and each way of breaking the rule is
/// reported with its rule and path. `PowerCutTests` runs it on the real binary's traces.
@Suite("Power cuts: the checker on hand-written traces", .ownThreads, .networkGuard)
struct DurabilityCheckerTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var trace: String
        var options: [String] = []
        /// The checker's exit status.
        var status: Int32
        /// `rule path` of each violation expected, in order.
        var rules: [String] = []
        var testDescription: String { name }
    }

    /// SQLite committing one transaction: frames appended to the WAL, then fdatasync.
    static func commit(_ n: Int, at t: Int) -> String {
        """
        100 10:00:\(String(format: "%02d", t)).000001 pwrite64(9</S/records.sqlite3-wal>, "\\0\\0\\0\\(n)\\0\\0\\0\\v\\212%"..., 24, 4152) = 24
        100 10:00:\(String(format: "%02d", t)).000002 pwrite64(9</S/records.sqlite3-wal>, "\\r\\0\\0\\0\\1\\17\\317\\0"..., 4096, 4176) = 4096
        100 10:00:\(String(format: "%02d", t)).000003 fdatasync(9</S/records.sqlite3-wal>) = 0

        """
    }

    /// The install pattern done right, with the noise of a real trace around it: SQLite
    /// creating its files and syncing the store folder, a lock file, a socket whose
    /// annotation holds `->`, a write whose data holds `)` and `<`, and a write started on
    /// one thread and finished after another thread's calls.
    static let good = """
        100 10:00:00.000001 openat(AT_FDCWD</w>, "/S/records.sqlite3-wal", O_RDWR|O_CREAT|O_NOFOLLOW|O_CLOEXEC, 0644) = 9</S/records.sqlite3-wal>
        100 10:00:00.000002 pwrite64(9</S/records.sqlite3-wal>, "7\\177\\6\\202\\0-\\342\\30"..., 32, 0) = 32
        100 10:00:00.000003 fdatasync(9</S/records.sqlite3-wal>) = 0
        100 10:00:00.000004 openat(AT_FDCWD</w>, "/S", O_RDONLY|O_CLOEXEC) = 12</S>
        100 10:00:00.000005 fdatasync(12</S>) = 0
        100 10:00:00.000006 openat(AT_FDCWD</w>, "/S/.locks/m1.lock", O_RDWR|O_CREAT|O_NONBLOCK|O_CLOEXEC, 0666) = 10</S/.locks/m1.lock>
        100 10:00:00.000007 fcntl(15<UNIX-STREAM:[535303->535304]>, F_SETFL, O_RDWR|O_NONBLOCK) = 0
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/.staging", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 13</S/.staging>
        100 10:00:01.000002 mkdirat(13</S/.staging>, "m1", 0755) = 0
        100 10:00:01.000003 openat(13</S/.staging>, "m1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 14</S/.staging/m1>
        100 10:00:01.000004 openat(14</S/.staging/m1>, "model.bin", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 15</S/.staging/m1/model.bin>
        101 10:00:01.000005 pwrite64(15</S/.staging/m1/model.bin>, "a) <b>\\"c"..., 65536, 0 <unfinished ...>
        100 10:00:01.000006 write(4<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8
        101 10:00:01.000007 <... pwrite64 resumed>) = 65536
        100 10:00:01.000008 fsync(15</S/.staging/m1/model.bin>) = 0
        100 10:00:01.000009 close(15</S/.staging/m1/model.bin>) = 0
        100 10:00:01.000010 fsync(14</S/.staging/m1>) = 0
        100 10:00:01.000011 fsync(13</S/.staging>) = 0
        100 10:00:01.000012 openat(AT_FDCWD</w>, "/S", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 16</S>
        100 10:00:01.000013 renameat(13</S/.staging>, "m1", 16</S>, "m1") = 0
        100 10:00:01.000014 fsync(16</S>) = 0

        """ + commit(1, at: 2) + """
        100 10:00:03.000001 openat(AT_FDCWD</w>, "/S/m1", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 17</S/m1>
        100 10:00:03.000002 openat(17</S/m1>, ".notes.tmp-x1", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 18</S/m1/.notes.tmp-x1>
        100 10:00:03.000003 write(18</S/m1/.notes.tmp-x1>, "{}", 2) = 2
        100 10:00:03.000004 fsync(18</S/m1/.notes.tmp-x1>) = 0
        100 10:00:03.000005 close(18</S/m1/.notes.tmp-x1>) = 0
        100 10:00:03.000006 renameat(17</S/m1>, ".notes.tmp-x1", 17</S/m1>, "notes.json") = 0
        100 10:00:03.000007 fsync(17</S/m1>) = 0

        """ + commit(2, at: 4) + """
        100 10:00:05.000001 pwrite64(8</S/records.sqlite3>, "SQLite format 3\\0"..., 4096, 0) = 4096
        100 10:00:05.000002 fdatasync(8</S/records.sqlite3>) = 0
        100 10:00:05.000003 +++ exited with 0 +++

        """

    /// The same install with the model file renamed into place before its fsync.
    static let renameBeforeFsync = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/.staging", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 13</S/.staging>
        100 10:00:01.000002 mkdirat(13</S/.staging>, "m1", 0755) = 0
        100 10:00:01.000003 openat(13</S/.staging>, "m1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 14</S/.staging/m1>
        100 10:00:01.000004 openat(14</S/.staging/m1>, "model.bin", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 15</S/.staging/m1/model.bin>
        101 10:00:01.000005 pwrite64(15</S/.staging/m1/model.bin>, "abc"..., 65536, 0 <unfinished ...>
        100 10:00:01.000006 write(4<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8
        101 10:00:01.000007 <... pwrite64 resumed>) = 65536
        100 10:00:01.000008 fsync(14</S/.staging/m1>) = 0
        100 10:00:01.000009 openat(AT_FDCWD</w>, "/S", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 16</S>
        100 10:00:01.000010 renameat(13</S/.staging>, "m1", 16</S>, "m1") = 0
        100 10:00:01.000011 fsync(15</S/m1/model.bin>) = 0
        100 10:00:01.000012 fsync(16</S>) = 0

        """ + commit(1, at: 2)

    /// The folder holding the new file is never fsynced: the records commit a rename the
    /// disk may not have.
    static let commitBeforeFolderFsync = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/.staging", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 13</S/.staging>
        100 10:00:01.000002 mkdirat(13</S/.staging>, "m1", 0755) = 0
        100 10:00:01.000003 openat(13</S/.staging>, "m1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 14</S/.staging/m1>
        100 10:00:01.000004 openat(14</S/.staging/m1>, "model.bin", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 15</S/.staging/m1/model.bin>
        100 10:00:01.000005 write(15</S/.staging/m1/model.bin>, "abc", 3) = 3
        100 10:00:01.000006 fsync(15</S/.staging/m1/model.bin>) = 0
        100 10:00:01.000007 fsync(14</S/.staging/m1>) = 0
        100 10:00:01.000008 openat(AT_FDCWD</w>, "/S", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 16</S>
        100 10:00:01.000009 renameat(13</S/.staging>, "m1", 16</S>, "m1") = 0

        """ + commit(1, at: 2)

    /// A file written in place (no rename) and recorded before its fsync.
    static let commitBeforeDataFsync = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/m1/model.bin", O_WRONLY|O_NOFOLLOW|O_CLOEXEC) = 15</S/m1/model.bin>
        100 10:00:01.000002 pwrite64(15</S/m1/model.bin>, "abc", 3, 100) = 3

        """ + commit(1, at: 2) + """
        100 10:00:03.000001 fsync(15</S/m1/model.bin>) = 0

        """

    /// delete, files first: the folder moved aside and removed before any records commit,
    /// and the move never made durable.
    static let deleteFilesFirst = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 16</S>
        100 10:00:01.000002 openat(16</S>, ".staging", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 13</S/.staging>
        100 10:00:01.000003 renameat(16</S>, "m1", 13</S/.staging>, "m1.deleting") = 0
        100 10:00:01.000004 openat(13</S/.staging>, "m1.deleting", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 14</S/.staging/m1.deleting>
        100 10:00:01.000005 unlinkat(14</S/.staging/m1.deleting>, "model.bin", 0) = 0
        100 10:00:01.000006 unlinkat(13</S/.staging>, "m1.deleting", AT_REMOVEDIR) = 0

        """ + commit(1, at: 2)

    /// delete, intent first: a commit, then the folder moved aside and that made durable,
    /// then the final commit.
    static let deleteIntentFirst = commit(1, at: 0) + deleteFilesFirst.replacingOccurrences(
        of: "100 10:00:01.000004 openat", with: "100 10:00:01.000003 fsync(13</S/.staging>) = 0\n100 10:00:01.000004 openat")

    /// Path-only calls relative to the working folder (learnt from `AT_FDCWD</S>`), a
    /// temporary file made and removed again, SQLite's checkpoint (the main file written and
    /// synced with no rollback journal), and a leftover removed after the last commit.
    static let relativeAndCheckpoint = """
        100 10:00:01.000001 openat(AT_FDCWD</S>, "m1", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 17</S/m1>
        100 10:00:01.000002 mkdir("m2.tmp", 0755) = 0
        100 10:00:01.000003 openat(AT_FDCWD</S>, "m2.tmp/a.bin", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = 18</S/m2.tmp/a.bin>
        100 10:00:01.000004 write(18</S/m2.tmp/a.bin>, "abc", 3) = 3
        100 10:00:01.000005 fsync(18</S/m2.tmp/a.bin>) = 0
        100 10:00:01.000006 openat(AT_FDCWD</S>, "m2.tmp", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 19</S/m2.tmp>
        100 10:00:01.000007 fsync(19</S/m2.tmp>) = 0
        100 10:00:01.000008 rename("m2.tmp", "m2") = 0
        100 10:00:01.000009 openat(AT_FDCWD</S>, "m1/.x.tmp", O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC, 0644) = 20</S/m1/.x.tmp>
        100 10:00:01.000010 unlink("m1/.x.tmp") = 0
        100 10:00:01.000011 openat(AT_FDCWD</S>, ".", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 21</S>
        100 10:00:01.000012 fsync(21</S>) = 0

        """ + commit(1, at: 2) + """
        100 10:00:03.000001 unlink("/S/m1/old.bin") = 0
        100 10:00:03.000002 pwrite64(8</S/records.sqlite3>, "SQLite format 3\\0"..., 4096, 0) = 4096
        100 10:00:03.000003 fdatasync(8</S/records.sqlite3>) = 0

        """

    /// Resume data in .partial written and recorded (validators) without an fsync: work in
    /// flight, re-verified before use, so not a violation unless --strict.
    static let partialCheckpoint = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/.partial/m1", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 14</S/.partial/m1>
        100 10:00:01.000002 openat(14</S/.partial/m1>, "model.bin", O_RDWR|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 15</S/.partial/m1/model.bin>
        100 10:00:01.000003 write(15</S/.partial/m1/model.bin>, "abc", 3) = 3
        100 10:00:01.000004 sync_file_range(15</S/.partial/m1/model.bin>, 0, 3, SYNC_FILE_RANGE_WRITE) = 0

        """ + commit(1, at: 2)

    /// One syncfs instead of file-by-file fsyncs.
    static let syncfsInstall = """
        100 10:00:01.000001 openat(AT_FDCWD</w>, "/S/.staging", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 13</S/.staging>
        100 10:00:01.000002 mkdirat(13</S/.staging>, "v1", 0755) = 0
        100 10:00:01.000003 openat(13</S/.staging>, "v1", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 14</S/.staging/v1>
        100 10:00:01.000004 openat(14</S/.staging/v1>, "a.bin", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 15</S/.staging/v1/a.bin>
        100 10:00:01.000005 write(15</S/.staging/v1/a.bin>, "abc", 3) = 3
        100 10:00:01.000006 openat(14</S/.staging/v1>, "b.bin", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0644) = 16</S/.staging/v1/b.bin>
        100 10:00:01.000007 write(16</S/.staging/v1/b.bin>, "def", 3) = 3
        100 10:00:01.000008 syncfs(14</S/.staging/v1>) = 0
        100 10:00:01.000009 openat(AT_FDCWD</w>, "/S/voices", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 17</S/voices>
        100 10:00:01.000010 renameat(13</S/.staging>, "v1", 17</S/voices>, "v1") = 0
        100 10:00:01.000011 fsync(17</S/voices>) = 0

        """ + commit(1, at: 2)

    /// Each file fsynced, then a syncfs that repeats them, then a file fsynced twice.
    static let redundantFlushes = syncfsInstall.replacingOccurrences(
        of: "100 10:00:01.000008 syncfs", with: """
        100 10:00:01.000007 fsync(15</S/.staging/v1/a.bin>) = 0
        100 10:00:01.000007 fsync(16</S/.staging/v1/b.bin>) = 0
        100 10:00:01.000007 fsync(16</S/.staging/v1/b.bin>) = 0
        100 10:00:01.000008 syncfs
        """)

    /// No `-y`: descriptors without paths.
    static let withoutPaths = """
        100 10:00:01.000001 openat(AT_FDCWD, "/S/m1/model.bin", O_WRONLY|O_CLOEXEC) = 15
        100 10:00:01.000002 write(15, "abc", 3) = 3
        100 10:00:01.000003 fdatasync(9) = 0

        """

    static let cases: [Case] = [
        Case(name: "the correct pattern: fsync the file, rename, fsync the folder, then commit", trace: good, status: 0),
        Case(name: "rename before fsync: R1", trace: renameBeforeFsync, status: 1, rules: ["R1 m1/model.bin"]),
        Case(name: "commit before the folder's fsync: R2", trace: commitBeforeFolderFsync, status: 1, rules: ["R2 m1"]),
        Case(name: "commit before a file written in place is fsynced: R3", trace: commitBeforeDataFsync, status: 1,
             rules: ["R3 m1/model.bin"]),
        Case(name: "delete that removes the folder before any commit: ORDER, and the move aside never durable: R2",
             trace: deleteFilesFirst, options: ["--records-first", "m1"], status: 1, rules: ["R2 m1", "ORDER m1"]),
        Case(name: "delete that records its intent first and makes the move durable: passes", trace: deleteIntentFirst,
             options: ["--records-first", "m1"], status: 0),
        Case(name: "relative paths, a temporary file made and removed, a checkpoint after the last commit: passes",
             trace: relativeAndCheckpoint, status: 0),
        Case(name: "resume data in .partial recorded before any fsync: passes", trace: partialCheckpoint, status: 0),
        Case(name: "resume data in .partial recorded before any fsync, --strict: R2 and R3", trace: partialCheckpoint,
             options: ["--strict"], status: 1, rules: ["R2 .partial/m1/model.bin", "R3 .partial/m1/model.bin"]),
        Case(name: "one syncfs instead of file-by-file fsyncs: passes", trace: syncfsInstall, options: ["--max-redundant-flushes", "0"],
             status: 0),
        Case(name: "flushes a syncfs repeats, and a file fsynced twice: passes, and fails with --max-redundant-flushes 0",
             trace: redundantFlushes, status: 0),
        Case(name: "the same with --max-redundant-flushes 0", trace: redundantFlushes, options: ["--max-redundant-flushes", "0"],
             status: 1),
    ]

    @Test("the checker's verdict on a hand-written trace", arguments: cases)
    func verdict(_ c: Case) throws {
        let dir = FileManager.default.temporaryDirectory.path + "/durability-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let trace = dir + "/trace"
        try c.trace.write(toFile: trace, atomically: true, encoding: .utf8)
        let report = try Durability.check(trace, store: "/S", options: c.options)
        #expect(report.status == c.status, "\(report)")
        #expect(report.rules == c.rules, "\(report)")
        #expect(report.commits >= 1, "every trace here commits at least once: \(report)")
    }

    @Test("what a violation says: the syscall lines, the path, the rule and what a power cut there can leave")
    func violationText() throws {
        let dir = FileManager.default.temporaryDirectory.path + "/durability-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let trace = dir + "/trace"
        try Self.renameBeforeFsync.write(toFile: trace, atomically: true, encoding: .utf8)
        let r = try World.tool("/usr/bin/env", ["python3", Durability.script, "--store", "/S", trace])
        #expect(r.status == 1, "\(r)")
        // The pwrite started on line 5 and finished on line 7; the rename is line 10.
        #expect(r.stdout.contains("R1 line 10 (lines 5, 10): m1/model.bin: renamed into place at line 10 (.staging/m1 -> m1) "
                                  + "while its writes (last at line 5) were not fsynced: a power cut after the rename can leave "
                                  + "m1/model.bin empty, short or with a hole under its final name"), "\(r)")
        let explain = try World.tool("/usr/bin/env", ["python3", Durability.script, "--store", "/S", "--explain", "--crash-states", trace])
        #expect(explain.stdout.contains("model of durable state") && explain.stdout.contains("line 11: fsync m1/model.bin: data durable"),
                "\(explain)")
        #expect(explain.stdout.contains("power cut before line 11, fsync m1/model.bin")
                && explain.stdout.contains("data of m1/model.bin (writes at lines 5)"), "\(explain)")

        try Self.withoutPaths.write(toFile: trace, atomically: true, encoding: .utf8)
        let bare = try World.tool("/usr/bin/env", ["python3", Durability.script, "--store", "/S", trace])
        #expect(bare.status == 2 && bare.stderr.contains("strace -y"), "a trace without paths is refused, never passed: \(bare)")
    }
}
