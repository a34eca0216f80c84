extension RecordsError {
    /// A shell line that moves the database and its `-wal`/`-shm` files into a new folder
    /// of the store, deleting nothing. The folder's name starts with a capital letter, so
    /// it can never be a model's folder (ids are lowercase).
    package static func moveAsideCommand(recordsPath: String) -> String {
        let folder = directory(of: recordsPath) + "/Damaged-records"
        return "mkdir \(shellQuoted(folder)) && mv \(shellQuoted(recordsPath))* \(shellQuoted(folder + "/"))"
    }

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// `'text'`, with each `'` written as `'\''`.
    static func shellQuoted(_ text: String) -> String {
        "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }
}
