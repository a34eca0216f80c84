/// Path strings, taken apart and put together without asking the file system (except
/// `absolutePath`, which asks for the working directory).
extension FileIO {
    /// "/a/b/c" → ("/a/b", "c").
    static func split(_ path: String) -> (parent: String, leaf: String) {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return ("", trimmed) }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        return (parent, String(trimmed[trimmed.index(after: slash)...]))
    }

    /// `/a/b/c` → `/a/b` (the folder holding a path).
    package static func parent(of path: String) -> String {
        let parent = split(path).parent
        return parent.isEmpty ? "." : parent
    }

    /// `/a/b/c` → `c`; the last component of a URL path too.
    package static func lastComponent(of path: String) -> String { split(path).leaf }

    /// The absolute form of `path` against the working directory (no symlink resolution).
    package static func absolutePath(_ path: String) -> String {
        if path.hasPrefix("/") { return normalize(path) }
        guard let cwd = ProcessEnvironment.workingDirectory() else { return path }
        return normalize(cwd + "/" + path)
    }

    /// Removes `.` segments, duplicate slashes and trailing slashes (keeps `..`).
    static func normalize(_ path: String) -> String {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        return "/" + parts.joined(separator: "/")
    }
}
