import Foundation
import GlassesCore
import LocalModelKit

/// The on-device model tier of the Extentos SDK.
///
/// Call ``register()`` before `Extentos.create(config:)`, then ask ``models()``,
/// ``autoChoice()`` and ``deviceFit(for:)`` at start-up: they read the install records
/// and `stat` the store, nothing more.
///
/// ```swift
/// ExtentosLocalTier.register()
/// let glasses = Extentos.create(config: ExtentosConfig())
/// let choice = ExtentosLocalTier.autoChoice()
/// if let target = choice.downloadTarget { offerDownload(target) }
/// ```
///
/// The store is `$EXTENTOS_MODELS_DIR`, else `$XDG_DATA_HOME/extentos/models`, else
/// `~/.local/share/extentos/models`; ``configure(storeDirectory:catalogFile:)`` picks
/// another (an app's Application Support folder, say). The shipped catalog is built in.
public enum ExtentosLocalTier {
    /// One model of the catalog as the app sees it.
    public struct LocalModelInfo: Sendable, Equatable {
        /// What the model is for.
        public enum Kind: String, Sendable {
            /// A language model of the ladder, or the on-device voice.
            case llm, voice
        }
        /// The catalog id (`local-qwen3-1.7b`).
        public let id: String
        /// The name to show people.
        public let displayName: String
        /// Memory the loaded model needs, in MB.
        public let requiredMb: Int
        /// Every file verified and the install committed; for the voice (``allModels()``),
        /// as `KokoroVoiceModel.isInstalled()` answers (a bundle an app placed counts).
        public let isInstalled: Bool
        /// Whether ``autoChoice()`` may pick it.
        public let autoEligible: Bool
        /// An LLM or the voice.
        public let kind: Kind
        /// Bytes fetched by a full download (the archive's size for archive sources).
        public let downloadBytes: Int64
        /// Bytes on disk once installed.
        public let installedBytes: Int64
        /// The upstream SDK's name for the model's size: its bytes on disk once installed.
        public var totalBytes: Int64 { installedBytes }
    }

    /// Which model serves, or why the cloud must (the same type an SDK instance's
    /// `autoChoice()` answers with).
    public typealias AutoChoice = GlassesCore.AutoChoice

    /// Why the cloud serves instead of a local model.
    public typealias CloudFallbackReason = GlassesCore.CloudFallbackReason

    /// Whether installing a model fits this device's storage.
    public struct DeviceFit: Sendable, Equatable {
        /// The model asked about.
        public let modelId: String
        /// Storage installing it still needs, in MB (0 when installed).
        public let requiredMb: Int
        /// Free space on the store's filesystem for this user, minus other downloads' reservations.
        public let availableMb: Int
        /// Whether it fits, compared in bytes (the MB figures are rounded: up for
        /// `requiredMb`, down for `availableMb`). Get-only, as upstream's.
        public var fits: Bool { fitsInBytes }
        private let fitsInBytes: Bool

        init(modelId: String, requiredMb: Int, availableMb: Int, fits: Bool) {
            self.modelId = modelId
            self.requiredMb = requiredMb
            self.availableMb = availableMb
            self.fitsInBytes = fits
        }
    }

    /// The upstream SDK's error of the local tier: an id the catalog does not have.
    ///
    /// It keeps upstream's one case, so an app's exhaustive `switch` compiles. Every other
    /// failure (storage, integrity, network, a busy model, a store that cannot be opened)
    /// is thrown as this package's own typed error, ``EngineError`` (`LocalModelError`):
    /// a case per failure with its stable ``/LocalModelKit/LocalModelError/code`` and exit status, and a
    /// description that says what to do.
    ///
    /// ```swift
    /// do {
    ///     try await ExtentosLocalTier.download(modelId: id)
    /// } catch let error as ExtentosLocalTier.LocalTierError {
    ///     switch error {
    ///     case .unknownModel(let id): showMissing(id)
    ///     }
    /// } catch let error as ExtentosLocalTier.EngineError where error.code == .insufficientStorage {
    ///     askToFreeSpace(error.description)
    /// }
    /// ```
    public enum LocalTierError: Error, Sendable, Equatable, CustomStringConvertible {
        /// The catalog has no model with this id.
        case unknownModel(String)

        /// What went wrong and what to do.
        public var description: String {
            switch self {
            case .unknownModel(let id): return LocalModelError.unknownModel(id).description
            }
        }
    }

    /// Every failure other than an unknown id: the engine's typed error, with its stable
    /// `code` (`ErrorCode`, also the command's `--json` error code) and `exitStatus`.
    public typealias EngineError = LocalModelError

    /// Upstream's error where there is one (an unknown id), Swift's `CancellationError` for a
    /// cancelled task (the engine's `cancelled`, which the command line reports as exit 130),
    /// else the engine's own.
    package static func facadeError(_ error: LocalModelError) -> any Error {
        switch error {
        case .unknownModel(let id): return LocalTierError.unknownModel(id)
        case .cancelled: return CancellationError()
        default: return error
        }
    }

    // MARK: Configuration

    private struct Shared {
        var storeDirectory: String?
        var catalogFile: String?
        var engine: LocalModelEngine?
        var problem: String?
    }

    private static let shared = Locked(Shared())

    /// Chooses the store folder and, optionally, a catalog file instead of the built-in one.
    /// Call it before anything else; a later call switches to a new engine.
    public static func configure(storeDirectory: String? = nil, catalogFile: String? = nil) {
        shared.withLock { $0 = Shared(storeDirectory: storeDirectory, catalogFile: catalogFile) }
    }

    /// The last problem met opening the store or catalog, for the app's diagnostics; nil when all is well.
    public static var storeProblem: String? { shared.withLock { $0.problem } }

    /// The shared engine, built on first use by the engine's own setup (the same one the
    /// command uses): this facade only chooses the store folder and catalog file.
    static func engine() throws(LocalModelError) -> LocalModelEngine {
        let result: Result<LocalModelEngine, LocalModelError> = shared.withLock { s in
            if let engine = s.engine { return .success(engine) }
            do throws(LocalModelError) {
                let engine = try EngineSetup(storeDirectory: s.storeDirectory, catalogFile: s.catalogFile).makeEngine()
                s.engine = engine
                s.problem = nil
                return .success(engine)
            } catch {
                s.problem = error.description
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Keeps the engine's reason for a degraded answer, for ``storeProblem``.
    private static func note(_ problem: LocalModelError?) {
        guard let problem else { return }
        shared.withLock { $0.problem = problem.description }
    }

    // MARK: The API

    /// Makes the local tier known to the SDK. Call it before `Extentos.create(config:)`:
    /// an instance created earlier keeps serving from the cloud, and a diagnostic naming
    /// that `create` call and this one (both read from the call stack) is printed and kept
    /// in `Extentos.diagnostics`.
    ///
    /// As upstream's, it sets `LocalTierRegistry.autoResolver`, the SDK core's seam for
    /// `local-auto`: this tier's ``autoChoice()`` as an `AutoResolution` (served remotely,
    /// every rung's weights count as present).
    ///
    /// Free: no I/O. The store is opened by the first ``models()`` or ``autoChoice()``.
    /// Calling it again, or from several threads at once, changes nothing. Upstream's
    /// signature, its only declaration: `let setUp = ExtentosLocalTier.register` compiles.
    public static func register() {
        LocalTierRegistry.autoResolver = { servedRemotely in resolve(servedRemotely: servedRemotely) }
        LocalTierRegistry.register(models: Tier(), site: nil)
    }

    /// `local-auto` for upstream's seam: the engine's decision without this package's
    /// extras. A store that cannot be read resolves to the cloud (`noEligibleRungs`), and
    /// ``storeProblem`` says why.
    static func resolve(servedRemotely: Bool) -> AutoResolution {
        let decision: AutoDecision
        do {
            decision = try engine().autoChoice(servedRemotely: servedRemotely)
        } catch {
            note(error)
            return .cloud(reason: .noEligibleRungs, downloadTarget: nil)
        }
        if let modelId = decision.modelId { return .local(modelId: modelId) }
        return .cloud(reason: decision.cloudReason.map(CloudFallbackReason.init) ?? .noEligibleRungs, downloadTarget: decision.downloadTarget)
    }

    /// The LLM ladder with its install state, as the upstream SDK answers: the models an
    /// app's model picker may offer (never the voice; ``allModels()`` has the whole
    /// catalog). Cheap: records and `stat` only. When the store cannot be read, models
    /// are listed as not installed and ``storeProblem`` says why.
    public static func models() -> [LocalModelInfo] {
        allModels().filter { $0.kind == .llm }
    }

    /// Every catalog model, the on-device voice included, with its install state.
    public static func allModels() -> [LocalModelInfo] {
        guard let engine = try? engine() else { return [] }
        let (statuses, problem) = engine.modelsAnswer()
        note(problem)
        return statuses.map { s in
            LocalModelInfo(id: s.model.id, displayName: s.model.displayName, requiredMb: s.model.requiredMb,
                           isInstalled: s.isInstalled || s.placedBundle,
                           autoEligible: s.model.autoEligible, kind: s.model.kind == .llm ? .llm : .voice,
                           downloadBytes: s.model.downloadBytes, installedBytes: s.model.installedBytes)
        }
    }

    /// Which ladder model to run now, or why the cloud must serve: ``/GlassesCore/AutoChoice/cloudReason``
    /// is one of upstream's four reasons; ``/GlassesCore/AutoChoice/cloudDetail`` and
    /// ``/GlassesCore/AutoChoice/storageShortfall`` say more where this package knows more (no download
    /// fits the free storage: `weightsNotPresent` with the detail `insufficientStorage` and
    /// the class model's fit). When the store cannot be read: cloud, `noEligibleRungs`, and
    /// ``storeProblem`` says why.
    public static func autoChoice() -> AutoChoice {
        guard let engine = try? engine() else { return .cloud(.noEligibleRungs) }
        do {
            return AutoChoice(try engine.autoChoice())
        } catch {
            note(error)
            return .cloud(.noEligibleRungs)
        }
    }

    /// Whether installing `dashboardId` fits the store's filesystem.
    ///
    /// An id the catalog does not have answers `requiredMb == 0, fits == false` (with the
    /// real `availableMb`): nothing can be installed under an unknown id.
    public static func deviceFit(for dashboardId: String) -> DeviceFit {
        guard let engine = try? engine() else { return DeviceFit(modelId: dashboardId, requiredMb: 0, availableMb: 0, fits: false) }
        let (fit, problem) = engine.fitAnswer(for: dashboardId)
        note(problem)
        return DeviceFit(modelId: fit.modelId, requiredMb: fit.requiredMb, availableMb: fit.availableMb, fits: fit.fits)
    }

    /// Downloads, verifies and installs a model, resuming any partial data.
    ///
    /// `onProgress` receives a byte-weighted fraction in [0, 1]: non-decreasing, starting
    /// at what is already on disk, a few calls a second at most, and exactly one 1.0, after
    /// the install has committed. Cancelling the task stops the transfer promptly, keeps
    /// the partial data for a later call, and throws `CancellationError`.
    ///
    /// ```swift
    /// try await ExtentosLocalTier.download(modelId: "local-qwen3-1.7b") { fraction in
    ///     Task { @MainActor in progressView.progress = fraction }
    /// }
    /// ```
    /// - Throws: `CancellationError` when the task was cancelled; ``LocalTierError/unknownModel(_:)``
    ///   for an id the catalog does not have; every other failure as ``EngineError``
    ///   (`insufficientStorage`, `busy`, `integrityMismatch`, `temporary`, …). Nothing is
    ///   ever left half-installed.
    public static func download(modelId: String, onProgress: @escaping @Sendable (Double) -> Void = { _ in }) async throws {
        try await downloadWithEvents(modelId: modelId, options: DownloadOptions()) { event in
            if case .progress(_, _, let fraction, _) = event { onProgress(fraction) }
        }
    }

    /// ``download(modelId:onProgress:)`` with every event (phase, bytes, total, rate,
    /// retries with their cause, stalls, done) as the download runs, and the transfer's
    /// options. A name of its own: upstream's `download` has one declaration, so
    /// `let fetch = ExtentosLocalTier.download` compiles.
    /// - Throws: as ``download(modelId:onProgress:)``.
    public static func downloadWithEvents(modelId: String, options: DownloadOptions,
                                          onEvent: @escaping @Sendable (DownloadEvent) -> Void) async throws {
        do {
            _ = try await engine().download(modelId: modelId, options: options, onEvent: onEvent)
        } catch {
            throw facadeError(error)
        }
    }

    /// Deletes a model's files, partial data and record.
    ///
    /// As upstream: false when there was nothing to delete, for an id the catalog does not
    /// have as for a model that is not installed (an unknown id is not an error here), also
    /// on a device whose store does not exist yet (or has no place at all): nothing is
    /// created to answer.
    /// - Throws: ``EngineError`` `busy` while any process downloads the model; the store's
    ///   own failures (it cannot be opened or written) as ``EngineError`` too.
    @discardableResult
    public static func delete(modelId: String) throws -> Bool {
        do {
            return try engine().delete(modelId: modelId).existed
        } catch .unknownModel, .noStoreFolder {
            return false
        }
    }

    /// The SDK seam's view of this tier.
    struct Tier: LocalModelTier {
        func autoChoice() -> AutoChoice { ExtentosLocalTier.autoChoice() }
    }
}

extension ExtentosLocalTier {
    /// The engine behind the facade, for the voice facade (same store, same catalog).
    package static func sharedEngine() throws(LocalModelError) -> LocalModelEngine {
        try engine()
    }

    /// The store the shared engine uses, without opening anything or reading the catalog;
    /// nil only when nothing names a store folder (no `HOME`, no `EXTENTOS_MODELS_DIR`, no
    /// ``configure(storeDirectory:catalogFile:)``).
    public static func sharedStoreLayout() -> StoreLayout? {
        if let engine = shared.withLock({ $0.engine }) { return engine.layout }
        let directory = shared.withLock { $0.storeDirectory }
        return EngineSetup(storeDirectory: directory).storeRoot.map { StoreLayout(root: $0) }
    }
}

extension AutoChoice {
    /// The engine's decision as the SDK hands it to an app: its reasons mapped onto
    /// upstream's (the same names and meanings).
    init(_ decision: AutoDecision) {
        self.init(modelId: decision.modelId, cloudReason: decision.cloudReason.map(CloudFallbackReason.init),
                  downloadTarget: decision.downloadTarget, cloudDetail: decision.cloudDetail.map(CloudFallbackDetail.init),
                  storageShortfall: decision.storageShortfall.map {
                      AutoChoice.StorageShortfall(modelId: $0.modelId, requiredMb: $0.requiredMb, availableMb: $0.availableMb)
                  })
    }
}

extension CloudFallbackReason {
    init(_ reason: CloudReason) {
        switch reason {
        case .belowQualityFloor: self = .belowQualityFloor
        case .insufficientMemoryNow: self = .insufficientMemoryNow
        case .weightsNotPresent: self = .weightsNotPresent
        case .noEligibleRungs: self = .noEligibleRungs
        }
    }
}

extension CloudFallbackDetail {
    init(_ detail: CloudDetail) {
        switch detail {
        case .insufficientStorage: self = .insufficientStorage
        }
    }
}
