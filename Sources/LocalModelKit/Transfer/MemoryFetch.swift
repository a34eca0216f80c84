import FoundationEssentials

/// One small answer fetched into memory rather than into a file of the store: a Hub
/// repository's model information, a small file to hash, the header of a safetensors file
/// (a bounded range). Nothing is written anywhere, so a command that only looks (`add`)
/// leaves the disk as it found it when it fails.
struct MemoryRequest: Sendable, Equatable {
    /// What it is, for messages: "the model information of org/repo", "config.json".
    var name: String
    var url: String
    /// The most body bytes accepted (P3); more ends the request as `tooLong`.
    var cap: Int
    /// `Range: bytes=first-last`: only a `206` whose `Content-Range` is exactly this range
    /// (of `fileSize`, when known) is accepted, and at most `last - first + 1` bytes are kept.
    var range: ClosedRange<Int64>?
    /// The whole file's size, when known: a range answer's total, and a whole answer's length.
    var fileSize: Int64?

    init(name: String, url: String, cap: Int, range: ClosedRange<Int64>? = nil, fileSize: Int64? = nil) {
        self.name = name
        self.url = url
        self.cap = cap
        self.range = range
        self.fileSize = fileSize
    }

    /// The body bytes an accepted answer must have: the range's length, else the file's
    /// size when known; nil when only the cap bounds it.
    var expectedLength: Int64? {
        if let range { return range.upperBound - range.lowerBound + 1 }
        return fileSize
    }
}

/// Why a memory fetch failed: the transfer's own failure value, and the Hub's
/// `X-Error-Code` of a refusal (`RepoNotFound`, `RevisionNotFound`, `GatedRepo`, …) when it
/// sent one.
struct MemoryFetchFailure: Error, Sendable, Equatable {
    var failure: FileFailure
    var hubErrorCode: String?
    /// The answer came, but not as asked: another range, the whole file for a range, more
    /// bytes than the cap or the declared size, an encoding (`failure` says which).
    var badAnswer = false
}

/// Runs `MemoryRequest`s one after another on one libcurl handle (its connections reused),
/// by the transfer's rules: redirects followed one request at a time, each checked (https
/// only, plain http only on loopback, never from https to http, at most `maxRedirects`),
/// a credential only with requests to its own origin (P10), the same `Range` on every hop,
/// no compression; transient failures (reset, timeout, stall, 5xx, 429) retried with the
/// policy's backoff and `Retry-After`; a refused Hugging Face token dropped once, as a
/// download drops it (`FileJob.freeRetry`). Every number from the server is range-checked
/// (P12). Blocking: call it from a thread that may wait.
final class MemoryFetcher: CurlEasyDelegate {
    let policy: TransferPolicy
    let cancellation: CancellationFlag
    /// A loopback origin may redirect over plain http; a public one never.
    let allowPlainHTTPRedirects: Bool
    private let credentials: ResolvedCredentials
    /// Where the Hugging Face token came from, once a request that carried it was answered
    /// 401: no request of this fetcher carries it after that.
    private var tokenRefusedFrom: String?
    private let easy: CurlEasy
    private let multi: CurlMulti

    // The request and the response being read.
    private var request = MemoryRequest(name: "", url: "", cap: 0)
    private var status = 0
    private var contentRange: (start: Int64, end: Int64, total: Int64?)?
    private var contentLength: Int64?
    private var contentEncoding: String?
    private var retryAfter: Int64?
    private var hubErrorCode: String?
    private var body: [UInt8] = []
    private var accepting = false
    private var abort: FileFailure?
    /// `abort` refuses the answer itself (its range, its size, its encoding).
    private var abortIsBadAnswer = false

    /// - Throws: `TransferFault` when the network is off, the CA or netrc file cannot be
    ///   used, the token cannot be read, or libcurl cannot start.
    init(policy: TransferPolicy, cancellation: CancellationFlag, allowPlainHTTPRedirects: Bool) throws(TransferFault) {
        if let offline = policy.offlineBy { throw .offline(by: offline, url: "the Hub") }
        // libcurl opens the CA file with a blocking read: checked here without waiting.
        if let caFile = policy.caFile {
            do { _ = try FileIO.openForReading(caFile) } catch { throw .caFile(error) }
        }
        self.policy = policy
        self.cancellation = cancellation
        self.allowPlainHTTPRedirects = allowPlainHTTPRedirects
        credentials = try policy.credentials.resolved()
        easy = try CurlEasy()
        multi = try CurlMulti(maxHostConnections: 2)
        cancellation.attach(multi.waker)
    }

    deinit {
        // Detached before the multi handle goes (it outlives this body).
        cancellation.attach(nil)
    }

    /// The body of `request`'s accepted answer.
    func fetch(_ request: MemoryRequest) throws(MemoryFetchFailure) -> [UInt8] {
        self.request = request
        var url = request.url
        var redirects = 0
        var attemptsWithoutProgress = 0
        while true {
            if cancellation.isCancelled { throw MemoryFetchFailure(failure: .cancelled) }
            let bearer = tokenRefusedFrom == nil ? credentials.authorization(for: url) : nil
            let result = try perform(url: url, authorization: bearer?.header)
            let answeredBy = easy.effectiveURL ?? url
            if let abort { throw MemoryFetchFailure(failure: abort, badAnswer: abortIsBadAnswer) }
            if case .ok = result, [301, 302, 303, 307, 308].contains(status), let target = easy.redirectURL {
                let shown = URLOrigin.redacted(target)
                if let problem = CatalogRules.urlProblem(target) {
                    throw MemoryFetchFailure(failure: .refused("redirect to \(shown) refused: \(problem)", url: request.url))
                }
                if CatalogRules.isPlainHTTP(target) && !allowPlainHTTPRedirects {
                    throw MemoryFetchFailure(failure: .refused("redirect to \(shown) refused; only https is allowed, and never a redirect from https to http", url: request.url))
                }
                guard redirects < policy.maxRedirects else {
                    throw MemoryFetchFailure(failure: .refused("more than \(policy.maxRedirects) redirects", url: request.url))
                }
                redirects += 1
                url = target
                continue
            }
            var cause: String
            var wait: Int64?
            switch result {
            case .ok:
                switch status {
                case 200 where accepting, 206 where accepting:
                    if let length = request.expectedLength ?? contentLength, Int64(body.count) != length {
                        cause = "the connection closed after \(body.count) of \(length) bytes"
                    } else {
                        return body
                    }
                case 401 where bearer != nil && tokenRefusedFrom == nil:
                    // An expired or revoked login must not break a public repository: asked
                    // again at once without the token, once.
                    tokenRefusedFrom = bearer?.from
                    url = request.url
                    redirects = 0
                    continue
                case let denied where (denied == 401 || denied == 403) && URLOrigin.of(answeredBy) == URLOrigin.of(request.url):
                    let sent = credentials.sent(to: answeredBy, bearerFrom: bearer?.from ?? tokenRefusedFrom)
                    throw MemoryFetchFailure(failure: .authRequired(status, url: answeredBy, sent: sent), hubErrorCode: hubErrorCode)
                case 408, 425, 429, 500, 502, 503, 504:
                    cause = "HTTP \(status)"
                    wait = retryAfter
                default:
                    throw MemoryFetchFailure(failure: .httpStatus(status, url: answeredBy, requested: request.url), hubErrorCode: hubErrorCode)
                }
            case .timedOut(let message), .transient(let message):
                cause = message
            case .writeRefused:
                cause = "the answer could not be taken"
            case .rangeError:
                cause = "the server did not honour the range request"
            case .abortedByCallback:
                throw MemoryFetchFailure(failure: .cancelled)
            case .protocolRefused(let message):
                throw MemoryFetchFailure(failure: .refused("redirect or URL refused (\(message)); only https is allowed, and never a redirect from https to http", url: request.url))
            case .tooManyRedirects:
                throw MemoryFetchFailure(failure: .refused("more than \(policy.maxRedirects) redirects", url: request.url))
            case .tlsFailure(let message):
                throw MemoryFetchFailure(failure: .refused("TLS verification failed: \(message)", url: request.url))
            case .other(let code, let message):
                throw MemoryFetchFailure(failure: .refused("libcurl error \(code): \(message)", url: request.url))
            }
            // A retry: back to the request's own URL (a signed redirect may have expired).
            if let wait, Double(wait) > policy.maxRetryAfter {
                throw MemoryFetchFailure(failure: .retryAfterTooLong(seconds: wait, url: request.url))
            }
            attemptsWithoutProgress += 1
            if attemptsWithoutProgress > policy.retryBudget {
                throw MemoryFetchFailure(failure: .retriesExhausted(cause: cause, url: request.url))
            }
            let delay = wait.map(Double.init) ?? policy.backoff(attempt: attemptsWithoutProgress, random: Double.random(in: 0...1))
            sleep(seconds: max(0, delay))
            url = request.url
            redirects = 0
        }
    }

    /// One request to `url`, to its end: libcurl's result, with the response in the fields.
    private func perform(url: String, authorization: String?) throws(MemoryFetchFailure) -> CurlResult {
        status = 0
        contentRange = nil
        contentLength = nil
        contentEncoding = nil
        retryAfter = nil
        hubErrorCode = nil
        body = []
        accepting = false
        abort = nil
        abortIsBadAnswer = false
        easy.reset()
        do {
            try easy.configure(url: url, rangeFrom: request.range?.lowerBound ?? 0, to: request.range?.upperBound,
                               headers: authorization.map { [$0] } ?? [], policy: policy, netrcFile: credentials.netrcFile)
            easy.delegate = self
            try multi.add(easy)
        } catch {
            throw MemoryFetchFailure(failure: .refused(error.description, url: request.url))
        }
        defer {
            multi.remove(easy)
            easy.delegate = nil
        }
        while true {
            do { try multi.perform() } catch { throw MemoryFetchFailure(failure: .refused(error.description, url: request.url)) }
            if let done = multi.finished().first { return done.1 }
            if cancellation.isCancelled { throw MemoryFetchFailure(failure: .cancelled) }
            multi.poll(timeoutMs: 100)
        }
    }

    /// Waits `seconds`, woken early by a cancellation.
    private func sleep(seconds: Double) {
        let end = monotonicSeconds() + seconds
        while !cancellation.isCancelled {
            let left = end - monotonicSeconds()
            if left <= 0 { return }
            multi.poll(timeoutMs: Int32(clamping: ExternalNumber.int64(clamping: min(left, 1) * 1000) ?? 1))
        }
    }

    // MARK: libcurl's callbacks

    func curlTick() -> Bool { !cancellation.isCancelled }

    func curlHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        let name: String, value: String
        switch HTTPHeader.Line(line) {
        case .status(let code):
            status = code
            contentRange = nil
            contentLength = nil
            contentEncoding = nil
            retryAfter = nil
            hubErrorCode = nil
            accepting = false
            return true
        case .end: return endOfHeaders()
        case .other: return true
        case let .field(fieldName, fieldValue): (name, value) = (fieldName, fieldValue)
        }
        switch name {
        case "content-range": contentRange = HTTPHeader.contentRange(value)
        case "content-length": contentLength = ExternalNumber.decimal(value)
        case "retry-after": retryAfter = HTTPHeader.retryAfter(value)
        case "content-encoding": contentEncoding = value.lowercased()
        case "x-error-code":
            // A word the Hub sends (`RepoNotFound`); anything else is not shown.
            let word = String(value.prefix(64))
            hubErrorCode = word.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) })
                ? word : nil
        case "location" where (300..<400).contains(status):
            if value.contains("://"), let problem = CatalogRules.urlProblem(value) {
                abort = .refused("redirect to \(URLOrigin.redacted(value)) refused: \(problem)", url: request.url)
                return false
            }
        default: break
        }
        return true
    }

    /// The header block of one response has arrived: is its body the answer?
    private func endOfHeaders() -> Bool {
        if (100..<200).contains(status) || (300..<400).contains(status) { return true }
        // Whatever ends the answer from here on refuses the answer itself.
        abortIsBadAnswer = true
        if status == 200 || status == 206, let encoding = contentEncoding, encoding != "identity" {
            abort = .refused("the server applied Content-Encoding '\(encoding)' although none was asked for", url: request.url)
            return false
        }
        if let range = request.range {
            switch status {
            case 206:
                let total = contentRange?.total
                guard let got = contentRange, got.start == range.lowerBound, got.end == range.upperBound,
                      request.fileSize == nil || total == request.fileSize else {
                    let shown = contentRange.map { "bytes \($0.start)-\($0.end)/\($0.total.map(String.init) ?? "*")" } ?? "none"
                    abort = .refused("asked for bytes \(range.lowerBound)-\(range.upperBound)\(request.fileSize.map { " of \($0)" } ?? ""), the server answered with Content-Range \(shown)",
                                     url: request.url)
                    return false
                }
                accepting = true
            case 200:
                // The whole file for a few bytes: refused before its body arrives.
                abort = .refused("asked for bytes \(range.lowerBound)-\(range.upperBound), the server answered with the whole file (HTTP 200): it does not honour Range requests", url: request.url)
                return false
            default:
                accepting = false
            }
        } else if status == 200 {
            if let length = contentLength, length > Int64(request.cap) {
                abort = .tooLong(declared: Int64(request.cap))
                return false
            }
            if let size = request.fileSize, let length = contentLength, length != size {
                abort = .sizeMismatch(declared: size, served: length)
                return false
            }
            accepting = true
        }
        return true
    }

    func curlBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        // Error pages and redirect bodies are not the answer.
        guard accepting else { return bytes.count }
        let limit = min(request.expectedLength ?? Int64(request.cap), Int64(request.cap))
        guard Int64(body.count) + Int64(bytes.count) <= limit else {
            abort = .tooLong(declared: limit)
            abortIsBadAnswer = true
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }
}

@available(*, unavailable)
extension MemoryFetcher: Sendable {}
