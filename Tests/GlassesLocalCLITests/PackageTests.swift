import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// dpkg-deb, which every Debian system has (the package `dpkg` is essential).
private let dpkgDeb = ["/usr/bin/dpkg-deb", "/bin/dpkg-deb"].first { FileManager.default.isExecutableFile(atPath: $0) }

/// The Debian package `Scripts/package` makes: what it holds, and the tool as installed from
/// it into a scratch root with dpkg (`--root`), run, used for a download from a private nginx,
/// then removed and purged, which must leave a user's store exactly as it was.
///
/// The packages: `$GLASSES_LOCAL_DEB` and `$GLASSES_LOCAL_DBGSYM_DEB` when set (`Scripts/package
/// --check` sets them to the shipping build's packages: lintian has passed them, and the
/// binary must name the commit it was built from, `$GLASSES_LOCAL_DEB_COMMIT`); otherwise `Scripts/package --binary` packages the
/// binary this test run built (a debug build, its Swift runtime from the toolchain), once per
/// run, into `.build/package-tests`.
@Suite("The Debian package", .ownThreads, .networkGuard,
       .enabled(if: dpkgDeb != nil, "dpkg-deb is missing: not a Debian system, so there is nothing to build a package with"))
struct PackageTests {
    struct Packages: Sendable {
        var deb: String
        var dbgsym: String
        /// The commit the shipping build embedded (`git describe` when it was built); nil for
        /// the test build's package, which names none.
        var commit: String?
    }

    /// Built once per test process, whichever test asks first.
    static let built: Result<Packages, HarnessError> = {
        let env = ProcessInfo.processInfo.environment
        if let deb = env["GLASSES_LOCAL_DEB"], !deb.isEmpty {
            guard let dbgsym = env["GLASSES_LOCAL_DBGSYM_DEB"], FileManager.default.fileExists(atPath: deb),
                  FileManager.default.fileExists(atPath: dbgsym) else {
                return .failure(HarnessError("GLASSES_LOCAL_DEB=\(deb) needs GLASSES_LOCAL_DBGSYM_DEB, and both files"))
            }
            guard let commit = env["GLASSES_LOCAL_DEB_COMMIT"], !commit.isEmpty else {
                return .failure(HarnessError("GLASSES_LOCAL_DEB=\(deb) needs GLASSES_LOCAL_DEB_COMMIT, the commit it was built from"))
            }
            return .success(Packages(deb: deb, dbgsym: dbgsym, commit: commit))
        }
        guard let binary = CLIBinary.path else { return .failure(HarnessError("glasses-local binary not found")) }
        let output = PackageRoot.path() + "/.build/package-tests"
        let r: CLIResult
        do {
            r = try World.tool(PackageRoot.path() + "/Scripts/package", ["--binary", binary, "--output", output], timeout: 600)
        } catch {
            return .failure(HarnessError("Scripts/package --binary did not run: \(error)"))
        }
        guard r.status == 0 else { return .failure(HarnessError("Scripts/package --binary failed: \(r)")) }
        let paths = r.stdout.split(separator: "\n").map(String.init)
        guard paths.count == 2 else { return .failure(HarnessError("Scripts/package printed \(r.stdout)")) }
        return .success(Packages(deb: paths[0], dbgsym: paths[1], commit: nil))
    }()

    static func packages() throws -> Packages {
        try built.get()
    }

    static func tool(_ name: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> CLIResult {
        let path = try #require(["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"].map { $0 + name }.first { FileManager.default.isExecutableFile(atPath: $0) },
                                "\(name) not found (Scripts/bootstrap installs it)", sourceLocation: sourceLocation)
        return try World.tool(path, arguments, timeout: 300)
    }

    static func field(_ deb: String, _ name: String) throws -> String {
        try tool("dpkg-deb", ["--field", deb, name]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `readelf -n`'s GNU build-id of an ELF file.
    static func buildID(_ path: String) throws -> String? {
        let r = try tool("readelf", ["-n", path])
        return r.stdout.split(separator: "\n").first { $0.contains("Build ID:") }.map { String($0.split(separator: " ").last ?? "") }
    }

    /// Every entry under `root` with its type, size, inode, modification time and, for a file,
    /// its SHA-256: what "untouched" means for a store.
    static func snapshot(_ root: String) throws -> [String] {
        try Disk.tree(root).map { line in
            let path = root + "/" + Disk.path(ofTreeLine: line)
            var st = stat()
            guard lstat(path, &st) == 0 else { return line + " (gone)" }
            let hash = line.hasPrefix("f ") ? try World.sha256sum(path) : ""
            return "\(line) ino=\(st.st_ino) mtime=\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec) mode=\(String(st.st_mode, radix: 8)) \(hash)"
        }
    }

    @Test("the package holds the tool, its man page, completions, user units, copyright and changelog, and nothing else; the -dbgsym package its debug file by build-id")
    func contents() throws {
        let p = try Self.packages()
        let sb = try Sandbox(); defer { sb.remove() }
        let arch = try Self.tool("dpkg", ["--print-architecture"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let version = try Self.field(p.deb, "Version")

        // Control fields.
        #expect(try Self.field(p.deb, "Package") == "glasses-local")
        #expect(try Self.field(p.deb, "Architecture") == arch)
        #expect(p.deb.hasSuffix("/glasses-local_\(version)_\(arch).deb"), "\(p.deb)")
        #expect(try Self.field(p.deb, "Maintainer").contains("<"))
        #expect(try Self.field(p.deb, "Section") == "utils" && Self.field(p.deb, "Priority") == "optional")
        #expect(!(try Self.field(p.deb, "Description")).isEmpty)
        let depends = try Self.field(p.deb, "Depends")
        // Linked (dpkg-shlibdeps) and opened with dlopen on first use (Scripts/package).
        for package in ["libc6", "libsqlite3-0", "libssl3", "libcurl4", "libarchive13", "libbz2-1.0"] {
            #expect(depends.contains(package + " (>= "), "Depends: \(depends)")
        }
        #expect(try Self.field(p.deb, "Recommends").hasPrefix("libsystemd0 (>= "))

        // The files: exactly these (nothing in /etc, /var or a home folder: no configuration
        // and no maintainer scripts, so installing and removing cannot reach a store).
        let listing = try Self.tool("dpkg-deb", ["--contents", p.deb])
        let files = listing.stdout.split(separator: "\n").filter { !$0.hasPrefix("d") }.map { String($0.split(separator: " ").last ?? "").replacingOccurrences(of: "./", with: "/") }
        #expect(Set(files) == [
            "/usr/bin/glasses-local",
            "/usr/share/man/man1/glasses-local.1.gz",
            "/usr/share/bash-completion/completions/glasses-local",
            "/usr/share/zsh/vendor-completions/_glasses-local",
            "/usr/share/fish/vendor_completions.d/glasses-local.fish",
            "/usr/lib/systemd/user/glasses-local-prefetch.service",
            "/usr/lib/systemd/user/glasses-local-prefetch.timer",
            "/usr/share/doc/glasses-local/copyright",
            "/usr/share/doc/glasses-local/changelog.Debian.gz",
            "/usr/share/lintian/overrides/glasses-local",
        ], "\(listing.stdout)")
        let control = try Self.tool("dpkg-deb", ["--info", p.deb])
        for script in ["preinst", "postinst", "prerm", "postrm", "conffiles"] {
            #expect(!control.stdout.contains(" \(script) "), "no \(script): \(control.stdout)")
        }

        // What each file holds, from the extracted tree.
        let x = sb.root + "/x"
        #expect(try Self.tool("dpkg-deb", ["-x", p.deb, x]).status == 0)
        let binary = x + "/usr/bin/glasses-local"
        func run(_ arguments: [String]) throws -> CLIResult {
            try Sandbox.runProcess(binary, arguments, environment: sb.environment([:]), ioDirectory: sb.root + "/io")
        }
        #expect(try run(["--version"]).stdoutLines.first == "glasses-local " + version.split(separator: "-").dropLast().joined(separator: "-"))
        let page = try Self.tool("gzip", ["-dc", x + "/usr/share/man/man1/glasses-local.1.gz"])
        #expect(page.stdout == (try run(["manpage"])).stdout, "the installed page is the installed binary's own")
        let man = try Self.tool("man", ["--warnings", "-l", x + "/usr/share/man/man1/glasses-local.1.gz"])
        #expect(man.status == 0 && man.stderr.isEmpty && man.stdout.contains("glasses-local"), "\(man)")
        for (shell, path) in [("bash", "bash-completion/completions/glasses-local"), ("zsh", "zsh/vendor-completions/_glasses-local"),
                              ("fish", "fish/vendor_completions.d/glasses-local.fish")] {
            let installed = try String(contentsOfFile: x + "/usr/share/" + path, encoding: .utf8)
            #expect(installed == (try run(["completions", shell])).stdout, "\(shell) completion")
        }
        let bash = try Self.tool("bash", ["-c", "source \(x)/usr/share/bash-completion/completions/glasses-local && complete -p glasses-local"])
        #expect(bash.stdout.contains("-F _glasses_local glasses-local"), "\(bash)")

        // The user units are Scripts/schedule's, running the installed binary.
        for unit in ["glasses-local-prefetch.service", "glasses-local-prefetch.timer"] {
            let shipped = try String(contentsOfFile: PackageRoot.path() + "/Scripts/schedule/" + unit, encoding: .utf8)
            let installed = try String(contentsOfFile: x + "/usr/lib/systemd/user/" + unit, encoding: .utf8)
            func settings(_ text: String) -> [String] { text.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init) }
            #expect(settings(installed) == settings(shipped.replacingOccurrences(of: "%h/.local/bin/glasses-local", with: "/usr/bin/glasses-local")), "\(unit)")
        }
        #expect(try String(contentsOfFile: x + "/usr/lib/systemd/user/glasses-local-prefetch.service", encoding: .utf8)
            .contains("\nExecStart=/usr/bin/glasses-local prefetch "))

        // Copyright in DEP-5; the changelog's newest entry is this version; every override has its reason.
        let copyright = try String(contentsOfFile: x + "/usr/share/doc/glasses-local/copyright", encoding: .utf8)
        #expect(copyright.hasPrefix("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"))
        #expect(copyright.contains("\n\nFiles: *\nCopyright: ") && copyright.contains("\nLicense: "))
        let changelog = try Self.tool("gzip", ["-dc", x + "/usr/share/doc/glasses-local/changelog.Debian.gz"])
        #expect(changelog.stdout.hasPrefix("glasses-local (\(version)) "), "\(changelog.stdout.prefix(200))")
        let overrides = try String(contentsOfFile: x + "/usr/share/lintian/overrides/glasses-local", encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for (i, line) in overrides.enumerated() where !line.isEmpty && !line.hasPrefix("#") {
            #expect(i > 0 && overrides[i - 1].hasPrefix("# "), "the override '\(line)' has no reason above it")
        }

        // The debug symbols: the -dbgsym package holds the file gdb finds by the binary's build-id.
        let id = try #require(try Self.buildID(binary), "the binary has no build-id")
        #expect(try Self.field(p.dbgsym, "Package") == "glasses-local-dbgsym")
        #expect(try Self.field(p.dbgsym, "Depends") == "glasses-local (= \(version))")
        #expect(try Self.field(p.dbgsym, "Build-Ids") == id)
        let dx = sb.root + "/dbgsym"
        #expect(try Self.tool("dpkg-deb", ["-x", p.dbgsym, dx]).status == 0)
        let debugFile = dx + "/usr/lib/debug/.build-id/\(id.prefix(2))/\(id.dropFirst(2)).debug"
        #expect(try Self.buildID(debugFile) == id)
        let sections = try Self.tool("readelf", ["-S", "-W", debugFile]).stdout
        #expect(sections.contains(".debug_info") && sections.contains(".symtab"), "the debug file has the DWARF and the symbols")
        let stripped = try Self.tool("readelf", ["-S", "-W", binary]).stdout
        #expect(!stripped.contains(".symtab") && !stripped.contains(".debug_info") && stripped.contains(".gnu_debuglink"), "the binary is stripped and links to it")
    }

    @Test("installed with dpkg into a scratch root: --version, list and a download work; removing and purging the package leave the user's store untouched")
    func installRunRemove() throws {
        let p = try Self.packages()
        let w = try World(); defer { w.remove() }
        let root = w.root + "/root"
        for dir in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "var/log", "home/user"] {
            try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
        }
        _ = FileManager.default.createFile(atPath: root + "/var/lib/dpkg/status", contents: nil)
        // The scratch root's database knows none of the libraries (--force-depends); its own log,
        // not the host's; --force-not-root so the test also runs as a user; every path included
        // whatever the host's dpkg.cfg.d excludes (a container's "no man pages" rule).
        let dpkg = ["--root=" + root, "--log=" + root + "/var/log/dpkg.log", "--force-not-root", "--path-include=*"]
        let install = try Self.tool("dpkg", dpkg + ["--force-depends", "--install", p.deb, p.dbgsym])
        try #require(install.status == 0, "\(install)")
        let binary = root + "/usr/bin/glasses-local"
        #expect(FileManager.default.isExecutableFile(atPath: binary))

        // The user: a home inside the scratch root, the default store under it.
        let home = root + "/home/user"
        let store = home + "/.local/share/extentos/models"
        let env = ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"]
        func run(_ arguments: [String]) throws -> CLIResult {
            try Sandbox.runProcess(binary, arguments, environment: env, ioDirectory: w.root + "/io", currentDirectory: home)
        }
        let version = try run(["--version"])
        #expect(version.status == 0 && version.stdoutLines.count == 3, "\(version)")
        let upstream = try Self.field(p.deb, "Version").split(separator: "-").dropLast().joined(separator: "-")
        #expect(version.stdoutLines.first == "glasses-local \(upstream)", "\(version)")
        // Scripts/ship embedded the commit it built (the test build names none).
        #expect(version.stdoutLines.dropFirst().first == "commit " + (p.commit ?? "unknown"), "\(version)")
        let list = try run(["list"])
        #expect(list.status == 0 && list.stdout.contains("local-qwen3-1.7b") && list.stdout.contains("kokoro-en-v0_19"), "\(list)")

        // A download from the private nginx, into the default store.
        let data = try w.addModel("m1", files: [("weights.bin", 3 << 20), ("config.json", 1234)])
        let catalog = try w.filesCatalog("m1", id: "m1")
        let download = try run(["--catalog", catalog, "download", "m1", "--no-progress"])
        try #require(download.status == 0, "\(download)")
        for (path, bytes) in data {
            #expect(FileManager.default.contents(atPath: store + "/m1/" + path) == bytes, "\(path) installed byte for byte")
        }
        let listed = try run(["--catalog", catalog, "list", "--json"])
        let models = try #require(try listed.jsonObject()["models"] as? [[String: Any]])
        #expect(models.first { $0["id"] as? String == "m1" }?["isInstalled"] as? Bool == true, "\(listed)")

        // Removing, then purging, the package: its files go, the store stays as it was.
        let before = try Self.snapshot(store)
        try #require(before.count > 5, "\(before)")
        let remove = try Self.tool("dpkg", dpkg + ["--remove", "glasses-local-dbgsym", "glasses-local"])
        #expect(remove.status == 0, "\(remove)")
        #expect(!FileManager.default.fileExists(atPath: binary))
        #expect(!FileManager.default.fileExists(atPath: root + "/usr/share/man/man1/glasses-local.1.gz"))
        let purge = try Self.tool("dpkg", dpkg + ["--purge", "glasses-local"])
        #expect(purge.status == 0, "\(purge)")
        #expect(Disk.tree(root + "/usr").allSatisfy { $0.hasPrefix("d ") }, "package files left: \(Disk.tree(root + "/usr"))")
        #expect(try Self.snapshot(store) == before, "removing the package changed the store")
        #expect(Disk.tree(home).filter { !$0.hasPrefix("d ") }.allSatisfy { $0.contains(".local/share/extentos/models/") },
                "nothing but the store in the user's home: \(Disk.tree(home))")
    }
}
