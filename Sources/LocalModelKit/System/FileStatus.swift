#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What stands at a path: the file type of `stat`'s `st_mode`, by name.
package enum FileKind: Sendable, Hashable {
    /// A regular file.
    case regular
    /// A folder.
    case directory
    /// A symbolic link (never followed inside the store).
    case symbolicLink
    /// A named pipe.
    case fifo
    /// A character device (a terminal, `/dev/null`).
    case characterDevice
    /// A block device (a disk).
    case blockDevice
    /// A Unix-domain socket.
    case socket
    /// A type this system has and the others do not (a Solaris door, a whiteout).
    case other

    /// The kind in a mode's `S_IFMT` bits (`stat`'s `st_mode`, or libarchive's `AE_IF*`
    /// file types, which have the same values).
    init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFIFO: self = .fifo
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        case S_IFSOCK: self = .socket
        default: self = .other
        }
    }
}

/// A file's identity on this machine, its device and inode: two names of one file, or a
/// folder reached by two spellings (a link, a bind mount, `..`), have the same one.
package struct FileIdentity: Sendable, Hashable {
    /// `st_dev`: the filesystem.
    package var device: UInt64
    /// `st_ino`: the file within it.
    package var inode: UInt64

    init(_ st: stat) {
        device = UInt64(truncatingIfNeeded: st.st_dev)
        inode = UInt64(truncatingIfNeeded: st.st_ino)
    }

    /// An identity from its two numbers (as the records keep a switch's tree).
    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// A moment a file system recorded: seconds since 1970 and the nanoseconds after them.
package struct FileTimestamp: Sendable, Hashable {
    /// Whole seconds since 1970.
    package var seconds: Int64
    /// Nanoseconds after them (0 ..< 1,000,000,000).
    package var nanoseconds: Int64

    init(_ time: timespec) {
        seconds = Int64(time.tv_sec)
        nanoseconds = Int64(time.tv_nsec)
    }
}

/// What `stat` says about a file, in the file layer's words (swift-system's `FileStatus`
/// role): callers never see `st_mode` or its `S_IF*` bits.
///
/// Returned by `FileIO.status(_:)` (the path itself, a link not followed),
/// `FileDescriptor.status()` (what is open) and the walks below a root.
package struct FileStatus: Sendable, Equatable {
    /// What stands there: a regular file, a folder, a link, …
    package var kind: FileKind
    /// The permission bits (`st_mode & 0o7777`): `0o644`, `0o600`.
    package var permissions: mode_t
    /// Bytes in the file (for a link: in the path it holds).
    package var size: Int64
    /// Bytes the file occupies on the disk (`st_blocks × 512`): less than `size` for a
    /// sparse file, more for a small one.
    package var allocatedBytes: Int64
    /// How many names the file has (more than one: hard-linked, its bytes shared).
    package var linkCount: Int
    /// Its device and inode.
    package var identity: FileIdentity
    /// The last change of the file's bytes.
    package var modified: FileTimestamp
    /// The last change of the file's bytes or its metadata (names, mode, owner).
    package var statusChanged: FileTimestamp
    /// Whether the file belongs to the user this process runs as (its effective user).
    package var ownedByThisUser: Bool

    /// The user this process runs as: read once (nothing here changes it), not once per
    /// `stat` (a `list` made 320 `geteuid` calls for 50 models).
    private static let effectiveUser = geteuid()

    init(_ st: stat) {
        ownedByThisUser = st.st_uid == Self.effectiveUser
        kind = FileKind(mode: st.st_mode)
        permissions = st.st_mode & 0o7777
        size = Int64(st.st_size)
        let (allocated, overflow) = Int64(st.st_blocks).multipliedReportingOverflow(by: 512)
        allocatedBytes = overflow ? .max : allocated
        linkCount = Int(clamping: st.st_nlink)
        identity = FileIdentity(st)
        #if os(Linux)
        modified = FileTimestamp(st.st_mtim)
        statusChanged = FileTimestamp(st.st_ctim)
        #else
        modified = FileTimestamp(st.st_mtimespec)
        statusChanged = FileTimestamp(st.st_ctimespec)
        #endif
    }
}
