import FoundationEssentials

extension LocalModelEngine {
    // MARK: Public entry points

    /// Downloads, verifies and installs a model; async, cancellable.
    ///
    /// Runs the blocking transfer on a thread of its own. Task cancellation stops the
    /// transfer within a poll interval (≤ 100 ms) and keeps the partial data.
    public func download(modelId: String, options: DownloadOptions = DownloadOptions(),
                         onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }) async throws(LocalModelError) -> String {
        let flag = CancellationFlag()
        let result: Result<String, LocalModelError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<String, LocalModelError>, Never>) in
                Threads.start(name: "gl-download") {
                    let outcome: Result<String, LocalModelError>
                    do throws(LocalModelError) {
                        outcome = .success(try self.downloadBlocking(modelId: modelId, options: options, cancellation: flag, onEvent: onEvent))
                    } catch {
                        outcome = .failure(error)
                    }
                    continuation.resume(returning: outcome)
                }
            }
        } onCancel: {
            flag.cancel()
        }
        return try result.get()
    }

    /// Downloads, verifies and installs a model on the calling thread.
    /// - Returns: the install folder.
    public func downloadBlocking(modelId: String, options: DownloadOptions, cancellation: CancellationFlag,
                                 onEvent: @escaping (DownloadEvent) -> Void) throws(LocalModelError) -> String {
        guard let found = catalog.model(id: modelId) else { throw .unknownModel(modelId) }
        // With a source asked for, sizes, partial data and the space check follow it.
        let model = found.using(options.source)
        guard !model.sources.isEmpty else { throw .noSource(modelId: modelId, kind: options.source) }
        onEvent(.phase(.resolve))
        // libcurl loads while the store is opened and the records are written (unless the
        // model looks installed already, or nothing may be fetched).
        let warm = options.policy.offlineBy == nil && !FileIO.isDirectory(layout.installPath(id: model.id, kind: model.kind))
            ? CurlEasy.warmUp() : nil
        defer { warm?.wait() }
        let records: Records
        records = try open().records
        try requireStoreCatalog()
        // What the Hugging Face cache holds of it may make a per-file source the better one.
        let copies = huggingFaceCopies(of: model)
        let chosen = copies.map { model.preferringFiles(given: $0, layout: layout) } ?? model
        // The Hugging Face token may go to the origins of this model's sources that ask for
        // it (through HF_ENDPOINT when that applies); a bad HF_ENDPOINT stops here.
        let options = try options.authorizing(chosen)
        return try withModelLock(modelId) { () throws(LocalModelError) in
            try DownloadRun(engine: self, model: chosen, records: records, options: options, cancellation: cancellation,
                            huggingFaceCopies: copies, onEvent: onEvent).execute()
        }
    }
}
