// The only Swift file that touches libcurl. A thin layer: easy handles with typed
// options and Swift callbacks, a multi handle with poll/wakeup, and libcurl's result
// codes turned into a Swift enum that the transfer logic can reason about.
// https://curl.se/libcurl/c/libcurl-multi.html
internal import CCurl

/// What a finished easy transfer reported.
package enum CurlResult: Sendable, Equatable {
    /// The transfer finished (whatever the HTTP status: the caller reads it).
    case ok
    /// The server did not honour the range (CURLE_RANGE_ERROR).
    case rangeError
    /// Timed out: connect timeout, or under the low-speed limit for the stall time.
    case timedOut(String)
    /// A callback asked to stop (cancel, or a header/body check).
    case abortedByCallback
    /// The write callback refused the data.
    case writeRefused
    /// Redirect to a protocol we do not allow (https → http) or an unsupported scheme.
    case protocolRefused(String)
    /// More redirects than the policy allows.
    case tooManyRedirects
    /// TLS verification failed: never retried.
    case tlsFailure(String)
    /// Network trouble worth retrying: reset, refused, DNS, truncated body, …
    case transient(String)
    /// Anything else, with libcurl's message.
    case other(Int32, String)
}

/// Receives an easy handle's callbacks. Called on the thread that drives the multi handle.
protocol CurlEasyDelegate: AnyObject {
    /// One header line (with CRLF). Return false to abort.
    func curlHeader(_ line: UnsafeRawBufferPointer) -> Bool
    /// Body bytes. Return the count consumed (anything less aborts with `.writeRefused`),
    /// or `CurlEasy.pauseWriting` to have them offered again after `unpause()`.
    func curlBody(_ bytes: UnsafeRawBufferPointer) -> Int
    /// Periodic progress tick. Return false to abort (cancellation).
    func curlTick() -> Bool
}

/// libcurl's one-time global set-up, done before the first handle (thread-safe: a Swift
/// global initialiser runs once).
private let curlGlobalInit: Bool = {
    glasses_curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}()

/// `CurlEasy.warmUp()`'s helper, until it is done.
final class CurlWarmUp: @unchecked Sendable {
    // @unchecked: `done` is only read and written holding `lock`.
    private let lock = Threads.Lock()
    private var done = false

    func finish() {
        lock.withLock {
            done = true
            lock.broadcast()
        }
    }

    /// Returns once libcurl is loaded and set up (at once, nearly always: it is needed first).
    func wait() {
        lock.lock()
        while !done { lock.wait() }
        lock.unlock()
    }
}

/// One libcurl easy handle. Not Sendable: owned by one transfer loop.
final class CurlEasy {
    /// What `curlBody` returns to pause the transfer (CURL_WRITEFUNC_PAUSE): libcurl keeps
    /// the bytes and hands them over again once `unpause()` is called.
    static let pauseWriting = Int(CURL_WRITEFUNC_PAUSE)

    /// Why libcurl could not be opened, when it could not (it is loaded on first use).
    static var loadProblem: String? { glasses_curl_load_error().map { String(cString: $0) } }

    /// Loads libcurl and runs its global set-up on a thread of its own (libcurl 7.84 and
    /// later: thread-safe), so that they overlap the work before a download's first request
    /// (records, locks) instead of following it: together they take longer than that work.
    /// The first handle waits for them if they are not done (`curlGlobalInit` runs once).
    /// - Returns: what to wait for before the download returns (nil: no thread was made),
    ///   so that the process never ends, running OpenSSL's exit handler, while the helper is
    ///   still setting OpenSSL up (a download that fails at once: no room, a busy lock).
    static func warmUp() -> CurlWarmUp? {
        let warm = CurlWarmUp()
        guard Threads.tryStart(name: "gl-curl-load", stackSize: 256 << 10, {
            _ = curlGlobalInit
            warm.finish()
        }) else { return nil }
        return warm
    }

    let handle: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    weak var delegate: (any CurlEasyDelegate)?
    /// Set by the owner to find its job again.
    var tag: Int = 0
    /// libcurl's detailed message for the last failure (CURLOPT_ERRORBUFFER), which says
    /// more than `curl_easy_strerror` ("Operation too slow…" rather than "Timeout was reached").
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    /// The connection cache this handle alone uses (`ownConnections`), nil when it shares
    /// the multi handle's.
    private let share: UnsafeMutableRawPointer?
    /// Whether the handle's transfers run on connections no other handle uses.
    var ownsConnections: Bool { share != nil }

    /// - Parameter ownConnections: keep this handle's connections apart from every other
    ///   handle's, in a connection cache of its own (a share object holding only
    ///   `CURL_LOCK_DATA_CONNECT`, https://curl.se/libcurl/c/CURLSHOPT_SHARE.html). A big
    ///   file's transfer then never becomes one more stream on the connection that carries
    ///   the small files over HTTP/2, and no small file's stream joins its connection; the
    ///   connection stays for the handle's next transfer. With the multi handle's cache,
    ///   libcurl puts a new transfer on any connection to the host that can take another
    ///   stream, and 7.88 keeps one "can multiplex" verdict per host for the whole cache, so
    ///   the choice cannot be steered by the transfer's own options.
    init(ownConnections: Bool = false) throws(TransferFault) {
        guard curlGlobalInit, let h = glasses_curl_easy_init() else { throw TransferFault.setup(CurlEasy.loadProblem ?? "libcurl could not be initialised") }
        handle = h
        if ownConnections {
            guard let share = glasses_curl_share_init() else {
                glasses_curl_easy_cleanup(h)
                throw TransferFault.setup("libcurl could not create a share object (curl_share_init)")
            }
            let shared = glasses_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_CONNECT.rawValue))
            // The easy handle keeps its share across `curl_easy_reset` (it is not an option
            // the reset returns to its default).
            let attached = shared == CURLSHE_OK ? glasses_easy_setopt_ptr(h, CURLOPT_SHARE, share) : CURLE_OK
            guard shared == CURLSHE_OK, attached == CURLE_OK else {
                glasses_curl_easy_cleanup(h)
                _ = glasses_curl_share_cleanup(share)
                throw TransferFault.setup("libcurl refused a connection cache of the transfer's own (CURLSHOPT_SHARE CURL_LOCK_DATA_CONNECT)")
            }
            self.share = share
        } else {
            share = nil
        }
        installCallbacks()
    }

    deinit {
        // The easy handle first: a share object still used by a handle is not freed
        // (CURLSHE_IN_USE). Its cleanup closes the connections in its cache.
        glasses_curl_easy_cleanup(handle)
        if let share { _ = glasses_curl_share_cleanup(share) }
        if let headerList { glasses_curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    /// The detailed message of the last failure, if libcurl wrote one.
    var errorDetail: String? {
        errorBuffer[Int(CURL_ERROR_SIZE)] = 0
        let text = String(cString: errorBuffer)
        return text.isEmpty ? nil : text
    }

    /// Resumes a transfer whose write callback paused it (the rate limiter's budget is back).
    func unpause() {
        _ = glasses_curl_easy_pause(handle, CURLPAUSE_CONT)
    }

    /// Resets per-attempt options, keeping the connection cache.
    func reset() {
        glasses_curl_easy_reset(handle)
        refusedOption = nil
        if let headerList { glasses_curl_slist_free_all(headerList) }
        headerList = nil
        installCallbacks()
    }

    private func installCallbacks() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        errorBuffer[0] = 0
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
        set(CURLOPT_WRITEDATA, pointer: me)
        set(CURLOPT_HEADERDATA, pointer: me)
        set(CURLOPT_XFERINFODATA, pointer: me)
        let write: curl_write_callback = { data, size, count, context in
            guard let context, let data else { return 0 }
            let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
            let total = size * count
            guard let delegate = easy.delegate else { return 0 }
            return delegate.curlBody(UnsafeRawBufferPointer(start: data, count: total))
        }
        let header: curl_write_callback = { data, size, count, context in
            guard let context, let data else { return 0 }
            let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
            let total = size * count
            guard let delegate = easy.delegate else { return 0 }
            return delegate.curlHeader(UnsafeRawBufferPointer(start: data, count: total)) ? total : 0
        }
        let tick: curl_xferinfo_callback = { context, _, _, _, _ in
            guard let context else { return 1 }
            let easy = Unmanaged<CurlEasy>.fromOpaque(context).takeUnretainedValue()
            guard let delegate = easy.delegate else { return 1 }
            return delegate.curlTick() ? 0 : 1
        }
        check(glasses_easy_setopt_write(handle, CURLOPT_WRITEFUNCTION, write), "WRITEFUNCTION")
        check(glasses_easy_setopt_write(handle, CURLOPT_HEADERFUNCTION, header), "HEADERFUNCTION")
        check(glasses_easy_setopt_xferinfo(handle, CURLOPT_XFERINFOFUNCTION, tick), "XFERINFOFUNCTION")
        set(CURLOPT_NOPROGRESS, 0)
        // No signals: we run on our own thread, and DNS timeouts must not use SIGALRM.
        set(CURLOPT_NOSIGNAL, 1)
    }

    /// The first option libcurl refused since the last `reset`; `configure` reports it.
    private var refusedOption: String?

    /// Records a refused option (never a trap: a libcurl that refuses one is reported as a
    /// failed transfer, P12).
    private func check(_ code: CURLcode, _ what: String) {
        guard code != CURLE_OK, refusedOption == nil else { return }
        refusedOption = "libcurl refused the option \(what): \(String(cString: glasses_curl_easy_strerror(code)))"
    }

    private func set(_ option: CURLoption, _ value: Int) { check(glasses_easy_setopt_long(handle, option, value), "\(option)") }
    private func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) { check(glasses_easy_setopt_ptr(handle, option, pointer), "\(option)") }
    private func set(_ option: CURLoption, string: String) { check(glasses_easy_setopt_str(handle, option, string), "\(option)") }

    // MARK: Options the transfer logic uses

    /// Sets up the next transfer. Throws when libcurl refused an option the transfer needs.
    /// - Parameter netrcFile: the netrc file to take a login from for this request's host
    ///   (`CURLOPT_NETRC_FILE`, optional use), nil for none.
    /// - Parameter end: the last byte wanted (`Range: bytes=offset-end`, a bounded read such
    ///   as a safetensors header); nil asks from `offset` to the end (a resume, or the whole
    ///   file when `offset` is 0).
    func configure(url: String, rangeFrom offset: Int64, to end: Int64? = nil, headers: [String], policy: TransferPolicy,
                   netrcFile: String?) throws(TransferFault) {
        set(CURLOPT_URL, string: url)
        // Only https (and http for loopback tests/mirrors).
        set(CURLOPT_PROTOCOLS_STR, string: "https,http")
        // Redirects are followed by the caller, one request each (`redirectURL`), so that a
        // credential is attached per request, only for its own origin: libcurl's following
        // would carry a custom Authorization header or a netrc login along (P10).
        set(CURLOPT_FOLLOWLOCATION, 0)
        if let netrcFile {
            set(CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            set(CURLOPT_NETRC_FILE, string: netrcFile)
        }
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile = policy.caFile { set(CURLOPT_CAINFO, string: caFile) }
        set(CURLOPT_CONNECTTIMEOUT_MS, Int(clamping: ExternalNumber.int64(clamping: (policy.connectTimeout * 1000).rounded(.up)) ?? 0))
        set(CURLOPT_LOW_SPEED_LIMIT, policy.lowSpeedLimitBytesPerSecond)
        set(CURLOPT_LOW_SPEED_TIME, max(1, Int(clamping: ExternalNumber.int64(clamping: policy.stallTimeout.rounded(.up)) ?? 1)))
        // Big files (the handles with connections of their own) are read 256 KiB at a time;
        // small files keep libcurl's 16 KiB: up to 100 of them are in flight at once, each
        // handle with a buffer of that size. A hint: libcurl 7.88 refuses a new size once a
        // handle has its buffer (a handle reused after an HTTP/2 transfer), and the default
        // then serves.
        if ownsConnections { _ = glasses_easy_setopt_long(handle, CURLOPT_BUFFERSIZE, 256 * 1024) }
        set(CURLOPT_TCP_KEEPALIVE, 1)
        // Over https, wait for a connection being set up rather than open another: where the
        // server offers HTTP/2 (ALPN), parallel files become streams on one connection. Plain
        // http (loopback mirrors) never multiplexes, so nothing is worth waiting for there.
        if url.lowercased().hasPrefix("https://") { set(CURLOPT_PIPEWAIT, 1) }
        set(CURLOPT_USERAGENT, string: policy.userAgent)
        // Model files are already compressed or incompressible; asking for gzip would make
        // ranges and sizes refer to a different byte stream (P10).
        // `Range: bytes=N-` as a plain range (CURLOPT_RANGE), not libcurl's resume
        // (CURLOPT_RESUME_FROM_LARGE): a resume makes libcurl fail any answer with a body that
        // is not a 206 with CURLE_RANGE_ERROR, a redirect's short body included (the Hub's
        // 302 to its CDN), and the caller would start over from byte 0. Whether an answer
        // continues the partial is decided by the caller from the status and Content-Range
        // (`FileJob.endOfHeaders`), on whichever hop it arrives.
        if let end {
            set(CURLOPT_RANGE, string: "\(offset)-\(end)")
        } else if offset > 0 {
            set(CURLOPT_RANGE, string: "\(offset)-")
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = glasses_curl_slist_append(list, header) }
        headerList = list
        if let list { check(glasses_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, list), "HTTPHEADER") }
        if let refusedOption { throw .setup(refusedOption) }
    }

    /// The status a proxy answered the last `CONNECT` with (0: no proxy tunnel was asked for).
    var proxyConnectCode: Int {
        var code = 0
        _ = glasses_easy_getinfo_long(handle, CURLINFO_HTTP_CONNECTCODE, &code)
        return code
    }

    /// The last response's HTTP status.
    var responseCode: Int {
        var code = 0
        _ = glasses_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// Where the last response redirects to (its `Location`, made absolute), when it is a
    /// redirect; libcurl does not follow it (CURLINFO_REDIRECT_URL).
    var redirectURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard glasses_easy_getinfo_str(handle, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(cString: pointer)
    }

    /// The URL of the last request (the caller follows redirects itself).
    var effectiveURL: String? {
        var pointer: UnsafeMutablePointer<CChar>?
        guard glasses_easy_getinfo_str(handle, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        return String(cString: pointer)
    }

    /// Whether `result`, the last transfer's, is a stall: the low-speed limit
    /// (CURLOPT_LOW_SPEED_LIMIT for CURLOPT_LOW_SPEED_TIME) rather than the connect timeout.
    ///
    /// libcurl ends both with CURLE_OPERATION_TIMEDOUT and exposes no flag for either (only
    /// its error text differs). It checks the speed only while the request is under way,
    /// which begins once it has recorded the pre-transfer time (CURLINFO_PRETRANSFER_TIME_T,
    /// at least 1 µs, zeroed at the start of each transfer); the connect timeout applies only
    /// before that, and no overall CURLOPT_TIMEOUT is set. So a timeout with a pre-transfer
    /// time is the speed limit. (After a followed redirect the times of all requests add up:
    /// a connect timeout on a later hop counts as a stall too, and is retried the same way.)
    func isStall(_ result: CurlResult) -> Bool {
        guard case .timedOut = result else { return false }
        var microseconds: curl_off_t = 0
        guard glasses_easy_getinfo_off(handle, CURLINFO_PRETRANSFER_TIME_T, &microseconds) == CURLE_OK else { return false }
        return microseconds > 0
    }

    /// The HTTP version used (for diagnostics: "HTTP/2").
    var httpVersion: String {
        var v = 0
        _ = glasses_easy_getinfo_long(handle, CURLINFO_HTTP_VERSION, &v)
        switch v {
        case Int(CURL_HTTP_VERSION_1_0): return "HTTP/1.0"
        case Int(CURL_HTTP_VERSION_1_1): return "HTTP/1.1"
        case Int(CURL_HTTP_VERSION_2_0): return "HTTP/2"
        case Int(CURL_HTTP_VERSION_3): return "HTTP/3"
        default: return "HTTP"
        }
    }

    static func classify(_ code: CURLcode, detail: String? = nil) -> CurlResult {
        let message = detail ?? String(cString: glasses_curl_easy_strerror(code))
        switch code {
        case CURLE_OK: return .ok
        case CURLE_RANGE_ERROR: return .rangeError
        case CURLE_OPERATION_TIMEDOUT: return .timedOut(message)
        case CURLE_ABORTED_BY_CALLBACK: return .abortedByCallback
        case CURLE_WRITE_ERROR: return .writeRefused
        case CURLE_UNSUPPORTED_PROTOCOL: return .protocolRefused(message)
        case CURLE_TOO_MANY_REDIRECTS: return .tooManyRedirects
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return .tlsFailure(message)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT, CURLE_PARTIAL_FILE,
             CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_HTTP2, CURLE_HTTP2_STREAM,
             CURLE_SSL_CONNECT_ERROR, CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP3, CURLE_QUIC_CONNECT_ERROR,
             CURLE_PROXY, CURLE_AGAIN:
            return .transient(message)
        default:
            return .other(Int32(code.rawValue), message)
        }
    }

    /// libcurl's version string, for `doctor`.
    static var version: String {
        guard let v = glasses_curl_version() else { return "unknown" }
        return String(cString: v)
    }
}

@available(*, unavailable)
extension CurlEasy: Sendable {}

/// A libcurl multi handle: several transfers on one thread, connections reused.
final class CurlMulti {
    private let handle: UnsafeMutableRawPointer
    private var easies: [UnsafeMutableRawPointer: CurlEasy] = [:]

    /// - Parameter maxHostConnections: connections to one host at most (the transfers the
    ///   session runs at once: without as many connections, the rest would queue behind them).
    ///   Counted per connection cache: a handle with connections of its own
    ///   (`CurlEasy(ownConnections:)`) is not held back by it.
    /// - Parameter maxStreams: HTTP/2 streams on one connection at most
    ///   (CURLMOPT_MAX_CONCURRENT_STREAMS, libcurl's default 100); past that, or past what the
    ///   server allows, libcurl opens another connection.
    init(maxHostConnections: Int = 8, maxStreams: Int = 100) throws(TransferFault) {
        guard curlGlobalInit, let h = glasses_curl_multi_init() else { throw TransferFault.setup(CurlEasy.loadProblem ?? "libcurl multi handle could not be created") }
        handle = h
        // Multiplex on HTTP/2 when offered; cap connections per host politely.
        _ = glasses_multi_setopt_long(handle, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = glasses_multi_setopt_long(handle, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, maxHostConnections))
        _ = glasses_multi_setopt_long(handle, CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, maxStreams))
    }

    deinit {
        for easy in easies.values { glasses_curl_multi_remove_handle(handle, easy.handle) }
        glasses_curl_multi_cleanup(handle)
    }

    var count: Int { easies.count }

    func add(_ easy: CurlEasy) throws(TransferFault) {
        let code = glasses_curl_multi_add_handle(handle, easy.handle)
        guard code == CURLM_OK else { throw TransferFault.setup("curl_multi_add_handle: \(String(cString: glasses_curl_multi_strerror(code)))") }
        easies[easy.handle] = easy
    }

    func remove(_ easy: CurlEasy) {
        if easies.removeValue(forKey: easy.handle) != nil {
            glasses_curl_multi_remove_handle(handle, easy.handle)
        }
    }

    /// Drives every transfer as far as it can go without blocking.
    func perform() throws(TransferFault) {
        var running: Int32 = 0
        let code = glasses_curl_multi_perform(handle, &running)
        guard code == CURLM_OK else { throw TransferFault.setup("curl_multi_perform: \(String(cString: glasses_curl_multi_strerror(code)))") }
    }

    /// Waits for network activity, `wakeup()`, or the timeout.
    func poll(timeoutMs: Int32) {
        var fds: Int32 = 0
        _ = glasses_curl_multi_poll(handle, nil, 0, timeoutMs, &fds)
    }

    /// Finished transfers since the last call.
    func finished() -> [(CurlEasy, CurlResult)] {
        var out: [(CurlEasy, CurlResult)] = []
        var queued: Int32 = 0
        while let message = glasses_curl_multi_info_read(handle, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easyHandle = message.pointee.easy_handle,
                  let easy = easies[easyHandle] else { continue }
            out.append((easy, CurlEasy.classify(message.pointee.data.result, detail: easy.errorDetail)))
        }
        return out
    }

    /// The thread-safe part: wakes a sleeping `poll` (cancellation).
    var waker: CurlWaker { CurlWaker(handle: handle) }
}

@available(*, unavailable)
extension CurlMulti: Sendable {}

/// Wakes a multi handle's `poll` from any thread (`curl_multi_wakeup` is thread-safe).
struct CurlWaker: @unchecked Sendable {
    // @unchecked: only curl_multi_wakeup is called through it, which libcurl documents as
    // callable from any thread; the owner keeps the multi handle alive while wakers exist.
    fileprivate let handle: UnsafeMutableRawPointer

    func wake() { _ = glasses_curl_multi_wakeup(handle) }
}

/// Library facts for `doctor`.
package enum TransferLibrary {
    /// libcurl's version line (`curl_version()`); loads libcurl.
    package static var curlVersion: String { CurlEasy.version }
}
