import Foundation
import GlassesTestSupport
import Testing

/// The queries only read (issue 27, item 2). A voice bundle placed by hand in its folder is
/// reported (`placedBundle`), never hashed or adopted by a query; the store they look at
/// stays as it was. Proved with the system calls themselves: each query runs under strace,
/// and the trace may hold no rename, link, unlink, mkdir, fsync or write into the store, no
/// file created there, and no open of a placed file (hashing needs one; the report needs
/// only `lstat`). The one exception is SQLite's shared-memory index (`records.sqlite3-shm`),
/// which every reader of a WAL database maps and initialises: it holds no records.
@Suite("Queries only read", .ownThreads, .networkGuard)
struct QueriesOnlyReadTests {
    static let queries: [[String]] = [["list", "--json"], ["info", VoiceCommandTests.id, "--json"],
                                      ["fit", VoiceCommandTests.id, "--json"], ["auto", "--json"],
                                      ["history", "--json"], ["voice", "status", "--json"]]

    /// System calls that change a file system whatever their arguments.
    static let changing: Set<String> = ["rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
                                        "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "fsync", "fdatasync", "syncfs",
                                        "sync_file_range", "fallocate", "truncate", "utimensat", "chmod", "fchmod",
                                        "fchmodat", "fchmodat2", "mknod", "mknodat"]
    /// System calls that write through a descriptor (strace -y names its file).
    static let writing: Set<String> = ["write", "pwrite64", "writev", "pwritev", "pwritev2", "ftruncate",
                                       "copy_file_range", "sendfile"]

    /// The trace's lines that change the store: `store` is its folder, `placed` the bundle's.
    static func violations(_ trace: String, store: String, placed: String) -> [String] {
        let sqliteFiles = ["records.sqlite3", "records.sqlite3-wal", "records.sqlite3-shm"].map { store + "/" + $0 }
        var found: [String] = []
        for line in trace.split(separator: "\n").map(String.init) {
            guard let name = line.firstMatch(of: /^\d+\s+(?:<\.\.\. )?(\w+)[( ]/)?.1 else { continue }
            let call = String(name)
            if changing.contains(call) && line.contains(store) {
                found.append(line)
            } else if writing.contains(call), let fd = line.firstMatch(of: /^\d+\s+\w+\(\d+<([^>]*)>/)?.1,
                      String(fd).hasPrefix(store + "/") && String(fd) != store + "/records.sqlite3-shm" {
                found.append(line)
            } else if call == "openat" || call == "open" {
                guard let path = line.firstMatch(of: /"([^"]*)"/)?.1.description, path.hasPrefix(store) else { continue }
                if path.hasPrefix(placed + "/") && !line.contains("O_DIRECTORY") && !line.contains("= -1 ") {
                    found.append(line)   // a placed file opened: read (hashed), or written
                } else if line.contains("O_CREAT") && !sqliteFiles.contains(path) {
                    found.append(line)
                }
            }
        }
        return found
    }

    /// Every file of the store with its bytes, but SQLite's shared-memory index.
    static func contents(of store: String) throws -> [String: Data] {
        var out: [String: Data] = [:]
        let walker = try #require(FileManager.default.enumerator(atPath: store))
        for case let path as String in walker where path != "records.sqlite3-shm" {
            var folder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: store + "/" + path, isDirectory: &folder) else { continue }
            out[path] = folder.boolValue ? Data() : try Data(contentsOf: URL(fileURLWithPath: store + "/" + path))
        }
        return out
    }

    @Test("list, info, fit, auto, history and voice status on a store with records and a placed voice bundle: the bundle reported, nothing hashed, created, renamed, synced or written")
    func queriesWriteNothing() throws {
        guard let strace = ["/usr/bin/strace", "/bin/strace"].first(where: FileManager.default.isExecutableFile) else {
            Issue.record("strace is missing: Scripts/bootstrap installs it")
            return
        }
        let w = try World(); defer { w.remove() }
        let (catalog, _, tree) = try VoiceCommandTests.voiceCatalogs(w)
        // A store with records and a history, then the bundle as an app copies it in.
        let doctor = try w.run(["doctor"], catalog: catalog)
        #expect(FileManager.default.fileExists(atPath: w.store + "/records.sqlite3"), "\(doctor)")
        let placed = w.store + "/voices/" + VoiceCommandTests.id
        try FileManager.default.createDirectory(atPath: w.store + "/voices", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: tree, toPath: placed)
        let before = try Self.contents(of: w.store)

        for query in Self.queries {
            let trace = w.root + "/query.strace"
            defer { try? FileManager.default.removeItem(atPath: trace) }
            let r = try Sandbox.runProcess(strace, ["-f", "-y", "-qq", "-e", "trace=%file,%desc", "-o", trace,
                                                    try w.binary, "--catalog", catalog, "--store", w.store] + query,
                                           environment: w.environment(), ioDirectory: w.root + "/io", currentDirectory: w.cwd)
            #expect(r.status == 0, "\(query): \(r)")
            if query == ["list", "--json"] {
                let models = try r.jsonObject()["models"] as? [[String: Any]] ?? []
                #expect(models.first?["placedBundle"] as? Bool == true, "the bundle is reported as placed: \(r.stdout)")
            }
            let text = try String(contentsOfFile: trace, encoding: .utf8)
            if query.first == "list" || query.first == "voice" {
                #expect(text.contains(placed + "/model.onnx"), "\(query) looked at the placed bundle (the trace names it)")
            }
            let bad = Self.violations(text, store: w.store, placed: placed)
            #expect(bad.isEmpty, "\(query) changed the store or read a placed file:\n\(bad.prefix(20).joined(separator: "\n"))")
        }
        #expect(try Self.contents(of: w.store) == before, "every file of the store, and the records, as they were")
    }
}
