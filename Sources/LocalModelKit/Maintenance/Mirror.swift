/// `glasses-local mirror DIR`: installed models written into a folder under the URL paths
/// of their per-file source, so any static web server over that folder is a mirror that
/// `--mirror` maps onto (a site's or a fleet's devices then never touch the origin).
///
/// The store is only read, and nothing outside `DIR` is written: a `DIR` that is the store
/// or inside it is refused, every folder opened under `DIR` is checked not to be the store,
/// no link under `DIR` is followed, and each file is replaced atomically (see `mirror`).
public struct MirrorReport: Sendable, Equatable {
    /// The model mirrored.
    public var modelId: String
    /// Files linked (same filesystem) and copied (another one).
    public var linked: Int
    /// Files copied (the mirror is on another filesystem).
    public var copied: Int
    /// Files already in place: the mirror's file already is the installed one (a hard
    /// link from an earlier run), so nothing was done.
    public var unchanged: Int = 0
    /// Where the model's files went, or why it was skipped.
    public var folder: String?
    /// Why the model was skipped (its source has no per-file layout); nil when mirrored.
    public var skipped: String?
}

/// Why `mirror` wrote nothing (or stopped): the store would have been written into, or a
/// link under `DIR` stood where a file or folder goes.
public enum MirrorRefusal: Sendable, Equatable, CustomStringConvertible {
    /// `dir` is the store or a folder inside it (found by device and inode, walking up).
    case insideStore(dir: String, store: String)
    /// `folder`, where `modelId`'s files would go under `dir`, is the store: `dir` contains it.
    case reachesStore(modelId: String, folder: String, dir: String, store: String)
    /// `path`, under `dir`, is a symbolic link where `modelId`'s files go.
    case link(modelId: String, path: String, dir: String)

    /// What was refused, why, and what to choose instead.
    public var description: String {
        switch self {
        case let .insideStore(dir, store):
            return "cannot mirror into \(dir): it is the store \(store) or a folder inside the store, and mirror only reads the store (writing there would replace or add files of installed models). Nothing was written. Choose a folder outside the store."
        case let .reachesStore(id, folder, dir, store):
            return "\(id): its files would go under \(folder), which is the store \(store): \(dir) contains the store, and mirror only reads the store. Nothing was written into it. Choose a folder that does not contain the store, or leave \(id) out."
        case let .link(id, path, dir):
            return "\(id): \(path) is a symbolic link; links under \(dir) are never followed, so nothing was written through it. Remove the link (or choose another folder) and retry."
        }
    }
}

extension LocalModelEngine {
    /// Writes each installed model of `ids` (every installed one when empty) into `root`,
    /// under the decoded URL path of the model's per-file source.
    ///
    /// Hard links where the filesystem allows, else copies, made under a random temporary
    /// name and renamed over the destination (nothing is deleted first); a destination
    /// that already is the installed file is left alone (`unchanged`), so a second run
    /// changes nothing. The store is only read: `root` inside the store is refused before
    /// anything is written, every folder opened under `root` is checked (device and inode)
    /// not to be the store, and a link under `root` is refused, never followed.
    /// - Throws: `LocalModelError.mirrorRefused` for the store or a link in the way,
    ///   `.unknownModel`, `.system` for a failed call.
    public func mirror(into root: String, ids: [String]) throws(LocalModelError) -> [MirrorReport] {
        let root = FileIO.absolutePath(root)
        // No store folder yet: nothing is installed, so nothing will be written.
        let store: FileIdentity?
        do {
            store = try FileIO.directoryIdentity(layout.root)
            if let store, try FileIO.isWithin(root, folder: store) {
                throw LocalModelError.mirrorRefused(.insideStore(dir: root, store: layout.root))
            }
        } catch {
            throw .wrap(error)
        }
        let statuses: [ModelStatus]
        do { statuses = try models() } catch { throw .wrap(error) }
        for id in ids where catalog.model(id: id) == nil { throw .unknownModel(id) }
        let chosen = statuses.filter { ids.isEmpty ? $0.isInstalled : ids.contains($0.model.id) }
        var reports: [MirrorReport] = []
        for status in chosen {
            let model = status.model
            guard status.isInstalled, let folder = installedFolder(of: model.id) else {
                reports.append(MirrorReport(modelId: model.id, linked: 0, copied: 0, folder: nil, skipped: "not installed"))
                continue
            }
            guard let path = model.deliveries.lazy.compactMap(\.mirrorFolder).first else {
                reports.append(MirrorReport(modelId: model.id, linked: 0, copied: 0, folder: nil,
                                            skipped: "the catalog gives it no per-file source to mirror"))
                continue
            }
            let target = FileIO.normalize(root + "/" + path)
            var report = MirrorReport(modelId: model.id, linked: 0, copied: 0, folder: target, skipped: nil)
            for file in model.files {
                do {
                    switch try FileIO.linkOrCopy(folder + "/" + file.path, within: layout.root, to: target + "/" + file.path,
                                                 below: root, avoiding: store) {
                    case .linked: report.linked += 1
                    case .copied: report.copied += 1
                    case .unchanged: report.unchanged += 1
                    }
                } catch {
                    throw Self.mirrorError(error, modelId: model.id, dir: root, store: layout.root)
                }
            }
            reports.append(report)
        }
        return reports
    }

    /// A refusal below `DIR`, in mirror's terms (the boundary is `DIR`, not the store).
    static func mirrorError(_ error: BoundaryError, modelId: String, dir: String, store: String) -> LocalModelError {
        switch error {
        case .link(let path):
            return .mirrorRefused(.link(modelId: modelId, path: path, dir: dir))
        case .forbidden(let path):
            return .mirrorRefused(.reachesStore(modelId: modelId, folder: path, dir: dir, store: store))
        case .notAFolder, .occupied, .source, .system:
            // Said the same whichever the boundary (the source's side is the store's).
            return .system(error.systemError, modelId: modelId)
        }
    }
}
