import Foundation
import GlassesCore
import GlassesLocal
import LocalModelKit

/// The on-device voice (Kokoro) as the SDK sees it.
public enum ExtentosLocalVoice {
    /// Makes the on-device voice known to the SDK. Call it before `Extentos.create(config:)`:
    /// an instance created earlier keeps the cloud voice, and a diagnostic naming that
    /// `create` call and this one (both read from the call stack) is printed and kept in
    /// `Extentos.diagnostics`. Free: no I/O.
    ///
    /// Upstream's signature, its only declaration: `let setUpVoice = ExtentosLocalVoice.register`
    /// compiles.
    public static func register() {
        LocalTierRegistry.register(voice: Tier(), site: nil)
    }

    /// Whether ``register()`` ran.
    public static var isRegistered: Bool { LocalTierRegistry.isRegistered(.voice) }

    struct Tier: LocalVoiceTier {
        func isInstalled() -> Bool { KokoroVoiceModel.isInstalled() }
    }

    /// The voice bundle's folder, installed or not, as upstream: an app may seed it with the
    /// bundle's files (see ``KokoroVoiceModel/isInstalled()`` for how a placed bundle becomes
    /// an install). Nil only when no store location can be determined (no `HOME`, no
    /// `EXTENTOS_MODELS_DIR`, no `ExtentosLocalTier.configure(storeDirectory:)`).
    ///
    /// `<store>/voices/kokoro-en-v0_19`. No I/O beyond what finding the store needs: the
    /// folder is not created.
    public static var modelDirectory: URL? {
        guard let layout = ExtentosLocalTier.sharedStoreLayout() else { return nil }
        return URL(fileURLWithPath: layout.installPath(id: KokoroVoiceModel.modelId, kind: .voice), isDirectory: true)
    }
}

/// The Kokoro English voice bundle (11 speakers), catalog id `kokoro-en-v0_19`.
public enum KokoroVoiceModel {
    /// The catalog id of the voice bundle.
    public static let modelId = "kokoro-en-v0_19"

    /// Upstream's download errors, with upstream's three cases (an app `switch`es over them
    /// without a `default:`). Every other failure (storage, network, a busy model, a store
    /// that cannot be opened) is thrown as `ExtentosLocalTier.EngineError`.
    public enum DownloadError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No store location can be determined (``ExtentosLocalVoice/modelDirectory`` is nil).
        case documentsUnavailable
        /// The server answered `status` (a final answer: 404, 403, 410, …) for the file at
        /// `path` of the bundle.
        case httpStatus(Int, path: String)
        /// The file at `path` did not match the catalog's SHA-256 or size; its bytes were
        /// discarded.
        case integrityMismatch(path: String)

        /// What went wrong and what to do.
        public var description: String {
            switch self {
            case .documentsUnavailable:
                return "no store folder for the voice: set EXTENTOS_MODELS_DIR (or HOME), or call ExtentosLocalTier.configure(storeDirectory:)."
            case let .httpStatus(status, path):
                return "\(path) of \(KokoroVoiceModel.modelId): the server answered HTTP \(status), a final answer; check the catalog's source or mirror. Nothing was installed."
            case .integrityMismatch(let path):
                return "\(path) of \(KokoroVoiceModel.modelId) failed verification; the bad bytes were discarded. Run the download again; if it fails again, the source serves a different file."
            }
        }

        /// Upstream's case for an engine error, where one has the same meaning.
        static func upstream(_ error: LocalModelError) -> DownloadError? {
            switch error {
            case .noStoreFolder: return .documentsUnavailable
            case let .httpStatus(_, file, _, status, _): return .httpStatus(status, path: file)
            case let .integrityMismatch(_, file, _, _), let .sizeMismatch(_, file, _, _, _), let .incompleteInstall(_, file, _):
                return .integrityMismatch(path: file)
            default: return nil
            }
        }
    }

    /// Bytes of the installed bundle (from the catalog; 0 if the catalog lacks it).
    public static var totalBytes: Int {
        guard let engine = try? ExtentosLocalTier.sharedEngine(),
              let model = engine.catalog.model(id: modelId) else { return 0 }
        return Int(model.installedBytes)
    }

    /// Deletes the voice bundle: its folder (a placed bundle too), partial data and record.
    /// Nothing there is not an error, as upstream: with nothing installed (no store yet, or
    /// no place for one) it returns, writing nothing.
    /// - Throws: `ExtentosLocalTier.EngineError` `busy` while a download of the voice runs;
    ///   the store's own failures while removing what is there.
    public static func delete() throws {
        try ExtentosLocalTier.delete(modelId: modelId)
    }

    /// Downloads, verifies and installs the voice bundle; `progress` as in
    /// `ExtentosLocalTier.download(modelId:onProgress:)`. A bundle placed in
    /// ``ExtentosLocalVoice/modelDirectory`` whose files all check out is installed as it
    /// is, with nothing fetched.
    /// - Throws: `CancellationError` when the task was cancelled (the partial data kept);
    ///   ``DownloadError`` where upstream has the case; every other failure as
    ///   `ExtentosLocalTier.EngineError`.
    public static func download(progress: @escaping @Sendable (Double) -> Void) async throws {
        do {
            _ = try await ExtentosLocalTier.sharedEngine().download(modelId: modelId, options: DownloadOptions()) { event in
                if case .progress(_, _, let fraction, _) = event { progress(fraction) }
            }
        } catch {
            if let upstream = DownloadError.upstream(error) { throw upstream }
            throw ExtentosLocalTier.facadeError(error)
        }
    }

    /// Whether the voice serves from the device, as upstream documents it: its install
    /// committed (every file verified, recorded), or every bundle file is in
    /// ``ExtentosLocalVoice/modelDirectory`` with its catalog size (a bundle the app placed
    /// there). Records and `lstat`s only: a placed bundle's hashes are checked, and the
    /// bundle installed as it is, by ``adoptPlacedBundle()``, ``download(progress:)`` or
    /// `glasses-local verify`, never here. One already found not to match answers false.
    public static func isInstalled() -> Bool {
        guard let engine = try? ExtentosLocalTier.sharedEngine(), let status = try? engine.status(of: modelId) else { return false }
        return status.isInstalled || status.placedBundle
    }

    /// Checks the hashes of a bundle placed in ``ExtentosLocalVoice/modelDirectory`` and,
    /// when every file matches, installs it as it is (recorded, never fetched). Hashing
    /// 369 MB takes seconds on a phone: it runs on a thread of its own, never the caller's.
    /// ``download(progress:)`` does the same before fetching anything.
    /// - Returns: whether a bundle was adopted by this call (false when none is there, it
    ///   is incomplete or does not match, or the voice is installed already).
    /// - Throws: `ExtentosLocalTier.EngineError` (`busy` while a download of the voice runs,
    ///   the store's own failures).
    @discardableResult
    public static func adoptPlacedBundle() async throws -> Bool {
        try await ExtentosLocalTier.sharedEngine().adoptPlacedBundleInBackground(modelId: modelId)
    }
}
