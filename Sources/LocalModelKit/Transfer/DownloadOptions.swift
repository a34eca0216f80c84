/// How a download behaves.
public struct DownloadOptions: Sendable {
    /// Retries, timeouts, the rate limit, the CA file, credentials and the network switch.
    public var policy = TransferPolicy()
    /// Replaces the origin (scheme://host:port) of every source URL; `HF_ENDPOINT`
    /// (`policy.hubEndpoint`) is then not used.
    public var mirror: String?
    /// Shortest interval between two progress events.
    public var progressInterval: Double = 0.25
    /// Only sources of this kind are tried (`--source`); nil tries the catalog's sources in order.
    public var source: SourceKind?

    /// Options; the defaults are the command's (`TransferPolicy()` reads nothing from the
    /// environment: ``TransferPolicy/init(environment:)`` does).
    public init(policy: TransferPolicy = TransferPolicy(), mirror: String? = nil, progressInterval: Double = 0.25,
                source: SourceKind? = nil) {
        self.policy = policy
        self.mirror = mirror
        self.progressInterval = progressInterval
        self.source = source
    }
}
