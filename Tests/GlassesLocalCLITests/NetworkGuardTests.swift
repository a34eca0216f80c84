import Foundation
import GlassesTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The network guard itself (docs/testing.md, "Nothing reaches past loopback"; Tests/Support/NetworkGuard.swift).
/// Its suite alone does not carry `.networkGuard`: its test reaches past loopback on purpose
/// and takes its attempts off the run's final check.
@Suite("The network guard: no test reaches past loopback", .ownThreads)
struct NetworkGuardTests {
    static let hash = String(repeating: "ab", count: 32)

    @Test("glasses-local started by a test fetches a host past loopback through the guard, which refuses and logs it; loopback stays direct")
    func offLoopbackIsRefusedAndLoggedLoopbackIsDirect() throws {
        try #require(NetworkGuard.problem == nil, "the guard did not start: \(NetworkGuard.problem ?? "")")
        let sb = try Sandbox()
        defer { sb.remove() }
        let file = #"{"path": "a.bin", "size": 10, "sha256": "\#(Self.hash)"}"#

        // Past loopback: the guard answers (403 to the CONNECT) and logs the target.
        let away = try sb.write("away.json", Fixtures.catalog(id: "away", files: file, baseURL: "https://guard-test.invalid/m/"))
        let refused = try sb.run(["--catalog", away, "download", "away", "--retries", "0"])
        #expect(refused.status == 1 && refused.stderr.contains("the proxy refused") && refused.stderr.contains("403"), "\(refused)")
        #expect(NetworkGuard.claimAttemptsOfThisTest() == ["CONNECT guard-test.invalid:443"])

        // Loopback: straight to the port (nothing listens there), never through the guard.
        let port = try ClosedPort()
        let near = try sb.write("near.json", Fixtures.catalog(id: "near", files: file, baseURL: "http://127.0.0.1:\(port.number)/m/"))
        let direct = try sb.run(["--catalog", near, "download", "near", "--retries", "0"])
        #expect(direct.status != 0 && direct.stderr.contains("127.0.0.1 port \(port.number)") && !direct.stderr.contains("403"),
                "\(direct)")
        #expect(NetworkGuard.claimAttemptsOfThisTest().isEmpty)
    }

    @Test("the runner's own transfers (libcurl reads this process's environment) and every child go through the guard; a child with a proxy of its own keeps it")
    func environments() {
        let proxy = ProcessInfo.processInfo.environment["https_proxy"] ?? ""
        #expect(proxy.hasPrefix("http://127.0.0.1:"))
        for name in ["http_proxy", "all_proxy"] { #expect(ProcessInfo.processInfo.environment[name] == proxy, "\(name)") }
        #expect(ProcessInfo.processInfo.environment["no_proxy"] == "localhost,127.0.0.1,::1")
        for name in ["HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"] {
            #expect(ProcessInfo.processInfo.environment[name] == nil, "\(name) would override or confuse the guard")
        }
        let child = NetworkGuard.guarded(["PATH": "/usr/bin"])
        #expect(child["https_proxy"] == proxy && child["http_proxy"] == proxy && child["all_proxy"] == proxy)
        #expect(child["no_proxy"] == "localhost,127.0.0.1,::1" && child["PATH"] == "/usr/bin")
        let own = ["https_proxy": "http://127.0.0.1:1"]
        #expect(NetworkGuard.guarded(own) == own)
    }
}

/// A loopback port bound and not listened on while this lives: a connection is refused.
private final class ClosedPort {
    let number: Int
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard fd >= 0, bound else {
            if fd >= 0 { close(fd) }
            throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "bind 127.0.0.1:0: errno \(errno)"])
        }
        self.fd = fd
        number = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
