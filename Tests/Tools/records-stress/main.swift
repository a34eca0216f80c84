// Test tool: opens a store's records database and writes to it in a loop, as another
// process would (the app, cron and the CLI at once). Exits non-zero on any error, so
// a test can assert that SQLITE_BUSY never reaches a caller.
//
// usage: records-stress <records.sqlite3> <model-id-prefix> <iterations>
import Foundation
import LocalModelKit

let args = CommandLine.arguments
guard args.count == 4, let iterations = Int(args[3]) else {
    FileHandle.standardError.write(Data("usage: records-stress <records.sqlite3> <prefix> <iterations>\n".utf8))
    exit(2)
}
do {
    let records = try Records(path: args[1])
    for n in 0..<iterations {
        let id = "\(args[2])-\(n % 7)"
        try records.write { ctx in
            try ctx.upsert(InstallRecord(modelId: id, kind: .llm, state: .partial, catalogVersion: 1, path: nil,
                                         totalBytes: Int64(n), createdAt: ctx.now, updatedAt: ctx.now))
            try ctx.upsertFile(id, FileRecord(path: "f\(n % 3)", size: 100, sha256: nil, bytesPresent: Int64(n % 100)))
            try ctx.append(.resumed, modelId: id, detail: "iteration \(n)")
            try ctx.reserve(id, bytes: Int64(n), pid: getpid())
        }
        _ = try records.installs()
    }
    print("ok \(iterations)")
} catch {
    FileHandle.standardError.write(Data("records-stress: \(error)\n".utf8))
    exit(1)
}
