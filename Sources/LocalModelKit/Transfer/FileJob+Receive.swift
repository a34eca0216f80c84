import FoundationEssentials

/// What libcurl hands a file's transfer while an attempt runs: each header line (is this
/// response's body ours?), and the body's bytes (staged, written, hashed).
extension FileJob {
    func curlTick() -> Bool { !session.cancellation.isCancelled }

    func curlHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        let name: String, value: String
        switch HTTPHeader.Line(line) {
        case .status(let code):
            // A new response (redirects and 1xx each start one).
            status = code
            contentRange = nil
            contentLength = nil
            contentEncoding = nil
            retryAfter = nil
            // Validators are the answer's own: a redirect's (the Hub's 302 carries the
            // pointer's ETag) never stands for the bytes of the answer it leads to.
            etag = nil
            lastModified = nil
            accepting = false
            return true
        case .end: return endOfHeaders()
        case .other: return true
        case let .field(fieldName, fieldValue): (name, value) = (fieldName, fieldValue)
        }
        switch name {
        case "content-range": contentRange = HTTPHeader.contentRange(value)
        case "content-length": contentLength = ExternalNumber.decimal(value)
        case "etag": if (200..<300).contains(status) { etag = value }
        case "last-modified": if (200..<300).contains(status) { lastModified = value }
        case "retry-after": retryAfter = HTTPHeader.retryAfter(value)
        case "content-encoding": contentEncoding = value.lowercased()
        case "location" where (300..<400).contains(status):
            // An absolute target is checked as soon as it is seen: a redirect may only lead
            // to https, or to plain http on loopback (P10); `followRedirect` checks the
            // resolved target again (and that https never leads to http) before following.
            if value.contains("://"), let problem = CatalogRules.urlProblem(value) {
                abort = .redirectRefused("redirect to \(URLOrigin.redacted(value)) refused: \(problem)")
                return false
            }
        default: break
        }
        return true
    }

    /// The whole header block of one response has arrived: decide whether its body is ours.
    func endOfHeaders() -> Bool {
        if (100..<200).contains(status) || (300..<400).contains(status) { return true }
        switch status {
        case 200:
            if let encoding = contentEncoding, encoding != "identity" {
                abort = .encoding(encoding)
                return false
            }
            if let length = contentLength, request.sizeIsLimit ? length > request.size : length != request.size {
                abort = request.sizeIsLimit ? .tooLong : .sizeMismatch(length)
                return false
            }
            if onDisk > 0 {
                // The server ignored the range, or the file changed (If-Range): start over,
                // in place, with the bytes now arriving (P5).
                restartFromZero(requestedOffset > 0 ? "the server answered the range request with the whole file" : "restart")
                file?.seek(to: 0)
            }
            accepting = true
        case 206:
            guard let range = contentRange, range.start == onDisk, range.total == request.size else {
                let got = contentRange.map { "bytes \($0.start)-\($0.end)/\($0.total.map(String.init) ?? "*")" } ?? "none"
                abort = .restart("the server's Content-Range (\(got)) does not continue the partial at \(onDisk) of \(request.size)")
                return false
            }
            if let encoding = contentEncoding, encoding != "identity" {
                abort = .encoding(encoding)
                return false
            }
            accepting = true
        default:
            accepting = false
        }
        // The next attempt of this run (and a later run) resumes with the validators of the
        // answer whose bytes are on disk (If-Range): a whole file's, even none (the old ones
        // describe bytes that are gone); a continuation's when it gives them.
        if accepting, status == 200 || etag != nil || lastModified != nil {
            request.etag = etag
            request.lastModified = lastModified
            session.noteValidators(FileValidators(name: request.name, size: request.size, etag: etag, lastModified: lastModified))
        }
        return true
    }

    func curlBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        // Error pages and redirect bodies are not file content.
        guard accepting else { return bytes.count }
        // A write between callbacks (a tick's flush) failed: the attempt ends here.
        guard abort == nil else { return 0 }
        let received = onDisk + Int64(staged)
        var count = bytes.count
        var overflow = false
        if received + Int64(count) > request.size {
            count = Int(request.size - received)
            overflow = true
        }
        guard file != nil else { return 0 }
        // Its share of this loop cycle taken, the transfer waits for the next one; libcurl
        // keeps the bytes and offers them again once the session unpauses it.
        if let share = session.cycleShare, takenThisCycle >= share {
            paused = true
            pausedForShare = true
            return CurlEasy.pauseWriting
        }
        // The download's one byte budget: no tokens, no bytes (offered again likewise).
        if let limiter = session.limiter, !limiter.take(count) {
            paused = true
            return CurlEasy.pauseWriting
        }
        takenThisCycle += count
        var from = 0
        while from < count {
            let buffer = stage ?? session.hashWorker.takeBuffer()
            stage = buffer
            let n = min(count - from, buffer.count - staged)
            UnsafeMutableRawBufferPointer(rebasing: buffer[staged..<(staged + n)])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[from..<(from + n)]))
            staged += n
            from += n
            if staged == buffer.count && !flushStage() { return 0 }
        }
        if overflow {
            abort = .tooLong
            return 0
        }
        return bytes.count
    }

    /// Writes the staged bytes with one call, hands the buffer to the hash thread (exactly
    /// the bytes that reached the disk, so the hash and the file agree), and moves `onDisk`
    /// and the file's reader on. False when the write failed (`abort` says why).
    @discardableResult
    func flushStage() -> Bool {
        guard let buffer = stage, staged > 0, let file else { return true }
        let (written, failure) = file.write(UnsafeRawBufferPointer(rebasing: buffer[0..<staged]))
        stage = nil
        staged = 0
        if let hasher {
            session.hashWorker.feed(hasher, buffer: buffer, count: written)
        } else {
            session.hashWorker.giveBack(buffer)
        }
        onDisk += Int64(written)
        if written > 0 { reader?.written(upTo: onDisk) }
        if let failure {
            abort = failure.isOutOfSpace ? .noSpace : .system(failure)
            return false
        }
        if onDisk - writebackFrom >= FileJob.writebackChunk {
            file.startWriteback(from: writebackFrom, count: onDisk - writebackFrom)
            writebackFrom = onDisk
        }
        return true
    }
}
