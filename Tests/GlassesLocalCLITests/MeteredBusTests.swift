import Foundation
import GlassesTestSupport
import Testing

/// `prefetch --require-unmetered` against a system bus that accepts and never answers
/// (Tests/Tools/fakebus.py `silent`): sd-bus alone would wait out its 90-second
/// authentication timeout; the question has 2 s, then the state is unknown.
@Suite("Metered state: a bus that never answers", .ownThreads, .networkGuard)
struct MeteredBusTests {
    @Test("a silent bus: the run goes on with the state unknown, saying the bus did not answer in time; offline, the bus is never asked")
    func silentBus() throws {
        let w = try World(); defer { w.remove() }
        try w.addModel("m", files: [("a.bin", 100)])
        let catalog = try w.filesCatalog("m", id: "m", baseURL: "http://127.0.0.1:9/m/")
        let socket = w.root + "/bus-silent"
        let bus = try PortServer(python: PackageRoot.path() + "/Tests/Tools/fakebus.py", [socket, "silent"])
        defer { bus.stop() }
        let env = ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(socket)"]

        // Well under sd-bus's own 90 s: a run still waiting on the bus is killed as a failure.
        let r = try w.run(["prefetch", "--require-unmetered", "--dry-run"], catalog: catalog, env: env, timeout: 60)
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("unknown") && r.stdout.contains("did not answer within 2 s"), "\(r)")
        #expect(FileManager.default.fileExists(atPath: socket + ".accepted"), "the bus was asked")

        try? FileManager.default.removeItem(atPath: socket + ".accepted")
        let offline = try w.run(["prefetch", "--require-unmetered", "--offline"], catalog: catalog, env: env, timeout: 60)
        let said = offline.stdout + offline.stderr
        #expect(offline.status == 0, "\(offline)")
        #expect(!said.contains("metered"), "offline, whether the network costs is not asked: \(offline)")
        #expect(!FileManager.default.fileExists(atPath: socket + ".accepted"), "offline, nothing connected to the bus")
    }
}
