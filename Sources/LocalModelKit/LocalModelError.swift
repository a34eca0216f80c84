/// The exit statuses of `glasses-local`, the one table of them: 0 ok, 1 failure, 2 usage,
/// 3 storage, 4 integrity, 5 unknown model, 6 invalid catalog, 7 busy, 75 temporary (the
/// BSD `EX_TEMPFAIL` a scheduler retries on), 77 credentials needed or refused (the BSD
/// `EX_NOPERM`), 130 interrupted (128 + SIGINT).
public enum ExitStatus: Int32, Sendable, CaseIterable {
    /// 0: the command did what was asked (or found nothing to do).
    case ok = 0
    /// 1: a failure with no status of its own (a network answer, the records, the disk).
    case failure = 1
    /// 2: the command line itself is wrong; nothing was done.
    case usage = 2
    /// 3: the model does not fit the store's free space, or the disk filled up mid-way.
    case doesNotFit = 3
    /// 4: bytes did not match the catalog (SHA-256 or size), an archive was unsafe, or a
    /// catalog's signature did not verify.
    case integrity = 4
    /// 5: the catalog has no model with that id.
    case unknownModel = 5
    /// 6: the catalog is invalid, expired, a rollback, or unavailable.
    case invalidCatalog = 6
    /// 7: another process is installing or changing the model.
    case busy = 7
    /// 75 (`EX_TEMPFAIL`): the network or server failed for longer than the retry budget;
    /// a scheduler retries later.
    case temporary = 75
    /// 77 (`EX_NOPERM`): a source wants a credential, or refused the one sent.
    case authRequired = 77
    /// 130 (128 + SIGINT): interrupted; partial data is kept for a resume.
    case interrupted = 130

    /// What the status means, for help texts.
    public var meaning: String {
        switch self {
        case .ok: return "ok"
        case .failure: return "failure"
        case .usage: return "usage"
        case .doesNotFit: return "does not fit"
        case .integrity: return "integrity failure"
        case .unknownModel: return "unknown model"
        case .invalidCatalog: return "invalid catalog"
        case .busy: return "busy"
        case .temporary: return "temporary (retry later)"
        case .authRequired: return "credentials needed or refused"
        case .interrupted: return "interrupted"
        }
    }
}

/// The stable machine code of a failure, and the exit status the command maps it to.
/// The command line's exit status, its `--json` error `code`, and the facades' errors all
/// read this; the raw values never change once shipped.
public enum ErrorCode: String, Sendable, CaseIterable {
    /// The catalog has no model with this id.
    case unknownModel
    /// The catalog failed validation (every problem is listed with its JSON path), or a
    /// remote catalog was larger than its cap.
    case invalidCatalog
    /// The catalog is older than one this store has already accepted.
    case catalogRollback
    /// Another process (or task) holds the model's lock: it is being installed or changed.
    case busy
    /// The catalog's `expiresAt` has passed.
    case catalogExpired
    /// The store has used a newer catalog than any trusted copy left (one was damaged and
    /// set aside, or removed): installed models keep working, downloads wait for an update.
    case catalogUnavailable
    /// A catalog's detached signature is missing, malformed, or not by a trusted key.
    case signatureInvalid
    /// Nothing names a store folder (no HOME, no `EXTENTOS_MODELS_DIR`, none given).
    case noStore
    /// Storage: the check before any byte moved, or a disk that filled up mid-way
    /// (a download's bytes, or the records database).
    case insufficientStorage, diskFull
    /// A file's bytes did not match the catalog's SHA-256; they were discarded.
    case integrityMismatch
    /// A server sent more bytes than, or other bytes than, the catalog declares.
    case sizeMismatch
    /// An archive failed the unpacking checks (a link, a path that climbs out, a size over
    /// the catalog's); nothing was installed.
    case unsafeArchive
    /// A verified tree lacks a catalog file (or has it with another size); not installed.
    case incompleteInstall
    /// Network or server trouble outlasted the retry budget; partial data is kept.
    case temporary
    /// A final HTTP answer (404, 410, a 403 from a CDN, …): not retried.
    case httpStatus
    /// A transfer or a write that breaks a rule: a redirect to plain http, TLS verification
    /// failing, a URL with a login, a `mirror` folder inside the store.
    case refused
    /// The catalog has no source this build can use for the model.
    case noSource
    /// Cancelled (a task's cancellation, SIGINT, SIGTERM, SIGHUP); partial data is kept.
    case interrupted
    /// The model is not installed (`verify` of a model never downloaded).
    case notInstalled
    /// A source answered 401 or 403 to a request that carried no credential, or refused the
    /// one it carried (the message names the variable or file to set).
    case authRequired
    /// The Hugging Face token a request needed cannot be used: its file is there but is not
    /// a regular file (a FIFO, a device, a socket, a folder) or cannot be read, or the token
    /// holds a control character. Nothing was sent; the message names the file or variable.
    case tokenUnusable
    /// The network is switched off (`--offline`, `EXTENTOS_OFFLINE`, `HF_HUB_OFFLINE`,
    /// `TRANSFORMERS_OFFLINE`) and the command needed it.
    case offline
    /// A setting from the environment cannot be used (`HF_ENDPOINT` that is not an https
    /// URL, or plain http off loopback); the message names the variable.
    case invalidSetting
    /// The records database is damaged, read-only for this user, newer, or otherwise unusable.
    case recordsDamaged, readOnly, records
    /// A system call failed (the message names the file and the call).
    case io
    /// The command line itself: an unknown command or option, a missing or bad value.
    case usage
    /// `catalog hash DIR`: an entry that is not a regular file, no file at all, a path a
    /// catalog cannot hold, an empty file.
    case notRegularFile, empty, badPath, emptyFile
    /// `import`: some files were not found, or did not match; the rest were kept.
    case importIncomplete
    /// `add`: none of the repository's files taken is a safetensors file (a GGUF-only
    /// repository, say), so there is nothing this tool can install or estimate.
    case noSafetensors
    /// `add`: a safetensors header or a config.json of the repository cannot be read (over
    /// 100 MB, not JSON, tensors that do not fit the file).
    case invalidModelFile
    /// `add`: the Hub's answer is not what its API gives (a malformed model information, a
    /// range request answered with other bytes).
    case invalidHubAnswer
    /// `add`: the id belongs to the signed or built-in catalog, or was added before (and
    /// `--force` was not given).
    case idTaken
    /// `remove`: the id is a model of the signed or built-in catalog, not one a user added.
    case notUserModel

    /// The exit status the command ends with for this failure.
    public var exit: ExitStatus {
        switch self {
        case .usage: return .usage
        case .insufficientStorage, .diskFull: return .doesNotFit
        case .integrityMismatch, .sizeMismatch, .unsafeArchive, .signatureInvalid: return .integrity
        case .unknownModel: return .unknownModel
        case .invalidCatalog, .catalogRollback, .catalogExpired, .catalogUnavailable: return .invalidCatalog
        case .busy: return .busy
        case .temporary: return .temporary
        case .interrupted: return .interrupted
        case .authRequired, .tokenUnusable: return .authRequired
        case .noStore, .offline, .invalidSetting, .incompleteInstall, .httpStatus, .refused, .noSource, .notInstalled, .recordsDamaged, .readOnly, .records, .io,
             .notRegularFile, .empty, .badPath, .emptyFile, .importIncomplete, .noSafetensors, .invalidModelFile, .invalidHubAnswer,
             .idTaken, .notUserModel:
            return .failure
        }
    }

    /// `exit` as the number the process returns.
    public var exitStatus: Int32 { exit.rawValue }
}

/// Every failure of the engine, as one type. Each case names the model, the file or URL,
/// wraps the typed cause where there is one (never flattened to a string), says what to
/// do next, and carries its `code`. Nothing is left half-installed whichever case it is.
public enum LocalModelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The catalog has no model with this id.
    case unknownModel(String)
    /// Nothing names a store folder.
    case noStoreFolder
    /// The catalog file failed validation (every problem, with its JSON path).
    case invalidCatalog(CatalogFailure)
    /// The catalog is older than one this store has already accepted (P7).
    case catalogRollback(offered: Int, recorded: Int, store: String)
    /// The catalog's `expiresAt` has passed: it is no longer trusted (a frozen mirror).
    case catalogExpired(source: String, expiresAt: String)
    /// The store has used catalog version `recorded`, but no trusted copy of it (or of a
    /// newer one) is left, so version `inUse` (the built-in catalog) stands in: what is
    /// installed keeps working, and nothing is fetched until an update brings it back.
    case catalogUnavailable(inUse: Int, recorded: Int, store: String)
    /// A catalog's signature (`signature`, the `.sig` beside it) is not the base64 of an
    /// Ed25519 signature by any of the trusted keys (`keys`, by name) over its exact bytes.
    case catalogSignatureInvalid(source: String, signature: String, keys: [String])
    /// The catalog (or its signature) at `url` is larger than the `cap` bytes read.
    case catalogTooLarge(url: String, cap: Int64)
    /// Another process (or task) holds the model's lock.
    case busy(modelId: String)
    /// The download cannot fit: checked before any byte is transferred.
    case insufficientStorage(modelId: String, requiredMb: Int, availableMb: Int)
    /// The disk filled up mid-way; the bytes downloaded so far are kept.
    case diskFull(modelId: String, file: String, neededMb: Int, keptBytes: Int64)
    /// A final HTTP answer (404, 403, 410, …).
    /// `url` is where the answer came from; `redirectedFrom` the catalog's URL when a
    /// redirect led there (a CDN).
    case httpStatus(modelId: String, file: String, url: String, status: Int, redirectedFrom: String? = nil)
    /// The bytes' SHA-256 differs from the catalog's; the partial was discarded.
    case integrityMismatch(modelId: String, file: String, expected: String, actual: String)
    /// The server sent more than, or other than, the declared size.
    case sizeMismatch(modelId: String, file: String, url: String, declared: Int64, served: Int64?)
    /// An archive failed the unpacking checks (P8).
    case unsafeArchive(modelId: String, url: String, problem: String)
    /// A verified tree lacks a catalog file as a regular file of its size (P1): not installed.
    case incompleteInstall(modelId: String, file: String, size: Int64)
    /// Network/server trouble outlasted the retry budget: try again later.
    case temporary(modelId: String, file: String, url: String, cause: String)
    /// Redirect to http, TLS verification failure, redirect loop, unsupported URL.
    case refused(modelId: String, url: String, reason: String)
    /// `url` answered `status` (401 or 403): it wants a credential, or refused the one sent
    /// (`sent`). Never retried; the message names what to set.
    case authRequired(modelId: String, file: String, url: String, status: Int, sent: CredentialSent)
    /// Cancelled (Task cancellation, SIGINT); partial data is kept for a later resume.
    case cancelled(modelId: String, keptBytes: Int64)
    /// The catalog has no source this build can use for the model (of the kind asked for).
    case noSource(modelId: String, kind: SourceKind? = nil)
    /// `verify` of a model that is not installed.
    case notInstalled(modelId: String)
    /// The records database failed (damaged, read-only, full, newer, …).
    case records(RecordsFailure)
    /// A system call failed (`modelId` when it happened for one model).
    case system(SystemFailure, modelId: String?)
    /// The network layer itself could not run (libcurl could not start a transfer).
    case transfer(TransferFailure, modelId: String)
    /// `mirror DIR` would have written into the store, or through a link under `DIR`.
    case mirrorRefused(MirrorRefusal)
    /// `add`: a value given (`what`: the reference, `--id`, `--name`, a glob) cannot be used.
    case invalidAddRequest(what: String, problem: String)
    /// `add`: the Hub has no repository `repository` (or no revision `revision` of it): it
    /// answered 404 to `url`, with its `X-Error-Code` when it sent one.
    case hubRepositoryNotFound(repository: String, revision: String, url: String, hubCode: String?)
    /// `add`: the Hub's answer from `url` is not what its API gives (`problem` says how).
    case hubAnswerInvalid(repository: String, url: String, problem: String)
    /// `add`: no safetensors file among the files taken from `repository` at `revision`
    /// (`taken`), with what was left out (`skipped`).
    case noSafetensors(repository: String, revision: String, taken: [String], skipped: [String])
    /// `add`: the file `file` of `repository` (a safetensors header, config.json) cannot be read.
    case modelFileInvalid(repository: String, file: String, problem: String)
    /// `add`: the id is taken (`by`: the signed catalog, the built-in one, an earlier `add`).
    case idTaken(id: String, by: String)
    /// `add` with the network off: the Hugging Face cache (`cache`) holds no complete
    /// snapshot of `repository` at `revision` (`problem` says what is missing).
    case hubOffline(repository: String, revision: String, by: String, cache: String?, problem: String)
    /// `remove`: `id` is a model of the signed or built-in catalog, not a user entry.
    case notUserModel(id: String)

    /// The stable code of this failure: the command's `--json` error `code`, and through
    /// ``ErrorCode/exit`` its exit status. Switch over it rather than over the cases when
    /// only the kind of failure matters.
    public var code: ErrorCode {
        switch self {
        case .unknownModel: return .unknownModel
        case .noStoreFolder: return .noStore
        case .invalidCatalog: return .invalidCatalog
        case .catalogRollback: return .catalogRollback
        case .catalogExpired: return .catalogExpired
        case .catalogUnavailable: return .catalogUnavailable
        case .catalogSignatureInvalid: return .signatureInvalid
        case .catalogTooLarge: return .invalidCatalog
        case .busy: return .busy
        case .insufficientStorage: return .insufficientStorage
        case .diskFull: return .diskFull
        case .httpStatus: return .httpStatus
        case .integrityMismatch: return .integrityMismatch
        case .sizeMismatch: return .sizeMismatch
        case .unsafeArchive: return .unsafeArchive
        case .incompleteInstall: return .incompleteInstall
        case .temporary: return .temporary
        case .refused: return .refused
        case .authRequired: return .authRequired
        case .cancelled: return .interrupted
        case .noSource: return .noSource
        case .notInstalled: return .notInstalled
        case .records(let failure):
            switch failure.cause {
            case .diskFull: return .diskFull
            case .corrupt: return .recordsDamaged
            case .readOnly: return .readOnly
            case .busyTooLong: return .busy
            case .unavailable, .newerSchema, .walUnavailable, .symbolicLink, .sqlite, .aborted: return .records
            }
        case .system(let error, _):
            // What the engine writes is the store: a write it may not make (permissions, a
            // read-only mount) is the store being read-only for this user.
            if error.isOutOfSpace { return .diskFull }
            return error.isPermissionDenied ? .readOnly : .io
        case .transfer(let failure, _):
            switch failure.cause {
            case .offline: return .offline
            case .tokenFile, .tokenText: return .tokenUnusable
            case .hubEndpoint: return .invalidSetting
            case .setup, .caFile, .netrcFile: return .io
            }
        case .mirrorRefused: return .refused
        case .invalidAddRequest: return .usage
        case .hubRepositoryNotFound: return .unknownModel
        case .hubAnswerInvalid: return .invalidHubAnswer
        case .noSafetensors: return .noSafetensors
        case .modelFileInvalid: return .invalidModelFile
        case .idTaken: return .idTaken
        case .hubOffline: return .offline
        case .notUserModel: return .notUserModel
        }
    }

    /// The exit status the command maps this to.
    public var exitStatus: Int32 { code.exitStatus }

    /// The model the failure is about, where it is about one.
    public var modelId: String? {
        switch self {
        case .unknownModel(let id): return id
        case .noStoreFolder, .invalidCatalog, .catalogRollback, .catalogExpired, .catalogUnavailable, .catalogSignatureInvalid,
             .catalogTooLarge, .records:
            return nil
        case .busy(let id), .noSource(let id, _), .notInstalled(let id): return id
        case let .insufficientStorage(id, _, _), let .diskFull(id, _, _, _), let .httpStatus(id, _, _, _, _),
             let .integrityMismatch(id, _, _, _), let .sizeMismatch(id, _, _, _, _), let .unsafeArchive(id, _, _),
             let .incompleteInstall(id, _, _), let .temporary(id, _, _, _), let .refused(id, _, _), let .cancelled(id, _),
             let .authRequired(id, _, _, _, _):
            return id
        case .system(_, let id): return id
        case .transfer(_, let id): return id
        case .mirrorRefused(let refusal):
            switch refusal {
            case .insideStore: return nil
            case let .reachesStore(id, _, _, _), let .link(id, _, _): return id
            }
        case .invalidAddRequest: return nil
        case .hubRepositoryNotFound(let repo, _, _, _), .hubAnswerInvalid(let repo, _, _), .noSafetensors(let repo, _, _, _),
             .modelFileInvalid(let repo, _, _), .hubOffline(let repo, _, _, _, _):
            return repo
        case .idTaken(let id, _), .notUserModel(let id): return id
        }
    }

    /// Any error met on the way, as this type: the engine's own pass through, the typed
    /// errors of the layers below are wrapped as they are.
    package static func wrap(_ error: any Error, modelId: String? = nil) -> LocalModelError {
        switch error {
        case let e as LocalModelError: return e
        case let e as RecordsError: return .records(e)
        case let e as SystemError: return .system(e, modelId: modelId)
        case let e as CatalogError: return .invalidCatalog(e)
        case let e as SQLiteError: return .records(RecordsError.sqlite(e))
        case let e as TransferFault: return .transfer(e, modelId: modelId ?? "")
        case let e as FileHashError:
            if case .system(let system) = e { return .system(system, modelId: modelId) }
            return .system(SystemError(message: e.description), modelId: modelId)
        default:
            // No other error type is thrown below the engine; should one appear, it is
            // kept as the system error it most resembles, with its own text.
            return .system(SystemError(message: String(describing: error)), modelId: modelId)
        }
    }

    /// One message for people: what failed (the model, the file, the URL) and what to do
    /// next. Never a credential.
    public var description: String {
        switch self {
        case .unknownModel(let id):
            return "unknown model '\(id)'. Run 'glasses-local list' to see the catalog's model ids."
        case .noStoreFolder:
            return "no store folder: set EXTENTOS_MODELS_DIR (or HOME), pass --store DIR, or call ExtentosLocalTier.configure(storeDirectory:)."
        case .invalidCatalog(let error):
            return error.description
        case let .catalogRollback(offered, recorded, store):
            return "catalog version \(offered) is older than version \(recorded) already used by the store \(store); refusing a rollback. Use the newer catalog (or a store of its own with --store)."
        case let .catalogUnavailable(inUse, recorded, store):
            return "the store \(store) has used catalog version \(recorded), but no trusted copy of it is left in \(store)/.catalog ('glasses-local doctor' names what was set aside), so the built-in catalog version \(inUse) stands in: installed models keep working, and nothing is downloaded until 'glasses-local catalog update [--from URL]' brings back version \(recorded) or newer."
        case let .catalogSignatureInvalid(source, signature, keys):
            return "\(source): the signature \(signature) is not valid for any trusted key (\(keys.joined(separator: ", "))); the catalog was changed after signing, signed by another key, or the signature belongs to another file. Nothing was changed; ask the catalog's publisher, or check the mirror."
        case let .catalogTooLarge(url, cap):
            return "\(url) is larger than the \(cap)-byte cap for a catalog (or the server never ends the body); refused, nothing was changed. Check the URL."
        case let .catalogExpired(source, expiresAt):
            return "the catalog \(source) expired at \(expiresAt) and is no longer trusted (its publisher stopped vouching for it, or a mirror serves an old copy). Get a current catalog from its publisher, or run without --catalog to use the built-in one."
        case .busy(let id):
            return "\(id) is being downloaded or changed by another process. Wait for it to finish (or stop it), then retry."
        case let .insufficientStorage(id, required, available):
            return "\(id) needs \(required) MiB of storage but only \(available) MiB is available. Free \(required - available) MiB, or choose a store on a bigger disk with --store / EXTENTOS_MODELS_DIR. Nothing was downloaded."
        case let .diskFull(id, file, needed, kept):
            return "the disk filled up while writing \(file) of \(id). Free at least \(needed) MiB and run the download again: the \(kept) bytes already downloaded are kept and will not be fetched again."
        case let .httpStatus(id, file, url, status, redirectedFrom):
            let host = CatalogRules.host(of: url) ?? url
            let via = redirectedFrom.map { ", where \($0) redirected" } ?? ""
            let advice: String
            switch status {
            case 401, 403:
                advice = "Access was refused: the source may need credentials, or a redirected (CDN) link expired — run the download again for a fresh link, or check the catalog or --mirror URL."
            case 404, 410:
                advice = "The file is not there: check the catalog or --mirror URL."
            default:
                advice = "Check the catalog or --mirror URL."
            }
            return "\(file) of \(id): \(host) answered HTTP \(status) for \(url)\(via). \(advice) HTTP \(status) is a final answer and is not retried."
        case let .integrityMismatch(id, file, expected, actual):
            return "\(file) of \(id) failed verification: expected SHA-256 \(expected), got \(actual). The bad bytes were discarded; the source or mirror serves a different file — check --mirror or report it."
        case let .sizeMismatch(id, file, url, declared, served):
            let what = served.map { "\($0) bytes" } ?? "more bytes"
            return "\(file) of \(id): \(url) served \(what), the catalog declares \(declared). The bytes were discarded; the source serves a different file — check --mirror or the catalog."
        case let .unsafeArchive(id, url, problem):
            return "the archive of \(id) from \(url) was refused: \(problem). Nothing was installed; report the archive to the catalog's maintainer."
        case let .incompleteInstall(id, file, size):
            return "\(id): \(file) is missing from the verified tree or is not a regular file of \(size) bytes; nothing was installed. Run the download again."
        case let .temporary(id, file, url, cause):
            return "\(file) of \(id) could not be fetched from \(url): \(cause). This is probably temporary; run the download again later (partial data is kept)."
        case let .refused(id, url, reason):
            return "\(id): \(url) was refused: \(reason)."
        case let .authRequired(id, file, url, status, sent):
            let host = CatalogRules.host(of: url) ?? url
            return "\(file) of \(id): \(host) answered HTTP \(status) for \(url): \(sent.advice(host: host)) Not retried."
        case let .cancelled(id, kept):
            return "download of \(id) interrupted; \(kept) bytes are kept and the next download resumes from them."
        case .noSource(let id, let kind?):
            return "\(id) has no \(kind.rawValue) source in the catalog; leave out --source to use the catalog's sources in order."
        case .noSource(let id, nil):
            return "\(id) has no usable source in the catalog."
        case .notInstalled(let id):
            return "\(id) is not installed; download it first (glasses-local download \(id))."
        case .records(let error):
            return error.description
        case let .system(error, id):
            if error.isOutOfSpace {
                return (id.map { "\($0): " } ?? "") + "\(error.message). The disk is full: free at least \(LocalModelError.recordsRoomMb) MiB (delete and gc work on a full disk) and retry."
            }
            return (id.map { "\($0): " } ?? "") + error.message
        case let .transfer(failure, id):
            let fault = failure.cause
            let prefix = id.isEmpty ? "" : "\(id): "
            switch fault {
            case .caFile, .netrcFile, .offline, .tokenFile, .tokenText, .hubEndpoint: return prefix + fault.description + "."
            case .setup: break
            }
            return prefix + "\(fault.description). Check that libcurl is installed and working ('glasses-local doctor')."
        case .mirrorRefused(let refusal):
            return refusal.description
        case let .invalidAddRequest(what, problem):
            return "\(what): \(problem). Nothing was written."
        case let .hubRepositoryNotFound(repo, revision, url, hubCode):
            let what = hubCode == "RevisionNotFound" ? "has no revision '\(revision)' of the repository \(repo)"
                : hubCode == "RepoNotFound" ? "has no repository \(repo)" : "has no repository \(repo) at revision '\(revision)'"
            return "\(CatalogRules.host(of: url) ?? url) \(what) (HTTP 404 for \(url)). Check the spelling (ORG/REPO, case included) and the revision; a private repository also answers 404 without a token that may read it (set HF_TOKEN). Nothing was written."
        case let .hubAnswerInvalid(repo, url, problem):
            return "\(repo): the answer from \(url) cannot be used: \(problem). Nothing was written; check HF_ENDPOINT (a Hub mirror must answer as the Hub does)."
        case let .noSafetensors(repo, revision, taken, skipped):
            let skippedText = skipped.isEmpty ? "" : "; left out: \(skipped.prefix(8).joined(separator: ", "))\(skipped.count > 8 ? ", …" : "")"
            return "\(repo)@\(revision.prefix(12)) has no safetensors weights among the files taken (\(taken.isEmpty ? "none" : taken.prefix(8).joined(separator: ", ")))\(skippedText). glasses-local adds models whose weights are safetensors (MLX and Transformers checkpoints); a GGUF-only repository is for llama.cpp or Ollama. Look for an MLX conversion of it (mlx-community/…), or name the files with --include if they have another name. Nothing was written."
        case let .modelFileInvalid(repo, file, problem):
            return "\(file) of \(repo) cannot be read: \(problem). The repository was not added and nothing was written; leave the file out with --exclude if it is not part of the model."
        case let .idTaken(id, by):
            return "the id '\(id)' is taken by \(by). Nothing was written; choose another with --id\(by.hasPrefix("a model you added") ? ", or replace it with --force" : "")."
        case let .hubOffline(repo, revision, by, cache, problem):
            return "offline (\(by)): \(repo)@\(revision) needs the Hub's model information, and the Hugging Face cache\(cache.map { " (\($0))" } ?? "") \(problem). Nothing was written. Run without \(by.hasPrefix("--") ? by : String(by.prefix { $0 != "=" }) + " set"), or fetch the repository into the cache first ('hf download \(repo)')."
        case .notUserModel(let id):
            return "\(id) is a model of the catalog, not one added with 'glasses-local add'; 'remove' only drops added models. Use 'glasses-local delete \(id)' to remove its files."
        }
    }

    /// What a records write or a small file operation needs free to succeed: the WAL of
    /// one transaction and the filesystem's own bookkeeping, rounded up generously.
    public static let recordsRoomMb = 4
}
