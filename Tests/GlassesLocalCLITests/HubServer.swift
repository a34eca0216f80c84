import Foundation
import GlassesTestSupport
import Testing

/// Tests/Tools/hubserver.py for the command-line tests: a Hugging-Face-Hub-shaped origin
/// (LFS files answered with a 302 and a body, to a signed URL on a CDN on another port) and
/// that CDN (strong ETags, ranges, signed URLs that expire), configured over its control
/// endpoints; the keys are those its docstring lists.
final class HubServer {
    static let script = PackageRoot.path() + "/Tests/Tools/hubserver.py"
    private let server: PortServer
    /// The CDN's port (the process's second listening socket).
    let cdnPort: Int
    var origin: String { "http://127.0.0.1:\(server.port)" }

    init() throws {
        server = try PortServer(python: Self.script, alsoPorts: ["CDN"])
        cdnPort = try #require(server.ports["CDN"])
    }

    func stop() { server.stop() }

    /// Serves `folder` as the repository `repo` at `revision` (`main` names it too), beside
    /// the repositories served before; files of `lfsMin` bytes or more are LFS files,
    /// answered through the CDN. With `token`, a gated repository: its files and its model
    /// information answer 401 without that token and 403 with another.
    func serve(repo: String, revision: String, folder: String, lfsMin: Int, token: String? = nil) throws {
        var spec: [String: Any] = ["repo": repo, "revision": revision, "folder": folder, "lfs_min": lfsMin]
        if let token { spec["token"] = token }
        try post("/_repo", spec)
    }

    /// Merges `settings` into the server's (token, too_many, renames, drop, hold, …); the
    /// fault counters start again.
    func configure(_ settings: [String: Any]) throws { try post("/_config", settings) }

    /// Every signed URL issued so far is expired from now on (new ones are valid).
    func expire() throws { try post("/_expire", [:]) }

    /// Forgets the request log (so the next run's requests are all that `log()` holds).
    func clearLog() throws { try post("/_clear", [:]) }

    /// The requests both servers answered since the last `clearLog()`, in arrival order.
    func log() throws -> [ServedRequest] {
        let (status, body) = try server.request("GET", "/_log")
        try #require(status == 200, "GET /_log answered \(status)")
        struct Log: Decodable { var entries: [ServedRequest] }
        return try JSONDecoder().decode(Log.self, from: Data(body)).entries
    }

    private func post(_ path: String, _ object: [String: Any]) throws {
        let (status, body) = try server.request("POST", path, body: [UInt8](try JSONSerialization.data(withJSONObject: object)))
        try #require(status == 200, "POST \(path) answered \(status): \(String(decoding: body, as: UTF8.self))")
    }
}

extension ServedRequest: CustomStringConvertible {
    var isCDN: Bool { server == "cdn" }

    /// The path and query a request asked for (a signed URL's, for the CDN).
    var target: String { (path ?? "") + "?" + (query ?? "") }

    /// Whether it asked for the file `name` (the last component of its path).
    func isFor(_ name: String) -> Bool { path?.hasSuffix("/" + name) == true }

    public var description: String {
        "\(server ?? "-") \(method ?? "-") \(path ?? "-") → \(status.map(String.init) ?? "-") range=\(range ?? "-") "
            + "if-range=\(ifRange ?? "-") auth=\(authorization == nil ? "none" : "yes") sent=\(sent)"
    }
}
