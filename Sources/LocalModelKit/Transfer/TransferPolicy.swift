import FoundationEssentials

/// How transfers behave: parallelism, timeouts, retries. Defaults suit a phone or a
/// laptop on a flaky network; tests shrink the delays.
public struct TransferPolicy: Sendable, Equatable {
    /// Files of one model fetched at once: the number for big files, and every file when
    /// `adaptiveParallelism` is off (`--parallel N`).
    public var parallelFiles = 4
    /// Let the number of connections follow the work: many small files are mostly waiting
    /// for round trips, so they get more connections (up to `maxParallelFiles`); a few big
    /// files keep `parallelFiles`. Over https, small files go further: up to 100 at once, as
    /// HTTP/2 streams on one connection where the server offers it, while each big file
    /// (1 MiB or more) has a connection of its own.
    public var adaptiveParallelism = true
    /// The most files fetched at once when the work adapts (`adaptiveParallelism`).
    public var maxParallelFiles = 16
    /// Seconds under `lowSpeedLimitBytesPerSecond` before a transfer counts as stalled (P4).
    public var stallTimeout: Double = 30
    /// The speed under which a transfer counts as stalled (1 KiB/s).
    public var lowSpeedLimitBytesPerSecond = 1024
    /// Seconds a connection (TCP and TLS) may take.
    public var connectTimeout: Double = 20
    /// Redirects followed per request (P10: at most 5, never from https to http).
    public var maxRedirects = 5
    /// Attempts in a row that made no progress before giving up. An attempt that moved
    /// bytes resets the count, so a flaky link still finishes.
    public var retryBudget = 6
    /// First backoff delay; doubles each time, up to `maxBackoff`, with ±20% jitter.
    public var baseBackoff: Double = 1
    /// The longest backoff between two attempts, in seconds.
    public var maxBackoff: Double = 60
    /// The longest `Retry-After` honoured; a server asking for more fails the download as
    /// temporary (exit 75) with the server's delay in the message.
    public var maxRetryAfter: Double = 300
    /// Bytes per second for the whole download, nil for no limit (prefetch's `--rate-limit`).
    public var maxBytesPerSecond: Int64?
    /// The `User-Agent` of every request.
    public var userAgent = "glasses-local/0.1 (+https://extentos.dev)"
    /// Extra trust for a private mirror or a TLS-intercepting proxy: a PEM bundle used
    /// instead of the system's. Defaults to `$EXTENTOS_CA_FILE`, else curl's own
    /// conventions `$CURL_CA_BUNDLE` and `$SSL_CERT_FILE` (Debian's libcurl reads neither
    /// by itself). Verification stays on either way.
    public var caFile: String?
    /// The Hugging Face token and netrc (`TransferCredentials`): where they are found, and
    /// the origins the token may go to.
    package var credentials: TransferCredentials
    /// Why the network is off (`--offline`, `EXTENTOS_OFFLINE=1`, `HF_HUB_OFFLINE=1`,
    /// `TRANSFORMERS_OFFLINE=1`), or nil when it may be used. Off, a transfer refuses before
    /// opening any connection.
    public var offlineBy: String?
    /// `HF_ENDPOINT`: where sources on `https://huggingface.co` are fetched instead (a Hub
    /// mirror), unless a `--mirror` replaces every origin. Nil when unset.
    package var hubEndpoint: HubEndpoint?

    /// The defaults, with what the environment decides: the CA file, the credentials'
    /// places, the network switch and `HF_ENDPOINT`.
    /// - Parameter environment: the process environment (tests give their own).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        caFile = [environment["EXTENTOS_CA_FILE"], environment["CURL_CA_BUNDLE"], environment["SSL_CERT_FILE"]]
            .compactMap { $0 }.first { !$0.isEmpty }
        credentials = TransferCredentials(environment: environment)
        offlineBy = Self.offlineSwitch(environment)
        hubEndpoint = HubEndpoint(environment: environment)
    }

    /// The variable that switches the network off: `EXTENTOS_OFFLINE`, or the Hub client's
    /// `HF_HUB_OFFLINE`, or `TRANSFORMERS_OFFLINE` (`1`, `ON`, `YES` or `TRUE`); nil when none
    /// does. As in the Hub client (`HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE`),
    /// `TRANSFORMERS_OFFLINE` is read only when `HF_HUB_OFFLINE` is unset or empty.
    public static func offlineSwitch(_ environment: [String: String]) -> String? {
        if EnvironmentFlag.isTrue(environment["EXTENTOS_OFFLINE"]) { return "EXTENTOS_OFFLINE=\(environment["EXTENTOS_OFFLINE"] ?? "1")" }
        let hub = environment["HF_HUB_OFFLINE"].flatMap { $0.isEmpty ? nil : $0 }
        let name = hub == nil ? "TRANSFORMERS_OFFLINE" : "HF_HUB_OFFLINE"
        guard let value = environment[name], EnvironmentFlag.isTrue(value) else { return nil }
        return "\(name)=\(value)"
    }

    /// Files at least this big travel on connections of their own (`CurlEasy(ownConnections:)`),
    /// never as streams beside small files on a shared HTTP/2 connection; smaller ones count
    /// as small for `parallelism(for:)`.
    static let ownConnectionSize: Int64 = 1 << 20

    /// Small files in flight at once over https when the work adapts: every request is sent
    /// at once as an HTTP/2 stream on one connection, so the files cost a few round trips
    /// rather than one each per connection. libcurl's own limit per connection
    /// (CURLMOPT_MAX_CONCURRENT_STREAMS), and under what servers allow (nginx 128).
    static let multiplexedFiles = 100

    /// Small https files in flight at once beside `parallelism(for:)`'s transfers, or nil when
    /// they count against it like every other file: with `--parallel N`
    /// (`adaptiveParallelism` off) and under a rate limit (each transfer must stay above the
    /// stall threshold). Where the server speaks only HTTP/1.1, libcurl holds the extra
    /// requests until one of the host's connections (`parallelism`'s number) is free.
    func streams(for requests: [FileRequest]) -> Int? {
        guard adaptiveParallelism, maxBytesPerSecond == nil else { return nil }
        let small = requests.reduce(0) { $0 + ($1.size < Self.ownConnectionSize ? 1 : 0) }
        return small > parallelism(for: requests) ? Self.multiplexedFiles : nil
    }

    /// Files fetched at once for these requests (see `adaptiveParallelism`).
    func parallelism(for requests: [FileRequest]) -> Int {
        guard adaptiveParallelism else { return max(1, parallelFiles) }
        let small = requests.reduce(0) { $0 + ($1.size < Self.ownConnectionSize ? 1 : 0) }
        let wanted = small >= 64 ? 16 : (small >= 16 ? 8 : parallelFiles)
        var parallel = max(1, min(max(parallelFiles, wanted), max(parallelFiles, maxParallelFiles)))
        // Under a rate limit, every connection keeps well above the stall threshold.
        if let rate = maxBytesPerSecond {
            parallel = min(parallel, max(1, Int(clamping: rate / Int64(max(1, 4 * lowSpeedLimitBytesPerSecond)))))
        }
        return parallel
    }

    /// Backoff before attempt `n` (1-based) of a file, without `Retry-After`.
    func backoff(attempt n: Int, random: Double) -> Double {
        // 2^(n-1) by doubling (no libm: POSIX and C stay in System/), capped long before it
        // could overflow.
        let doublings = min(max(0, n - 1), 62)
        let raw = min(maxBackoff, baseBackoff * Double(Int64(1) << doublings))
        return raw * (0.8 + 0.4 * random)
    }
}

/// A failure of the transfer layer itself (not of a server or a file).
package enum TransferFault: Error, Sendable, Equatable, CustomStringConvertible {
    /// libcurl could not be loaded or could not start a transfer (the message says which).
    case setup(String)
    /// The CA file (`EXTENTOS_CA_FILE`, `CURL_CA_BUNDLE`, `SSL_CERT_FILE`) cannot be read
    /// as a regular file.
    case caFile(SystemError)
    /// The netrc file (`NETRC`, `~/.netrc`) exists but cannot be read as a regular file.
    case netrcFile(SystemError)
    /// The network is off (`by`: the switch) and `url` would have needed it; no connection
    /// was opened.
    case offline(by: String, url: String)
    /// The Hugging Face token file (`path`, named by the variable `namedBy`) is there but is
    /// not a regular file this user can read (a FIFO, a device, a socket, a folder, no
    /// permission); it was not waited on, and no request was made.
    case tokenFile(path: String, namedBy: String, SystemError)
    /// The Hugging Face token from `from` (`$HF_TOKEN`, or a file's path) cannot go into a
    /// request header (`problem`: a control character, text that is not UTF-8).
    case tokenText(from: String, problem: String)
    /// `HF_ENDPOINT` (`value`, trailing `/` stripped) is not a URL this tool fetches from.
    case hubEndpoint(value: String, problem: String)

    /// What failed and what to set or fix.
    package var description: String {
        switch self {
        case .setup(let message): return "network layer: \(message)"
        case .caFile(let error):
            return "the CA file cannot be used: \(error.message). Point EXTENTOS_CA_FILE (or CURL_CA_BUNDLE / SSL_CERT_FILE) at a PEM bundle, or unset it"
        case .netrcFile(let error):
            return "the netrc file cannot be used: \(error.message). Point NETRC at a regular file (or remove ~/.netrc)"
        case let .tokenFile(path, namedBy, error):
            let named = namedBy == "HF_TOKEN_PATH" ? "HF_TOKEN_PATH names" : (namedBy == "HOME" ? "the default token file is" : "\(namedBy) puts the token file at")
            let fix = error.isPermissionDenied ? "Make \(path) readable by this user (chmod 600 as its owner)" : "Remove \(path) (then 'hf auth login' writes a token there)"
            return "the Hugging Face token file cannot be read (\(named) \(path)): \(error.message). Nothing was sent. \(fix), or point HF_TOKEN_PATH at a regular file holding the token, or set HF_TOKEN"
        case let .tokenText(from, problem):
            let fix = from.hasPrefix("$") ? "set \(from.dropFirst()) to the token alone" : "write the token alone into \(from) ('hf auth login' does)"
            return "the Hugging Face token from \(from) cannot be sent: \(problem). It was not sent; \(fix)"
        case let .hubEndpoint(value, problem):
            return "HF_ENDPOINT=\(URLOrigin.redacted(value).prefix(200)) cannot be used: \(problem). Set HF_ENDPOINT to the https URL of a Hugging Face Hub mirror (plain http only to 127.0.0.1 or localhost), or unset it to fetch from https://huggingface.co"
        case let .offline(by, url):
            return "offline (\(by)): \(URLOrigin.redacted(url)) would need the network, and no connection is made. Run again \(by.hasPrefix("--") ? "without \(by)" : "with \(by.prefix { $0 != "=" }) unset") to download"
        }
    }
}

/// The proxy libcurl will use, by its own environment rules: `http_proxy` (lowercase only)
/// for http, `https_proxy` then `HTTPS_PROXY` for https, else `all_proxy` / `ALL_PROXY`;
/// `no_proxy` / `NO_PROXY` lists hosts that bypass it. Uppercase `HTTP_PROXY` alone is
/// ignored (a CGI server sets it from a request header). For doctor: never a password.
package struct ProxyEnvironment: Sendable, Equatable {
    /// The proxy for https URLs, with any password replaced by `***`.
    package var https: String?
    /// The proxy for plain http URLs (loopback mirrors), the same way.
    package var http: String?
    /// Hosts that bypass the proxy.
    package var noProxy: String?
    /// Set but ignored by libcurl: `HTTP_PROXY` without `http_proxy`.
    package var ignoredUppercaseHTTP: Bool

    /// The proxy settings of this environment, passwords hidden.
    /// - Parameter environment: the process environment.
    package init(environment: [String: String]) {
        func first(_ names: [String]) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        }
        let all = first(["all_proxy", "ALL_PROXY"])
        https = (first(["https_proxy", "HTTPS_PROXY"]) ?? all).map(Self.redacted)
        http = (first(["http_proxy"]) ?? all).map(Self.redacted)
        noProxy = first(["no_proxy", "NO_PROXY"])
        ignoredUppercaseHTTP = first(["HTTP_PROXY"]) != nil && first(["http_proxy"]) == nil
    }

    /// `scheme://user:secret@host:port` → `scheme://user:***@host:port`.
    static func redacted(_ proxy: String) -> String {
        var afterScheme = proxy.startIndex
        if let rest = proxy.afterFirst("://") { afterScheme = proxy.index(proxy.endIndex, offsetBy: -rest.count) }
        let authorityEnd = proxy[afterScheme...].firstIndex(of: "/") ?? proxy.endIndex
        guard let at = proxy[afterScheme..<authorityEnd].lastIndex(of: "@") else { return proxy }
        let user = proxy[afterScheme..<at]
        guard let colon = user.firstIndex(of: ":") else { return proxy }
        return String(proxy[..<proxy.index(after: colon)]) + "***" + String(proxy[at...])
    }
}
