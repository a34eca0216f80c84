import Foundation
import GlassesCore
import LocalModelKit
import Synchronization

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
        public enum Kind: String, Sendable {
            case llm, voice
        }
        public let id: String
        public let displayName: String
        /// Memory the loaded model needs, in MB.
        public let requiredMb: Int
        /// Every file verified and the install committed.
        public let isInstalled: Bool
        /// Whether ``autoChoice()`` may pick it.
        public let autoEligible: Bool
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
        public let modelId: String
        /// Storage installing it still needs, in MB (0 when installed).
        public let requiredMb: Int
        /// Free space on the store's filesystem for this user, minus other downloads' reservations.
        public let availableMb: Int
        public var fits: Bool
    }

    /// Errors of the local tier; each description says what to do.
    public enum LocalTierError: Error, Sendable, Equatable, CustomStringConvertible {
        case unknownModel(String)
        /// The store or its records cannot be used (message says which file and how to recover).
        case storeUnavailable(String)
        /// Another process (or call) is downloading or deleting the model.
        case busy(String)
        /// The download does not fit: checked before any byte moves.
        case insufficientStorage(requiredMb: Int, availableMb: Int)
        /// The disk filled up mid-way; what was downloaded is kept for a resume.
        case diskFull(modelId: String, neededMb: Int)
        /// A file failed its SHA-256 or size check; the bad bytes were discarded.
        case integrityFailure(modelId: String, file: String, detail: String)
        /// Network or server trouble outlasted the retries: try again later.
        case temporary(modelId: String, detail: String)
        /// The server refused (404, https→http redirect, TLS failure, …).
        case failed(modelId: String, detail: String)
        /// The task was cancelled; partial data is kept.
        case cancelled(modelId: String)

        public var description: String {
            switch self {
            case .unknownModel(let id): return LocalModelError.unknownModel(id).description
            case .storeUnavailable(let message): return message
            case .busy(let id): return DownloadError.busy(modelId: id).description
            case let .insufficientStorage(required, available):
                return "the model needs \(required) MiB of storage but only \(available) MiB is available; free \(required - available) MiB and retry. Nothing was downloaded."
            case let .diskFull(id, needed): return "the disk filled up while downloading \(id); free at least \(needed) MiB and retry — what was downloaded is kept."
            case let .integrityFailure(_, _, detail), let .temporary(_, detail), let .failed(_, detail): return detail
            case .cancelled(let id): return "download of \(id) cancelled; partial data is kept for the next attempt."
            }
        }

        /// The engine's error, by its stable code (the same code the command's exit status
        /// and `--json` read).
        init(_ error: LocalModelError) {
            let id = error.modelId ?? ""
            switch error.code {
            case .unknownModel: self = .unknownModel(id)
            case .busy: self = .busy(id)
            case .insufficientStorage:
                if case let .insufficientStorage(_, required, available) = error {
                    self = .insufficientStorage(requiredMb: required, availableMb: available)
                } else {
                    self = .failed(modelId: id, detail: error.description)
                }
            case .diskFull:
                if case let .diskFull(_, _, needed, _) = error {
                    self = .diskFull(modelId: id, neededMb: needed)
                } else {
                    self = .diskFull(modelId: id, neededMb: LocalModelError.recordsRoomMb)
                }
            case .integrityMismatch, .sizeMismatch, .unsafeArchive, .incompleteInstall:
                var file = "archive"
                switch error {
                case let .integrityMismatch(_, f, _, _), let .sizeMismatch(_, f, _, _, _), let .incompleteInstall(_, f, _): file = f
                default: break
                }
                self = .integrityFailure(modelId: id, file: file, detail: error.description)
            case .temporary: self = .temporary(modelId: id, detail: error.description)
            case .interrupted: self = .cancelled(modelId: id)
            case .noStore, .invalidCatalog, .catalogRollback, .catalogExpired, .catalogUnavailable, .signatureInvalid, .recordsDamaged, .readOnly, .records: self = .storeUnavailable(error.description)
            case .httpStatus, .refused, .noSource, .notInstalled, .io: self = .failed(modelId: id, detail: error.description)
            }
        }
    }

    // MARK: Configuration

    private struct Shared {
        var storeDirectory: String?
        var catalogFile: String?
        var engine: LocalModelEngine?
        var problem: String?
    }

    private static let shared = Mutex(Shared())

    /// Chooses the store folder and, optionally, a catalog file instead of the built-in one.
    /// Call it before anything else; a later call switches to a new engine.
    public static func configure(storeDirectory: String? = nil, catalogFile: String? = nil) {
        shared.withLock { $0 = Shared(storeDirectory: storeDirectory, catalogFile: catalogFile) }
    }

    /// The last problem met opening the store or catalog, for the app's diagnostics; nil when all is well.
    public static var storeProblem: String? { shared.withLock { $0.problem } }

    /// The shared engine, built on first use by the engine's own setup (the same one the
    /// command uses): this facade only chooses the store folder and catalog file.
    static func engine() throws(LocalTierError) -> LocalModelEngine {
        let result: Result<LocalModelEngine, LocalTierError> = shared.withLock { s in
            if let engine = s.engine { return .success(engine) }
            do throws(LocalModelError) {
                let engine = try EngineSetup(storeDirectory: s.storeDirectory, catalogFile: s.catalogFile).makeEngine()
                s.engine = engine
                s.problem = nil
                return .success(engine)
            } catch {
                s.problem = error.description
                return .failure(LocalTierError(error))
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
    /// that `create` call is printed and kept in `Extentos.diagnostics`.
    ///
    /// Free: no I/O. The store is opened by the first ``models()`` or ``autoChoice()``.
    /// Calling it again, or from several threads at once, changes nothing.
    public static func register(fileID: String = #fileID, line: Int = #line) {
        LocalTierRegistry.register(models: Tier(), site: "\(fileID):\(line)")
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
            LocalModelInfo(id: s.model.id, displayName: s.model.displayName, requiredMb: s.model.requiredMb, isInstalled: s.isInstalled,
                           autoEligible: s.model.autoEligible, kind: s.model.kind == .llm ? .llm : .voice,
                           downloadBytes: s.model.downloadBytes, installedBytes: s.model.installedBytes)
        }
    }

    /// Which ladder model to run now, or why the cloud must serve.
    public static func autoChoice() -> AutoChoice {
        guard let engine = try? engine() else { return .cloud(.noEligibleRungs) }
        let (choice, problem) = engine.autoChoiceAnswer()
        note(problem)
        return choice
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
    /// the install has committed. Cancelling the task stops the transfer promptly and keeps
    /// the partial data for a later call.
    ///
    /// ```swift
    /// try await ExtentosLocalTier.download(modelId: "local-qwen3-1.7b") { fraction in
    ///     Task { @MainActor in progressView.progress = fraction }
    /// }
    /// ```
    /// - Throws: ``LocalTierError``; nothing is ever left half-installed.
    public static func download(modelId: String, onProgress: @escaping @Sendable (Double) -> Void = { _ in }) async throws {
        try await download(modelId: modelId, options: DownloadOptions()) { event in
            if case .progress(_, _, let fraction, _) = event { onProgress(fraction) }
        }
    }

    /// The richer form: every event (phase, bytes, total, rate, retries with their cause,
    /// stalls, done) as the download runs.
    public static func download(modelId: String, options: DownloadOptions,
                                onEvent: @escaping @Sendable (DownloadEvent) -> Void) async throws {
        let engine = try engine()
        do {
            _ = try await engine.download(modelId: modelId, options: options, onEvent: onEvent)
        } catch {
            throw LocalTierError(error)
        }
    }

    /// Deletes a model's files, partial data and record.
    /// - Returns: false when there was nothing to delete.
    /// - Throws: ``LocalTierError/busy(_:)`` while any process downloads the model.
    @discardableResult
    public static func delete(modelId: String) throws -> Bool {
        let engine = try engine()
        do {
            return try engine.delete(modelId: modelId).existed
        } catch {
            throw LocalTierError(error)
        }
    }

    /// The SDK seam's view of this tier.
    struct Tier: LocalModelTier {
        func autoChoice() -> AutoChoice { ExtentosLocalTier.autoChoice() }
    }
}

extension ExtentosLocalTier {
    /// The engine behind the facade, for the voice facade (same store, same catalog).
    public static func sharedEngine() throws(LocalTierError) -> LocalModelEngine {
        try engine()
    }
}
