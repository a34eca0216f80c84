// The only Swift file that touches libarchive. https://github.com/libarchive/libarchive/wiki/LibarchiveAPI
// (AE_IF* file types equal the POSIX file-type bits, which `FileKind(mode:)` reads; the
// macros carry casts Swift cannot import.)
internal import CArchive

/// Why an archive was refused. Nothing of it is installed (P8).
package enum UnpackError: Error, Sendable, Equatable, CustomStringConvertible {
    /// libarchive could not read it (damaged, wrong format).
    case unreadable(String)
    /// An entry that is not a regular file or folder (symlink, hardlink, device, fifo).
    case forbiddenEntry(path: String, type: String)
    /// An entry path that is absolute, has `..`, or would land outside the staging folder.
    case unsafePath(path: String, problem: String)
    /// A file the catalog does not list that is too big to be a release's extra (a README,
    /// a LICENSE): extras are skipped, never installed (P7), but not read without bound.
    case unlistedTooBig(path: String, size: Int64)
    /// A file whose size differs from the catalog's (or that would exceed it: a bomb).
    case sizeMismatch(path: String, expected: Int64, actual: Int64)
    /// A file whose SHA-256 differs from the catalog's.
    case hashMismatch(path: String, expected: String, actual: String)
    /// Catalog files the archive did not contain.
    case missingFiles([String])
    /// More entries than the catalog allows.
    case tooManyEntries(Int)
    /// The disk filled up while writing `path`.
    case noSpace(path: String)
    /// A system call failed while writing the tree.
    case system(SystemError)
    /// The download was cancelled.
    case cancelled
    /// The bytes being unpacked stopped being the download's (it restarted or failed).
    case abandoned(String)

    /// What was wrong with the archive (or the disk), for the refusal's message.
    package var description: String {
        switch self {
        case .unreadable(let m): return "the archive cannot be read: \(m)"
        case let .forbiddenEntry(path, type): return "the archive holds a \(type) at \(path); only regular files and folders are accepted"
        case let .unsafePath(path, problem): return "the archive entry \(path) is unsafe: \(problem)"
        case let .unlistedTooBig(path, size): return "the archive holds \(path) (\(size) bytes), which the catalog does not list and which is too big to be a release's extra file"
        case let .sizeMismatch(path, expected, actual): return "\(path) in the archive is \(actual) bytes, the catalog says \(expected)"
        case let .hashMismatch(path, expected, actual): return "\(path) in the archive has SHA-256 \(actual), the catalog says \(expected)"
        case .missingFiles(let paths): return "the archive lacks \(paths.count) catalog file(s), first: \(paths.first ?? "")"
        case .tooManyEntries(let n): return "the archive has more than \(n) entries"
        case .noSpace(let path): return "no space left while extracting \(path)"
        case .system(let e): return e.message
        case .cancelled: return "extraction cancelled"
        case .abandoned(let reason): return "unpacking stopped: \(reason)"
        }
    }
}

/// Extracts a verified archive into a staging folder, checking every entry against the
/// catalog: regular files and folders only, confined paths, exact sizes, hashes where
/// known, nothing unlisted, nothing missing.
///
/// Files are written by this code, not by `archive_write_disk`: each is created
/// exclusively, never through a link, under folders opened without following links
/// (`FileIO.openFile(_:below:_:options:)` with `[.create, .exclusiveCreate]`), so no entry
/// can follow a link out of the staging root, and the bytes are hashed as they are written.
package enum ArchiveExtractor {
    /// What an extraction produced.
    package struct Result: Sendable, Equatable {
        /// The SHA-256 of every extracted file, by catalog path.
        package var hashes: [String: String]
        /// Entries the catalog does not list (a release's README, LICENSE), skipped.
        package var skipped: [String]
    }

    /// The largest unlisted entry skipped (bigger ones are refused), and the most unlisted
    /// bytes skipped in all: extras are small, and skipping still decompresses them.
    static let maxExtraBytes: Int64 = 16 << 20
    static let maxExtrasTotal: Int64 = 64 << 20

    /// Extracts a complete archive file.
    package static func extract(archivePath: String, format: ArchiveFormat, stripComponents: Int,
                               into staging: String, files: [CatalogFile],
                               isCancelled: () -> Bool = { false }) throws(UnpackError) -> Result {
        if format == .tarBz2 {
            return try extract(bzip2: try FileInput(path: archivePath), stripComponents: stripComponents, into: staging,
                               files: files, isCancelled: isCancelled)
        }
        let reader = try makeReader(format: format)
        defer { glasses_archive_read_free(reader) }
        guard glasses_archive_read_open_filename(reader, archivePath, 1 << 16) == ARCHIVE_OK else {
            throw .unreadable(message(reader))
        }
        return try extract(reader, stripComponents: stripComponents, into: staging, files: files, isCancelled: isCancelled)
    }

    /// Extracts an archive while it downloads: the bytes come from `feed` as they reach
    /// the disk (the download waits while too many are unread). Call it on a thread of its
    /// own; it returns when the feed ends, and then no longer holds the download.
    static func extract(feed: ArchiveFeed, format: ArchiveFormat, stripComponents: Int,
                        into staging: String, files: [CatalogFile],
                        isCancelled: () -> Bool = { false }) throws(UnpackError) -> Result {
        defer { feed.release() }
        if format == .tarBz2 {
            return try extract(bzip2: feed, stripComponents: stripComponents, into: staging, files: files, isCancelled: isCancelled)
        }
        let buffer = ByteBuffer(capacity: 1 << 20)
        return try extract(format: format, stripComponents: stripComponents, into: staging, files: files,
                           isCancelled: isCancelled) { () throws(UnpackError) in
            buffer.count = try feed.read(into: buffer.memory)
            return buffer.bytes
        }
    }

    /// The output of the largest tar end (its last record, zero blocks) decoded past the
    /// end libarchive reads to, to check the bzip2 stream to its end marker.
    static let maxTrailingBytes = 1 << 20

    /// A tar.bz2: bzip2 decoded here, block by block on several cores (`BZip2Blocks`);
    /// libarchive reads the tar.
    private static func extract(bzip2 input: CompressedInput, stripComponents: Int, into staging: String,
                                files: [CatalogFile], isCancelled: () -> Bool) throws(UnpackError) -> Result {
        let decoder = BZip2Blocks(input: input)
        defer { decoder.close() }
        let result = try extract(format: .tar, stripComponents: stripComponents, into: staging, files: files,
                                 isCancelled: isCancelled) { () throws(UnpackError) in try decoder.next() }
        // libarchive stops at the tar's end: decode what follows (a record's zero padding)
        // so that a damaged or truncated end of the stream is still refused.
        var trailing = 0
        while trailing <= maxTrailingBytes {
            let bytes = try decoder.next()
            if bytes.isEmpty { break }
            trailing += bytes.count
        }
        return result
    }

    /// Extracts what `next` yields (the bytes it returns stay valid until its next call;
    /// empty at the end): libarchive reads it through its read callback.
    private static func extract(format: ArchiveFormat, stripComponents: Int, into staging: String, files: [CatalogFile],
                                isCancelled: () -> Bool,
                                next: @escaping () throws(UnpackError) -> UnsafeRawBufferPointer) throws(UnpackError) -> Result {
        let reader = try makeReader(format: format)
        defer { glasses_archive_read_free(reader) }
        let source = CallbackSource(next: next)
        let context = Unmanaged.passUnretained(source).toOpaque()
        let rc = glasses_archive_read_open(reader, context, nil, { _, context, out in
            guard let context, let out else { return -1 }
            return Unmanaged<CallbackSource>.fromOpaque(context).takeUnretainedValue().read(out)
        }, nil)
        guard rc == ARCHIVE_OK else { throw source.failure ?? .unreadable(message(reader)) }
        do {
            return try extract(reader, stripComponents: stripComponents, into: staging, files: files, isCancelled: isCancelled)
        } catch {
            // A read that failed (the feed abandoned, damaged bzip2 data) is that, not
            // libarchive's "truncated archive".
            throw source.failure ?? error
        }
    }

    /// libarchive's read callback over a source of bytes; keeps the source's error.
    private final class CallbackSource {
        let next: () throws(UnpackError) -> UnsafeRawBufferPointer
        var failure: UnpackError?

        init(next: @escaping () throws(UnpackError) -> UnsafeRawBufferPointer) { self.next = next }

        func read(_ out: UnsafeMutablePointer<UnsafeRawPointer?>) -> Int {
            do {
                let bytes = try next()
                out.pointee = bytes.baseAddress
                return bytes.count
            } catch {
                failure = error
                return -1
            }
        }
    }

    private static func makeReader(format: ArchiveFormat) throws(UnpackError) -> OpaquePointer {
        guard let reader = glasses_archive_read_new() else {
            let why = glasses_archive_load_error().map { String(cString: $0) } ?? "libarchive: out of memory"
            throw .system(.outOfMemory(why))
        }
        // Only the format and filter the catalog names (P8: less parser surface).
        switch format {
        case .tarBz2: glasses_archive_read_support_filter_bzip2(reader); glasses_archive_read_support_format_tar(reader)
        case .tarGz: glasses_archive_read_support_filter_gzip(reader); glasses_archive_read_support_format_tar(reader)
        case .tarXz: glasses_archive_read_support_filter_xz(reader); glasses_archive_read_support_format_tar(reader)
        case .tarZst: glasses_archive_read_support_filter_zstd(reader); glasses_archive_read_support_format_tar(reader)
        case .tar: glasses_archive_read_support_format_tar(reader)
        case .zip: glasses_archive_read_support_format_zip(reader)
        }
        return reader
    }

    private static func extract(_ reader: OpaquePointer, stripComponents: Int, into staging: String, files: [CatalogFile],
                                isCancelled: () -> Bool) throws(UnpackError) -> Result {
        let expected = Dictionary(files.map { ($0.path, $0) }, uniquingKeysWith: { a, _ in a })
        var hashes: [String: String] = [:]
        var skipped: [String] = []
        var skippedBytes: Int64 = 0
        var createdDirs: Set<String> = [""]
        let maxEntries = files.count * 2 + 1024
        var entries = 0
        // A file's bytes are copied out of libarchive through this, written and hashed: a
        // quarter of a megabyte is as fast as more, and the memory counts (an install runs
        // beside the app).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 16)
        defer { buffer.deallocate() }

        var entry: OpaquePointer?
        while true {
            let rc = glasses_archive_read_next_header(reader, &entry)
            if rc == ARCHIVE_EOF { break }
            guard rc == ARCHIVE_OK || rc == ARCHIVE_WARN, let entry else { throw .unreadable(message(reader)) }
            entries += 1
            if entries > maxEntries { throw .tooManyEntries(maxEntries) }
            if isCancelled() { throw .cancelled }

            let rawPath = pathOf(entry)
            let kind = FileKind(mode: glasses_archive_entry_filetype(entry))
            // Links first: a hardlink entry may look like a regular file.
            if glasses_archive_entry_hardlink(entry) != nil { throw .forbiddenEntry(path: rawPath, type: "hardlink") }
            if glasses_archive_entry_symlink(entry) != nil || kind == .symbolicLink { throw .forbiddenEntry(path: rawPath, type: "symlink") }
            guard kind == .regular || kind == .directory else {
                throw .forbiddenEntry(path: rawPath, type: typeName(kind))
            }
            if rawPath.hasPrefix("/") { throw .unsafePath(path: rawPath, problem: "absolute path") }
            var components = rawPath.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
            if components.contains("..") { throw .unsafePath(path: rawPath, problem: "contains '..'") }
            guard components.count > stripComponents || kind == .directory else {
                throw .unsafePath(path: rawPath, problem: "a file above the \(stripComponents) stripped folder level(s)")
            }
            components.removeFirst(min(stripComponents, components.count))
            let path = components.joined(separator: "/")
            if path.isEmpty { continue }
            if let problem = CatalogRules.pathProblem(path) { throw .unsafePath(path: rawPath, problem: problem) }

            // Folders are made for the files that need them, not for the archive's say-so.
            if kind == .directory { continue }
            guard let file = expected[path] else {
                // A release's extra (README, LICENSE): skipped (libarchive reads past it),
                // reported, never installed. Confinement is the listed paths; integrity the
                // archive's hash.
                let size = glasses_archive_entry_size_is_set(entry) != 0 ? Int64(glasses_archive_entry_size(entry)) : maxExtraBytes + 1
                skippedBytes += max(0, size)
                if size > maxExtraBytes || skippedBytes > maxExtrasTotal { throw .unlistedTooBig(path: path, size: size) }
                skipped.append(path)
                continue
            }
            if hashes[path] != nil { throw .unsafePath(path: rawPath, problem: "appears twice in the archive") }
            if glasses_archive_entry_size_is_set(entry) != 0, glasses_archive_entry_size(entry) != file.size {
                throw .sizeMismatch(path: path, expected: file.size, actual: Int64(glasses_archive_entry_size(entry)))
            }
            try makeDirectories(for: path, under: staging, created: &createdDirs)
            hashes[path] = try writeEntry(reader, to: staging + "/" + path, under: staging, file: file, buffer: buffer, isCancelled: isCancelled)
        }
        let missing = files.filter { hashes[$0.path] == nil }.map(\.path)
        if !missing.isEmpty { throw .missingFiles(missing) }
        return Result(hashes: hashes, skipped: skipped)
    }

    private static func writeEntry(_ reader: OpaquePointer, to full: String, under root: String, file: CatalogFile,
                                   buffer: UnsafeMutableRawBufferPointer, isCancelled: () -> Bool) throws(UnpackError) -> String {
        let out: FileDescriptor
        do {
            out = try FileIO.openFile(full, below: root, .writeOnly, options: [.create, .exclusiveCreate])
        } catch {
            throw error.isOutOfSpace ? .noSpace(path: full) : .system(error)
        }
        let hasher: SHA256Hasher
        do { hasher = try SHA256Hasher() } catch { throw .system(SystemError(message: "SHA-256: \(error)")) }
        var total: Int64 = 0
        while true {
            let n = glasses_archive_read_data(reader, buffer.baseAddress, buffer.count)
            if n == 0 { break }
            if n < 0 { throw .unreadable(message(reader)) }
            total += Int64(n)
            // A bomb (or a lying header) never writes past the catalog size.
            if total > file.size { throw .sizeMismatch(path: file.path, expected: file.size, actual: total) }
            if let failure = out.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n])).error {
                throw failure.isOutOfSpace ? .noSpace(path: full) : .system(failure)
            }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            if isCancelled() { throw .cancelled }
        }
        if total != file.size { throw .sizeMismatch(path: file.path, expected: file.size, actual: total) }
        // Not fsynced here: the install makes the whole tree durable before renaming it into
        // place (file by file, or one syncfs for a big tree), which is one flush per file at most.
        let actual: String
        do { actual = try hasher.finalize() } catch { throw .system(SystemError(message: "SHA-256: \(error)")) }
        if let expected = file.sha256, expected != actual { throw .hashMismatch(path: file.path, expected: expected, actual: actual) }
        return actual
    }

    /// Creates the parent folders of `path` under `root`, refusing to pass through anything
    /// that is not a folder this extraction created.
    private static func makeDirectories(for path: String, under root: String, created: inout Set<String>) throws(UnpackError) {
        var prefix = ""
        let parts = path.split(separator: "/").dropLast()
        for part in parts {
            prefix = prefix.isEmpty ? String(part) : prefix + "/" + part
            if created.contains(prefix) { continue }
            let full = root + "/" + prefix
            do {
                try FileIO.createDirectory(full, below: root)
            } catch {
                if error.isOutOfSpace { throw .noSpace(path: full) }
                if error.isLink || error.isNotAFolder { throw .unsafePath(path: prefix, problem: "exists and is not a folder") }
                throw .system(error)
            }
            created.insert(prefix)
        }
    }

    private static func pathOf(_ entry: OpaquePointer) -> String {
        if let utf8 = glasses_archive_entry_pathname_utf8(entry) { return String(cString: utf8) }
        if let raw = glasses_archive_entry_pathname(entry) { return String(cString: raw) }
        return ""
    }

    private static func typeName(_ kind: FileKind) -> String {
        switch kind {
        case .characterDevice: return "character device"
        case .blockDevice: return "block device"
        case .fifo: return "fifo"
        case .socket: return "socket"
        case .regular, .directory, .symbolicLink, .other: return "special file"
        }
    }

    private static func message(_ reader: OpaquePointer) -> String {
        glasses_archive_error_string(reader).map { String(cString: $0) } ?? "unknown libarchive error"
    }

    /// libarchive's version, for `doctor`.
    package static var libraryVersion: String { String(cString: glasses_archive_version_details()) }
}
