#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What `linkOrCopy` did.
package enum LinkOutcome: Sendable, Equatable {
    /// A hard link to the source now stands at the destination.
    case linked
    /// A copy (the filesystem could not link): another file with the same bytes.
    case copied
    /// The destination already was the source (the same inode): nothing was done.
    case unchanged
}

/// Linking or copying a file over a boundary: `mirror` fills its folder this way, and a
/// download adopts the store's own copies of a file.
extension FileIO {
    /// Gives `destination`, below `root`, the bytes of the regular file `source`, below
    /// `sourceRoot`: a hard link where the filesystem allows, else a copy; nothing is
    /// deleted first, so a reader sees the old file or the new one, and when the
    /// destination already is the source (the same inode) nothing is done at all.
    ///
    /// Neither side follows a link: every folder from each root down is opened
    /// `O_DIRECTORY | O_NOFOLLOW` (missing folders below `root` are made with `mkdirat`),
    /// the source `O_NOFOLLOW` read-only and checked to be a regular file with `fstat`,
    /// and a link at the destination is refused. Only a source this user owns is linked;
    /// another user's is copied (so it can never rewrite what it shared). The new file is made under a random
    /// name in the destination's folder, exclusively (`linkat`, or `openat` with
    /// `O_CREAT | O_EXCL | O_NOFOLLOW`, so nothing planted under a guessable name is ever
    /// written through), fsynced when copied, and `renameat` over the destination.
    ///
    /// - Parameters:
    ///   - source: the file to link or copy, inside `sourceRoot`.
    ///   - sourceRoot: the folder the source must stay inside.
    ///   - destination: where the file goes, inside `root`.
    ///   - root: the folder the destination must stay inside.
    ///   - forbidden: a folder never to enter on the way to `destination` (`mirror`: the
    ///     store); checked by device and inode at every step, `root` included.
    /// - Throws: `BoundaryError`, saying which link, folder or call stopped it.
    package static func linkOrCopy(_ source: String, within sourceRoot: String, to destination: String,
                                  below root: String, avoiding forbidden: FileIdentity? = nil) throws(BoundaryError) -> LinkOutcome {
        let (sourceParent, sourceLeaf) = split(source)
        let sourceDir: Int32
        do { sourceDir = try openDirectory(sourceParent, below: sourceRoot, create: false) } catch { throw .source(error) }
        defer { close(sourceDir) }
        let input = retrying { openat(sourceDir, sourceLeaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard input >= 0 else { throw .source(refusal(errno, dir: sourceDir, name: sourceLeaf, path: source, "open")) }
        let reader = FileDescriptor(adopting: input, path: source)
        let sourceStatus: FileStatus
        do { sourceStatus = try reader.status() } catch { throw .source(error) }
        guard sourceStatus.kind == .regular else {
            throw .source(SystemError(message: "\(source) is not a regular file", errno: EINVAL))
        }
        let identity = sourceStatus.identity

        let (parent, leaf) = split(destination)
        let dir = try walkDown(to: parent, below: root, create: true, avoiding: forbidden)
        defer { close(dir) }
        let existing: FileStatus?
        do { existing = try status(at: leaf, in: dir, path: destination) } catch { throw .system(error) }
        if let existing {
            switch existing.kind {
            case .regular: if existing.identity == identity { return .unchanged }
            case .symbolicLink: throw .link(path: destination)
            default: throw .occupied(path: destination)
            }
        }

        let outcome: LinkOutcome
        let temporary: String
        // Only a file this user owns is linked: a link shares the bytes, and another user who
        // owns the source (a shared cache, a folder an import names) could rewrite them under
        // the installed model. Anyone else's file is copied.
        if sourceStatus.ownedByThisUser,
           let linked = try linkExclusively(sourceDir, sourceLeaf, identity: identity, into: dir, path: destination) {
            outcome = .linked
            temporary = linked
        } else {
            outcome = .copied
            temporary = try copyExclusively(reader, into: dir, path: destination)
        }
        // A link or folder planted at the destination since the check above is replaced
        // (a link) or refuses the rename (a folder); neither is followed.
        guard renameat(dir, temporary, dir, leaf) == 0 else {
            let e = errno
            unlinkat(dir, temporary, 0)
            if e == EISDIR { throw .occupied(path: destination) }
            throw .system(SystemError(errno: e, "rename into \(destination)"))
        }
        // The rename survives a power cut: a mirror being published is a copy someone trusts.
        _ = fsync(dir)
        return outcome
    }

    /// A name no one can have planted: `.glasses-local-<64 random bits>.tmp` (the leaf's
    /// own name is left out, so a long one cannot push it past `NAME_MAX`).
    private static func temporaryName() -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return ".glasses-local-" + String(repeating: "0", count: 16 - hex.count) + hex + ".tmp"
    }

    /// How many random names are tried before giving up (a clash is already unlikely).
    private static let temporaryAttempts = 16

    /// Hard-links the source to a fresh random name in `dir`; nil when this filesystem
    /// cannot link it (another device, no hard links, too many links) or when the name
    /// linked turns out not to be the file opened and checked (swapped since): copy then.
    private static func linkExclusively(_ sourceDir: Int32, _ sourceLeaf: String, identity: FileIdentity,
                                        into dir: Int32, path: String) throws(BoundaryError) -> String? {
        for _ in 0..<temporaryAttempts {
            let name = temporaryName()
            // Flags 0: a link at the source's name would itself be linked, never followed.
            if linkat(sourceDir, sourceLeaf, dir, name, 0) == 0 {
                if let linked = try? status(at: name, in: dir, path: path), linked.kind == .regular, linked.identity == identity {
                    return name
                }
                unlinkat(dir, name, 0)
                return nil
            }
            switch errno {
            case EEXIST: continue
            case EXDEV, EPERM, EMLINK, ENOTSUP: return nil
            default: throw .system(SystemError(errno: errno, "link \(path)"))
            }
        }
        throw .system(SystemError(errno: EEXIST, "link \(path) under a fresh temporary name"))
    }

    /// Copies the open source into a fresh random name in `dir`, created exclusively,
    /// and fsyncs it; on any failure the temporary file is removed.
    private static func copyExclusively(_ reader: FileDescriptor, into dir: Int32, path: String) throws(BoundaryError) -> String {
        let writer: FileDescriptor, name: String
        do { (writer, name) = try createTemporary(in: dir, near: "glasses-local", path: path, mode: 0o644) } catch { throw .system(error) }
        var done = false
        defer {
            writer.close()
            if !done { unlinkat(dir, name, 0) }
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while true {
            let n: Int
            do { n = try reader.read(into: buffer, at: offset) } catch { throw .source(error) }
            if n == 0 { break }
            if let failure = writer.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n])).error { throw .system(failure) }
            offset += Int64(n)
        }
        do { try writer.sync() } catch { throw .system(error) }
        done = true
        return name
    }
}
