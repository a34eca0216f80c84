import Foundation
import GlassesTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `glasses-local mirror DIR`: one device's installed models become a static mirror
/// (another nginx over DIR), and a second device pointed at it with `--mirror` installs
/// from it without a single request to the origin.
@Suite("A mirror for a site or a fleet", .ownThreads, .networkGuard)
struct MirrorCommandTests {
    @Test("mirror DIR lays installed models out under their URL paths (hard links); a second device with --mirror fetches nothing from the origin")
    func secondDeviceUsesTheMirror() throws {
        let origin = try World(); defer { origin.remove() }
        try origin.addModel("pf", files: [("weights.bin", 300 * 1024), ("sub/config.json", 700)])
        let catalog = try origin.filesCatalog("pf", id: "pf")
        let first = try origin.run(["download", "pf"], catalog: catalog)
        try #require(first.status == 0, "\(first)")

        // The site's mirror: a second nginx over a folder that `mirror` fills.
        let site = try World(); defer { site.remove() }
        let m = try origin.run(["mirror", site.nginx.mirror, "--json"], catalog: catalog)
        #expect(m.status == 0, "\(m)")
        let report = (try m.jsonObject()["models"] as? [[String: Any]])?.first
        #expect(report?["modelId"] as? String == "pf" && report?["linked"] as? Int == 2, "hard links on one filesystem: \(m)")
        var a = stat(), b = stat()
        #expect(lstat(origin.installFolder("pf") + "/weights.bin", &a) == 0 && lstat(site.nginx.mirror + "/pf/weights.bin", &b) == 0
                && a.st_ino == b.st_ino, "the mirror's file is the installed one, linked")

        origin.nginx.clearLog()
        let device = origin.root + "/device-2"
        origin.store = device
        let second = try origin.run(["download", "pf", "--mirror", "http://127.0.0.1:\(site.nginx.port)"], catalog: catalog)
        #expect(second.status == 0, "\(second)")
        origin.expectInstalledMatchesMirror("pf", folder: "pf")
        #expect(origin.nginx.accessLog().isEmpty, "the origin saw nothing: \(origin.nginx.accessLog())")
        #expect(site.nginx.accessLog().count == 2, "the mirror served both files: \(site.nginx.accessLog())")
    }

    @Test("a model that is not installed, or an unknown id, is said so")
    func notInstalled() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("pf", files: [("weights.bin", 1000)])
        let catalog = try w.filesCatalog("pf", id: "pf")
        let r = try w.run(["mirror", w.root + "/site", "pf"], catalog: catalog)
        #expect(r.status == 0 && r.stdout.contains("pf: skipped (not installed)"), "\(r)")
        let unknown = try w.run(["mirror", w.root + "/site", "nope"], catalog: catalog)
        #expect(unknown.status == 5, "\(unknown)")
    }
}
