import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A system-wide store: an administrator (root here) installs models, users' apps and
/// commands read them. Run as the unprivileged user `nobody` (uid 65534, through
/// util-linux's `setpriv`), every read command works, `verify` included, and nothing in
/// the store changes; a write says clearly that the store is read-only for this user.
@Suite("A store the user can read but not write", .ownThreads, .networkGuard)
struct ReadOnlyStoreTests {
    static let id = "ro"

    /// `glasses-local` as uid/gid 65534, from a copy of the binary that user can reach.
    static func runAsNobody(_ w: World, binary: String, _ arguments: [String], catalog: String,
                            sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        try Sandbox.runProcess("/usr/bin/setpriv",
                               ["--reuid=65534", "--regid=65534", "--clear-groups", "--", binary, "--catalog", catalog, "--store", w.store] + arguments,
                               environment: w.environment(), ioDirectory: w.root + "/io", currentDirectory: w.cwd, timeout: 60,
                               sourceLocation: sourceLocation)
    }

    @Test("list, info, auto, doctor and verify work for a user who cannot write the store; download says it is read-only; nothing changes")
    func readOnlyStore() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("ro", files: [("a.bin", 300 * 1024), ("sub/b.bin", 4096)])
        let catalog = try w.filesCatalog("ro", id: Self.id)
        let installed = try w.run(["download", Self.id], catalog: catalog)
        try #require(installed.status == 0, "\(installed)")
        // The user needs to reach the binary: a copy in the sandbox, readable by all.
        let binary = w.root + "/glasses-local"
        // Copied by cp, not in this process: a child another test forks meanwhile would hold a
        // copy of our write descriptor until it execs, and exec of the binary would then fail
        // with ETXTBSY ("text file busy").
        let copied = try World.tool("/bin/cp", [try w.binary, binary])
        try #require(copied.status == 0, "\(copied)")
        for path in [w.root, w.outer, w.cwd, w.root + "/catalogs", binary] { chmod(path, 0o755) }
        chmod(catalog, 0o644)
        let probe = try Self.runAsNobody(w, binary: binary, ["--version"], catalog: catalog)
        try #require(probe.status == 0, "setpriv could not run the binary as nobody: \(probe)")

        let before = Disk.tree(w.store)
        let list = try Self.runAsNobody(w, binary: binary, ["list", "--json"], catalog: catalog)
        #expect(list.status == 0, "\(list)")
        let models = try list.jsonObject()["models"] as? [[String: Any]]
        #expect(models?.first { $0["id"] as? String == Self.id }?["isInstalled"] as? Bool == true, "\(list)")
        for command in [["info", Self.id], ["auto"], ["fit", Self.id], ["history"]] {
            let r = try Self.runAsNobody(w, binary: binary, command, catalog: catalog)
            #expect(r.status == 0, "\(r)")
        }
        let doctor = try Self.runAsNobody(w, binary: binary, ["doctor"], catalog: catalog)
        #expect(!doctor.stderr.contains("Permission denied") && doctor.stdout.contains("records"), "\(doctor)")

        let verify = try Self.runAsNobody(w, binary: binary, ["verify", Self.id], catalog: catalog)
        #expect(verify.status == 0 && verify.stdout.contains("\(Self.id): ok, 2 files verified"), "\(verify)")
        #expect(!verify.stderr.contains("without its lock"), "the lock file exists: a shared lock is taken read-only\n\(verify)")

        // No lock file yet (the owner never downloaded on this machine): read without the
        // lock, and say so.
        try FileManager.default.removeItem(atPath: w.store + "/.locks/\(Self.id).lock")
        let unlocked = try Self.runAsNobody(w, binary: binary, ["verify", Self.id, "--json"], catalog: catalog)
        #expect(unlocked.status == 0, "\(unlocked)")
        #expect(unlocked.stderr.contains("was read without its lock"), "the answer says it was read without the lock\n\(unlocked)")
        let report = (try unlocked.jsonObject()["models"] as? [[String: Any]])?.first
        #expect((report?["readWithoutLock"] as? String)?.contains("not writable by this user") == true, "\(unlocked)")

        let download = try Self.runAsNobody(w, binary: binary, ["download", Self.id, "--retries", "0"], catalog: catalog)
        #expect(download.status != 0 && download.stderr.contains("read-only for this user"), "\(download)")
        let delete = try Self.runAsNobody(w, binary: binary, ["delete", Self.id], catalog: catalog)
        #expect(delete.status != 0 && delete.stderr.contains("read-only for this user"), "\(delete)")
        // The code says so too, whatever the command (attack run 4: import said `io`).
        for command in [["delete", Self.id], ["download", Self.id, "--retries", "0"], ["import", Self.id, w.nginx.mirror + "/ro"]] {
            let r = try Self.runAsNobody(w, binary: binary, command + ["--json"], catalog: catalog)
            #expect(r.status == 1 && r.stdout.contains("\"code\":\"readOnly\""), "\(command): \(r)")
        }

        let after = Disk.tree(w.store).filter { !$0.hasSuffix("/\(Self.id).lock 0") }
        #expect(after == before.filter { !$0.hasSuffix("/\(Self.id).lock 0") }, "the store did not change: \(after) vs \(before)")
        // The owner still has an intact, verifying install.
        let owner = try w.run(["verify", Self.id], catalog: catalog)
        #expect(owner.status == 0, "\(owner)")
    }
}
