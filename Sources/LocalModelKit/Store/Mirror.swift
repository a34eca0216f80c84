/// `glasses-local mirror DIR`: installed models written into a folder under the URL paths
/// of their per-file source, so any static web server over that folder is a mirror that
/// `--mirror` maps onto (a site's or a fleet's devices then never touch the origin).
public struct MirrorReport: Sendable, Equatable {
    public var modelId: String
    /// Files linked (same filesystem) and copied (another one).
    public var linked: Int
    public var copied: Int
    /// Where the model's files went, or why it was skipped.
    public var folder: String?
    public var skipped: String?
}

extension LocalModelEngine {
    /// Writes each installed model of `ids` (every installed one when empty) into `root`.
    /// Hard links where the filesystem allows, else copies; the store is only read.
    public func mirror(into root: String, ids: [String]) throws(LocalModelError) -> [MirrorReport] {
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
            guard let base = model.sources.compactMap({ source -> String? in
                if case .files(let url) = source { return url }
                return nil
            }).first, let path = Self.urlPath(of: base) else {
                reports.append(MirrorReport(modelId: model.id, linked: 0, copied: 0, folder: nil,
                                            skipped: "the catalog gives it no per-file source to mirror"))
                continue
            }
            let target = FileIO.normalize(root + "/" + path)
            var report = MirrorReport(modelId: model.id, linked: 0, copied: 0, folder: target, skipped: nil)
            for file in model.files {
                do {
                    let linked = try FileIO.linkOrCopy(folder + "/" + file.path, to: target + "/" + file.path)
                    if linked { report.linked += 1 } else { report.copied += 1 }
                } catch { throw .system(error, modelId: model.id) }
            }
            reports.append(report)
        }
        return reports
    }

    /// The decoded path of a URL (`https://host/a%20b/` → `/a b/`); nil when it has none
    /// or climbs out with `..`.
    static func urlPath(of url: String) -> String? {
        guard let rest = url.afterFirst("://"), let slash = rest.firstIndex(of: "/") else { return nil }
        var bytes: [UInt8] = []
        var iterator = Array(rest[slash...].prefix { $0 != "?" && $0 != "#" }.utf8).makeIterator()
        while let b = iterator.next() {
            if b == UInt8(ascii: "%"), let h = iterator.next(), let l = iterator.next(),
               let value = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) {
                bytes.append(value)
            } else {
                bytes.append(b)
            }
        }
        let path = String(decoding: bytes, as: UTF8.self)
        guard !path.split(separator: "/").contains("..") else { return nil }
        return path
    }
}
