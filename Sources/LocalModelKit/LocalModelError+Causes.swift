// The causes `LocalModelError` carries. Each is a value to read (what failed, where, in
// words), not an error of its own: the engine throws `LocalModelError` and nothing else,
// and these are never thrown. The layers below throw package-level error types
// (`CatalogError`, `RecordsError`, `SystemError`, `TransferFault`); the engine's boundary
// wraps one in the matching value here, keeping it whole for the package's own code.

/// Why a catalog cannot be used: where it came from, and every problem found in it.
/// Carried by ``LocalModelError/invalidCatalog(_:)``.
public struct CatalogFailure: Sendable, Equatable, CustomStringConvertible {
    /// The lower layer's failure, whole.
    package let cause: CatalogError

    /// The failure `cause`, as the engine reports it.
    package init(_ cause: CatalogError) { self.cause = cause }

    /// The file or URL the catalog came from.
    public var source: String { cause.source }
    /// Every problem found, in document order, each at its JSON path.
    public var issues: [CatalogIssue] { cause.issues }
    /// The source, every problem on a line of its own, and what to do.
    public var description: String { cause.description }
}

/// Why the records database cannot be used (damaged, read-only for this user, written by a
/// newer build, locked too long, on a full disk, …), and what to do. The kind is the
/// error's ``LocalModelError/code``. Carried by ``LocalModelError/records(_:)``.
public struct RecordsFailure: Sendable, Equatable, CustomStringConvertible {
    /// The lower layer's failure, whole.
    package let cause: RecordsError

    /// The failure `cause`, as the engine reports it.
    package init(_ cause: RecordsError) { self.cause = cause }

    /// The records file the failure is about; nil when SQLite's message is all there is.
    public var path: String? {
        switch cause {
        case let .corrupt(path, _), let .unavailable(path, _), let .newerSchema(path, _, _), let .walUnavailable(path, _),
             let .busyTooLong(path, _), let .diskFull(path), let .readOnly(path), let .symbolicLink(path), let .aborted(path, _):
            return path
        case .sqlite:
            return nil
        }
    }

    /// What failed, on which file, and what to do about it.
    public var description: String { cause.description }
}

/// A failed system call: its `errno` and what was being attempted.
/// Carried by ``LocalModelError/system(_:modelId:)``.
public struct SystemFailure: Sendable, Equatable, CustomStringConvertible {
    /// The lower layer's failure, whole.
    package let cause: SystemError

    /// The failure `cause`, as the engine reports it.
    package init(_ cause: SystemError) { self.cause = cause }

    /// The `errno` (0 for a failure that did not come from a system call).
    public var errno: Int32 { cause.errno }
    /// "open /x/records.sqlite3: No such file or directory".
    public var message: String { cause.message }
    /// The ``message``.
    public var description: String { cause.message }
    /// True for "no space left" and "quota exceeded".
    public var isOutOfSpace: Bool { cause.isOutOfSpace }
    /// True when nothing is at the path.
    public var isNotFound: Bool { cause.isNotFound }
    /// True when this user may not do it there: the permission bits, a rule of the system,
    /// or a read-only filesystem.
    public var isPermissionDenied: Bool { cause.isPermissionDenied }
}

/// Why the network layer could not run a transfer at all: libcurl missing, a CA or netrc
/// file that cannot be read, the network switched off, a Hugging Face token or
/// `HF_ENDPOINT` that cannot be used. The kind is the error's ``LocalModelError/code``.
/// Carried by ``LocalModelError/transfer(_:modelId:)``.
public struct TransferFailure: Sendable, Equatable, CustomStringConvertible {
    /// The lower layer's failure, whole.
    package let cause: TransferFault

    /// The failure `cause`, as the engine reports it.
    package init(_ cause: TransferFault) { self.cause = cause }

    /// What failed and what to set or fix.
    public var description: String { cause.description }

    /// When the network is switched off: the switch that did it (`--offline`,
    /// `EXTENTOS_OFFLINE=1`, `HF_HUB_OFFLINE=1`, …); nil for every other failure.
    public var offlineSwitch: String? {
        if case .offline(let by, _) = cause { return by }
        return nil
    }
}

extension LocalModelError {
    /// `.invalidCatalog` for the catalog layer's `error`.
    package static func invalidCatalog(_ error: CatalogError) -> LocalModelError { .invalidCatalog(CatalogFailure(error)) }

    /// `.records` for the records layer's `error`.
    package static func records(_ error: RecordsError) -> LocalModelError { .records(RecordsFailure(error)) }

    /// `.system` for the system layer's `error`, about the model `modelId` where there is one.
    package static func system(_ error: SystemError, modelId: String?) -> LocalModelError {
        .system(SystemFailure(error), modelId: modelId)
    }

    /// `.transfer` for the transfer layer's `fault`, met for the model `modelId`.
    package static func transfer(_ fault: TransferFault, modelId: String) -> LocalModelError {
        .transfer(TransferFailure(fault), modelId: modelId)
    }
}
