import FoundationEssentials

/// After an attempt: what libcurl's result and the response mean for the file — done,
/// retried (with backoff, `Retry-After`, a budget of attempts without progress), restarted,
/// or failed for good.
extension FileJob {
    func complete(_ result: CurlResult) {
        // The attempt's last bytes reach the disk before anything counts them.
        flushStage()
        if abort == nil, case .ok = result, [301, 302, 303, 307, 308].contains(status), let target = easy?.redirectURL {
            easy = nil
            followRedirect(to: target)
            return
        }
        // Who answered: after redirects (a CDN), not the URL the catalog gave.
        let answeredBy = easy?.effectiveURL ?? url
        // The bytes came from where the redirects led: the next attempt of this run starts
        // there (a dropped connection costs no second round trip to the catalog's URL).
        // Any other ending (an error answer, no answer) asks the catalog's URL again.
        resolvedURL = accepting && url != request.url ? url : nil
        // Progress means real bytes: a trickle of a few bytes per attempt, or an attempt that
        // ended in a stall, must not reset the budget (P4: bounded time).
        let stalled = easy?.isStall(result) ?? false
        // A proxy that refuses the tunnel (403: its rules; 407: it wants credentials) says
        // so every time: final, never retried (a cron run would hammer it otherwise).
        let proxyRefusal = easy.map(\.proxyConnectCode).flatMap { [403, 407].contains($0) ? $0 : nil }
        easy = nil
        let url = request.url
        let gained = onDisk - onDiskAtAttemptStart
        if !stalled && (gained >= FileJob.progressQuantum || (gained > 0 && onDisk == request.size)) {
            attemptsWithoutProgress = 0
        } else {
            attemptsWithoutProgress += 1
        }

        if let abort {
            switch abort {
            case .restart(let reason):
                restartFromZero(reason)
                scheduleRetry(cause: reason)
            case .tooLong:
                restartFromZero(request.sizeIsLimit ? "the server sent more than the \(request.size)-byte cap"
                                                    : "the server sent more than the declared \(request.size) bytes")
                finish(.failed(.tooLong(declared: request.size)))
            case .sizeMismatch(let served):
                finish(.failed(.sizeMismatch(declared: request.size, served: served)))
            case .noSpace:
                finish(.failed(.noSpace(path: request.partialPath)))
            case .system(let error):
                finish(.failed(.system(error)))
            case .encoding(let encoding):
                finish(.failed(.refused("the server applied Content-Encoding '\(encoding)' although none was asked for", url: url)))
            case .redirectRefused(let reason):
                finish(.failed(.refused(reason, url: url)))
            }
            return
        }

        if let code = proxyRefusal {
            let host = URLOrigin.of(answeredBy) ?? URLOrigin.redacted(answeredBy)
            let advice = code == 407
                ? "it asks for credentials: put them in the proxy's URL (https_proxy=http://USER:PASSWORD@HOST:PORT) or in netrc"
                : "check the proxy's rules, or list the host in no_proxy to reach it directly"
            finish(.failed(.refused("the proxy refused to connect to \(host) (HTTP \(code)); \(advice)", url: url)))
            return
        }

        if case .ok = result, let cause = freeRetry() {
            // Not the file's fault, nor the network's: the next attempt goes at once, and the
            // retry budget stays as it was.
            attemptsWithoutProgress = max(0, attemptsWithoutProgress - 1)
            notBefore = 0
            session.onEvent(.retry(file: request.name, attempt: attempts + 1, cause: cause, delay: 0))
            return
        }

        switch result {
        case .ok:
            switch status {
            case 200 where request.sizeIsLimit:
                // The whole body, as long as the server said (when it said).
                if let length = contentLength, onDisk != length {
                    scheduleRetry(cause: "the connection closed after \(onDisk) of \(length) bytes")
                } else {
                    verifyComplete(fromNetwork: true)
                }
            case 200, 206:
                if onDisk == request.size {
                    verifyComplete(fromNetwork: true)
                } else {
                    scheduleRetry(cause: "the connection closed after \(onDisk) of \(request.size) bytes")
                }
            case 416:
                restartFromZero("the server refused the range (416)")
                scheduleRetry(cause: "HTTP 416")
            case 408, 425, 429, 500, 502, 503, 504:
                scheduleRetry(cause: "HTTP \(status)", retryAfter: retryAfter)
            case let denied where (denied == 401 || denied == 403) && URLOrigin.of(answeredBy) == URLOrigin.of(request.url):
                // The source itself (not a CDN it redirected to, which never sees a credential).
                // A token refused earlier in this run (and withheld since) is what it lacks.
                let sent = session.credentials.sent(to: answeredBy, bearerFrom: bearerFrom ?? session.tokenRefusedFrom)
                finish(.failed(.authRequired(status, url: answeredBy, sent: sent)))
            default:
                finish(.failed(.httpStatus(status, url: answeredBy, requested: url)))
            }
        case .rangeError:
            restartFromZero("the server did not honour the range request")
            scheduleRetry(cause: "range not honoured")
        case .timedOut(let message):
            if stalled {
                session.onEvent(.stalled(file: request.name))
                scheduleRetry(cause: "stalled: under \(session.policy.lowSpeedLimitBytesPerSecond) B/s for \(ExternalNumber.int64(clamping: session.policy.stallTimeout) ?? 0) s")
            } else {
                scheduleRetry(cause: message)
            }
        case .transient(let message):
            scheduleRetry(cause: message)
        case .abortedByCallback:
            finish(.failed(.cancelled))
        case .writeRefused:
            scheduleRetry(cause: "write refused")
        case .protocolRefused(let message):
            finish(.failed(.refused("redirect or URL refused (\(message)); only https is allowed, and never a redirect from https to http", url: url)))
        case .tooManyRedirects:
            finish(.failed(.refused("more than \(session.policy.maxRedirects) redirects", url: url)))
        case .tlsFailure(let message):
            finish(.failed(.refused("TLS verification failed: \(message)", url: url)))
        case .other(let code, let message):
            finish(.failed(.refused("libcurl error \(code): \(message)", url: url)))
        }
    }

    /// Whether this attempt's answer sends the next one elsewhere at once, not counted as a
    /// failure; the cause to report when it does.
    /// - A signed URL reused from an earlier attempt was refused (400, 403, 410: it
    ///   expired): the next attempt asks the catalog's URL for a fresh redirect.
    /// - The Hugging Face token was refused (401): an expired or revoked login must not
    ///   break a public model, so this run sends no token from now on, once. A second 401
    ///   means the file needs a valid token (`authRequired`).
    func freeRetry() -> String? {
        if startedAtResolved, [400, 403, 410].contains(status) {
            resolvedURL = nil
            return "the signed URL from an earlier redirect was refused (HTTP \(status): expired); asking \(URLOrigin.redacted(request.url)) for a fresh one"
        }
        if status == 401, let from = bearerFrom {
            // Each request that carried it (several may be in flight) is asked again without.
            if session.tokenRefusedFrom == nil { session.tokenRefusedFrom = from }
            return "the Hugging Face token from \(from) was refused (HTTP 401: expired or revoked); trying without it"
        }
        return nil
    }

    /// The response redirects to `target`: the same attempt goes on there, with a request of
    /// its own (so a credential is attached only where it belongs). https never leads to
    /// plain http, plain http only to loopback, at most `maxRedirects` (P10).
    func followRedirect(to target: String) {
        let shown = URLOrigin.redacted(target)
        if let problem = CatalogRules.urlProblem(target) {
            finish(.failed(.refused("redirect to \(shown) refused: \(problem)", url: request.url)))
        } else if CatalogRules.isPlainHTTP(target) && !session.allowPlainHTTPRedirects {
            finish(.failed(.refused("redirect or URL refused (a redirect to \(shown)); only https is allowed, and never a redirect from https to http", url: request.url)))
        } else if redirectsFollowed >= session.policy.maxRedirects {
            finish(.failed(.refused("more than \(session.policy.maxRedirects) redirects", url: request.url)))
        } else {
            redirectsFollowed += 1
            url = target
            followingRedirect = true
            notBefore = 0
        }
    }

    func scheduleRetry(cause: String, retryAfter: Int64? = nil) {
        guard outcome == nil else { return }
        // A server that asks for more patience than a run has is the cause to report,
        // whether or not the retry budget is spent.
        if let retryAfter, Double(retryAfter) > session.policy.maxRetryAfter {
            finish(.failed(.retryAfterTooLong(seconds: retryAfter, url: request.url)))
            return
        }
        if attemptsWithoutProgress > session.policy.retryBudget {
            finish(.failed(.retriesExhausted(cause: cause, url: request.url)))
            return
        }
        var delay: Double
        if let retryAfter {
            delay = Double(retryAfter)
        } else {
            delay = attemptsWithoutProgress == 0 ? 0 : session.policy.backoff(attempt: attemptsWithoutProgress, random: Double.random(in: 0...1))
        }
        delay = max(0, delay)
        notBefore = monotonicSeconds() + delay
        session.onEvent(.retry(file: request.name, attempt: attempts + 1, cause: cause, delay: delay))
    }
}
