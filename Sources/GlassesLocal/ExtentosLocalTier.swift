import Foundation
import GlassesCore
import LocalModelKit
import Synchronization

/// Why the cloud serves instead of a local model.
public typealias CloudFallbackReason = LocalModelKit.CloudFallbackReason

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
    }

    /// Which model serves, or why the cloud must.
    public struct AutoChoice: Sendable, Equatable {
        /// The local model to run now, nil when the cloud serves.
        public let modelId: String?
        public let isLocal: Bool
        public let cloudReason: CloudFallbackReason?
        /// The model worth downloading (the device's class rung, or a smaller one that fits storage).
        public let downloadTarget: String?
    }

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

        public var description: String {
            switch self {
            case .unknownModel(let id): return LocalModelError.unknownModel(id).description
            case .storeUnavailable(let message): return message
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

    /// The shared engine, built on first use.
    static func engine() throws(LocalTierError) -> LocalModelEngine {
        let result: Result<LocalModelEngine, LocalTierError> = shared.withLock { s in
            if let engine = s.engine { return .success(engine) }
            let environment = ProcessInfo.processInfo.environment
            guard let root = s.storeDirectory ?? StoreLayout.defaultRoot(environment: environment) else {
                s.problem = "no store folder: set EXTENTOS_MODELS_DIR or call ExtentosLocalTier.configure(storeDirectory:)"
                return .failure(.storeUnavailable(s.problem ?? ""))
            }
            do {
                let loader = CatalogLoader()
                let catalog = try (s.catalogFile ?? environment["EXTENTOS_CATALOG"]).map { path throws(CatalogError) in
                    try loader.load(contentsOf: path)
                } ?? loader.bundled()
                let engine = LocalModelEngine(layout: StoreLayout(root: root), catalog: catalog,
                                              probe: SystemDeviceProbe(environment: environment))
                s.engine = engine
                s.problem = nil
                return .success(engine)
            } catch {
                s.problem = "\(error)"
                return .failure(.storeUnavailable("\(error)"))
            }
        }
        return try result.get()
    }

    private static func note(_ error: any Error) {
        shared.withLock { $0.problem = "\(error)" }
    }

    // MARK: The API

    /// Makes the local tier known to the SDK. Call it before `Extentos.create(config:)`.
    public static func register() {
        LocalTierRegistry.register(Provider())
    }

    /// Every catalog model with its install state. Cheap: records and `stat` only.
    /// When the store cannot be read, models are listed as not installed and
    /// ``storeProblem`` says why.
    public static func models() -> [LocalModelInfo] {
        guard let engine = try? engine() else { return [] }
        let statuses: [ModelStatus]
        do {
            statuses = try engine.models()
        } catch {
            note(error)
            return engine.catalog.models.map { info($0, installed: false) }
        }
        return statuses.map { info($0.model, installed: $0.isInstalled) }
    }

    private static func info(_ m: CatalogModel, installed: Bool) -> LocalModelInfo {
        LocalModelInfo(id: m.id, displayName: m.displayName, requiredMb: m.requiredMb, isInstalled: installed,
                       autoEligible: m.autoEligible, kind: m.kind == .llm ? .llm : .voice,
                       downloadBytes: m.downloadBytes, installedBytes: m.installedBytes)
    }

    /// Which ladder model to run now, or why the cloud must serve.
    public static func autoChoice() -> AutoChoice {
        do {
            let d = try engine().autoChoice()
            return AutoChoice(modelId: d.modelId, isLocal: d.isLocal, cloudReason: d.cloudReason, downloadTarget: d.downloadTarget)
        } catch {
            note(error)
            return AutoChoice(modelId: nil, isLocal: false, cloudReason: .noEligibleRungs, downloadTarget: nil)
        }
    }

    /// Whether installing `dashboardId` fits the store's filesystem.
    ///
    /// An id the catalog does not have answers `requiredMb == 0, fits == false` (with the
    /// real `availableMb`): nothing can be installed under an unknown id.
    public static func deviceFit(for dashboardId: String) -> DeviceFit {
        do {
            let engine = try engine()
            guard engine.catalog.model(id: dashboardId) != nil else {
                let space = try? engine.probe.space(at: engine.layout.root)
                return DeviceFit(modelId: dashboardId, requiredMb: 0, availableMb: Int(max(0, space?.availableBytes ?? 0) >> 20), fits: false)
            }
            let fit = try engine.deviceFit(for: dashboardId)
            return DeviceFit(modelId: dashboardId, requiredMb: fit.requiredMb, availableMb: fit.availableMb, fits: fit.fits)
        } catch {
            note(error)
            return DeviceFit(modelId: dashboardId, requiredMb: 0, availableMb: 0, fits: false)
        }
    }

    /// The SDK seam's view of this tier.
    struct Provider: LocalTierProvider {
        var name: String { "GlassesLocal" }
        func route() -> LocalTierRoute {
            let choice = ExtentosLocalTier.autoChoice()
            return LocalTierRoute(modelId: choice.modelId, cloudReason: choice.cloudReason?.rawValue)
        }
    }
}

extension ExtentosLocalTier {
    /// The engine behind the facade, for the voice facade (same store, same catalog).
    public static func sharedEngine() throws(LocalTierError) -> LocalModelEngine {
        try engine()
    }
}
