// Benchmark driver for Scripts/bench (not shipped): measures in-process costs with the
// real engine on a real store, and prepares inputs for the command-line measurements.
//
//   glasses-local-bench startup-setup <dir> [models] [history]   writes <dir>/catalog.json and <dir>/store
//   glasses-local-bench catalog-file <path> [models]              writes the same synthetic catalog to <path>
//   glasses-local-bench startup <dir> [runs]                      prints median/p90 timings
//   glasses-local-bench facade-first                              one process's first register() +
//                                                                 models() + autoChoice(), in ms
//                                                                 (store and catalog from
//                                                                 EXTENTOS_MODELS_DIR / EXTENTOS_CATALOG)
//   glasses-local-bench facade-later [runs]                       the same calls after the first
//   glasses-local-bench phases                                    where a fresh process's first call
//                                                                 spends its time (engine steps)
//   glasses-local-bench mirror <manifest.json> <dir>              writes every `files` entry of a
//                                                                 manifest with its real size
//                                                                 (synthetic content) under <dir>
import Foundation
import GlassesCore
import GlassesLocal
import LocalModelKit

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("glasses-local-bench: \(message)\n".utf8))
    exit(1)
}

func hex64(_ n: Int) -> String {
    let s = String(n, radix: 16)
    return String(repeating: "0", count: 64 - min(64, s.count)) + s
}

/// A catalog shaped like the real one: ladder-sized models with 9 files each.
func syntheticCatalog(models count: Int) -> JSONValue {
    let files = ["added_tokens.json", "config.json", "merges.txt", "model.safetensors", "model.safetensors.index.json",
                 "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.json"]
    var models: [JSONValue] = []
    for n in 0..<count {
        var fileEntries: [JSONValue] = []
        for (i, path) in files.enumerated() {
            let size = Int64(1000 + n * 1_000_000 + i)
            let entry: JSONValue = .object([("path", .string(path)), ("size", .int(size)), ("sha256", .string(hex64(n * 16 + i + 1)))])
            fileEntries.append(entry)
        }
        let source: JSONValue = .object([("type", .string("files")), ("baseURL", .string("https://models.example.com/bench-\(n)/"))])
        let model: JSONValue = .object([
            ("id", .string("bench-model-\(n)")), ("kind", .string("llm")), ("displayName", .string("Bench model \(n)")),
            ("requiredMb", .int(Int64(500 + n * 100))), ("autoEligible", .bool(n % 2 == 0)),
            ("files", .array(fileEntries)), ("sources", .array([source])),
        ])
        models.append(model)
    }
    return .object([("schemaVersion", 1), ("catalogVersion", 1), ("generatedAt", "2026-11-30T00:00:00Z"), ("models", .array(models))])
}

func timeIt(_ body: () throws -> Void) rethrows -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    try body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
}

func summary(_ samples: [Double]) -> (median: Double, p90: Double) {
    let s = samples.sorted()
    return (s[s.count / 2], s[min(s.count - 1, Int(Double(s.count) * 0.9))])
}

/// What an app does at start-up, through the public facade.
func appStartUp() -> Int {
    ExtentosLocalTier.register()
    let models = ExtentosLocalTier.models()
    let choice = ExtentosLocalTier.autoChoice()
    return models.count + (choice.isLocal ? 1 : 0)
}

let args = Array(CommandLine.arguments.dropFirst())
switch args.first {
case "facade-first":
    var result = 0
    let ms = timeIt { result = appStartUp() }
    guard result > 0, ExtentosLocalTier.storeProblem == nil else { fail("facade saw \(result) models: \(ExtentosLocalTier.storeProblem ?? "")") }
    print(String(format: "%.3f", ms))
    exit(0)
case "phases":
    // Where a fresh process's first call spends its time (engine-level, same steps as the facade).
    let env = ProcessInfo.processInfo.environment
    var t: [(String, Double)] = []
    t.append(("environment", timeIt { _ = ProcessInfo.processInfo.environment }))
    var catalog: Catalog?
    t.append(("catalog", timeIt { catalog = try? CatalogLoader().load(contentsOf: env["EXTENTOS_CATALOG"] ?? "") }))
    guard let catalog else { fail("catalog") }
    let engine = LocalModelEngine(layout: StoreLayout(root: env["EXTENTOS_MODELS_DIR"] ?? ""), catalog: catalog, probe: SystemDeviceProbe(environment: env))
    t.append(("open", timeIt { _ = try? engine.open() }))
    t.append(("models", timeIt { _ = try? engine.models() }))
    t.append(("models again", timeIt { _ = try? engine.models() }))
    t.append(("memory", timeIt { _ = engine.probe.memory() }))
    t.append(("space", timeIt { _ = try? engine.probe.space(at: engine.layout.root) }))
    t.append(("autoChoice", timeIt { _ = try? engine.autoChoice() }))
    t.append(("autoChoice again", timeIt { _ = try? engine.autoChoice() }))
    print(t.map { String(format: "%@ %.3f", $0.0, $0.1) }.joined(separator: ", "))
    func warm(_ name: String, _ body: () -> Void) {
        var samples: [Double] = []
        for _ in 0..<500 { samples.append(timeIt(body)) }
        print(String(format: "warm %@: median %.4f ms", name, summary(samples).median))
    }
    warm("models") { _ = try? engine.models() }
    warm("memory") { _ = engine.probe.memory() }
    warm("installs") { _ = try? engine.open().records.installs() }
    warm("reservedBytes") { _ = try? engine.open().records.read { try $0.reservedBytes() } }
    warm("autoChoice") { _ = try? engine.autoChoice() }
    exit(0)
case "facade-later":
    let runs = args.count > 1 ? Int(args[1]) ?? 1000 : 1000
    _ = appStartUp()
    var samples: [Double] = []
    for _ in 0..<runs { samples.append(timeIt { _ = appStartUp() }) }
    let s = summary(samples)
    print(String(format: "register() + models() + autoChoice(), every call after the first: median %.3f ms, p90 %.3f ms (%d runs)", s.median, s.p90, runs))
    exit(0)
default:
    break
}
guard let mode = args.first, args.count >= 2 else { fail("usage: glasses-local-bench startup-setup|startup <dir> [...]") }
let dir = args[1]

switch mode {
case "catalog-file":
    // `catalog-file <path> <models>`: the synthetic catalog alone (Scripts/bench catalog).
    let modelCount = args.count > 2 ? Int(args[2]) ?? 50 : 50
    do {
        try FileIO.writeFileAtomically(Array(syntheticCatalog(models: modelCount).serialized(pretty: true).utf8), toPath: dir)
    } catch {
        fail("\(error)")
    }
case "startup-setup":
    let modelCount = args.count > 2 ? Int(args[2]) ?? 50 : 50
    let historyRows = args.count > 3 ? Int(args[3]) ?? 10_000 : 10_000
    do {
        try FileIO.createDirectory(dir)
        let text = syntheticCatalog(models: modelCount).serialized(pretty: true)
        try FileIO.writeFileAtomically(Array(text.utf8), toPath: dir + "/catalog.json")
        let catalog = try CatalogLoader().load(contentsOf: dir + "/catalog.json")
        let layout = StoreLayout(root: dir + "/store")
        _ = try? FileIO.removeTree(layout.root)
        let engine = LocalModelEngine(layout: layout, catalog: catalog, probe: SystemDeviceProbe(environment: [:]))
        let records = try engine.open().records
        // Half the models installed (records + folders), a partial file for a few, and history.
        try records.write { ctx in
            for (n, model) in catalog.models.enumerated() where n % 2 == 1 {
                let path = layout.installPath(id: model.id, kind: model.kind)
                try FileIO.createDirectory(path)
                try ctx.upsert(InstallRecord(modelId: model.id, kind: model.kind, state: .installed, catalogVersion: 1, path: path,
                                             totalBytes: model.installedBytes, createdAt: ctx.now, updatedAt: ctx.now, installedAt: ctx.now))
                try ctx.setFiles(model.id, model.files.map { FileRecord(path: $0.path, size: $0.size, sha256: $0.sha256, bytesPresent: $0.size) })
            }
            for n in 0..<historyRows {
                try ctx.append(n % 3 == 0 ? .started : .completed, modelId: "bench-model-\(n % modelCount)", detail: "bench row \(n)")
            }
        }
        // Installed files must exist with their sizes, or start-up repair would (rightly) remove the records.
        for (n, model) in catalog.models.enumerated() where n % 2 == 1 {
            for file in model.files {
                let path = layout.installPath(id: model.id, kind: model.kind) + "/" + file.path
                guard FileManager.default.createFile(atPath: path, contents: nil),
                      let handle = FileHandle(forWritingAtPath: path) else { fail("create \(path)") }
                try handle.truncate(atOffset: UInt64(file.size))
                try handle.close()
            }
        }
        for model in catalog.models.prefix(4) where catalog.models.firstIndex(of: model).map({ $0 % 2 == 0 }) == true {
            let partial = layout.partialPath(id: model.id)
            try FileIO.createDirectory(partial)
            guard FileManager.default.createFile(atPath: partial + "/" + model.files[0].path, contents: Data(count: 500)) else { fail("create partial") }
        }
        print("prepared \(dir): \(modelCount) models, \(historyRows) history rows")
    } catch {
        fail("\(error)")
    }

case "startup":
    let runs = args.count > 2 ? Int(args[2]) ?? 200 : 200
    do {
        let catalogPath = dir + "/catalog.json"
        let layout = StoreLayout(root: dir + "/store")
        let probe = SystemDeviceProbe(environment: [:])
        // Cold: what an app pays on its first call — parse and validate the catalog, open
        // the records (WAL check, migrations, repair scan), then models() + deviceFit.
        var cold: [Double] = []
        for _ in 0..<max(20, runs / 10) {
            cold.append(try timeIt {
                let catalog = try CatalogLoader().load(contentsOf: catalogPath)
                let engine = LocalModelEngine(layout: layout, catalog: catalog, probe: probe)
                _ = try engine.models()
                _ = try engine.deviceFit(for: "bench-model-0")
            })
        }
        // Warm: every later call on the open engine.
        let catalog = try CatalogLoader().load(contentsOf: catalogPath)
        let engine = LocalModelEngine(layout: layout, catalog: catalog, probe: probe)
        _ = try engine.models()
        var warm: [Double] = []
        for _ in 0..<runs {
            warm.append(try timeIt {
                _ = try engine.models()
                _ = try engine.deviceFit(for: "bench-model-0")
            })
        }
        var parse: [Double] = []
        let bytes = try FileIO.readFile(atPath: catalogPath, limit: CatalogLoader.maxCatalogBytes)
        for _ in 0..<runs { parse.append(try timeIt { _ = try CatalogLoader().decode(bytes, source: "bench") }) }
        var jsonOnly: [Double] = []
        for _ in 0..<runs { jsonOnly.append(try timeIt { _ = try JSONParser().parse(bytes) }) }
        let j = summary(jsonOnly)
        let c = summary(cold), w = summary(warm), p = summary(parse)
        print(String(format: "in-process cold (parse catalog + open store + models() + deviceFit): median %.2f ms, p90 %.2f ms", c.median, c.p90))
        print(String(format: "in-process warm (models() + deviceFit on an open engine):           median %.2f ms, p90 %.2f ms", w.median, w.p90))
        print(String(format: "catalog decode + validate alone:                                    median %.2f ms, p90 %.2f ms", p.median, p.p90))
        print(String(format: "  of which JSON parsing (%d bytes):                               median %.2f ms, p90 %.2f ms", bytes.count, j.median, j.p90))
    } catch {
        fail("\(error)")
    }

case "mirror":
    // args: mirror <manifest> <dir>
    guard args.count == 3 else { fail("usage: glasses-local-bench mirror <manifest.json> <dir>") }
    do {
        let manifest = try JSONParser().parse(try FileIO.readFile(atPath: args[1], limit: 64 << 20))
        guard case .array(let files)? = manifest["files"] else { fail("\(args[1]) has no files array") }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var total: Int64 = 0
        for file in files {
            guard case .string(let path)? = file["path"], case .int(let size)? = file["size"] else { fail("bad entry \(file)") }
            let full = args[2] + "/" + path
            try FileIO.createDirectory((full as NSString).deletingLastPathComponent)
            guard let handle = FileHandle(forWritingAtPath: full) ?? {
                FileManager.default.createFile(atPath: full, contents: nil) ? FileHandle(forWritingAtPath: full) : nil
            }() else { fail("create \(full)") }
            var left = size
            while left > 0 {
                let n = Int(min(Int64(buffer.count), left))
                buffer.withUnsafeMutableBytes { raw in
                    let words = raw.bindMemory(to: UInt64.self)
                    for i in 0..<(n + 7) / 8 where i < words.count {
                        state ^= state << 13; state ^= state >> 7; state ^= state << 17   // xorshift64
                        words[i] = state
                    }
                }
                handle.write(Data(buffer[0..<n]))
                left -= Int64(n)
            }
            try handle.close()
            total += size
        }
        print("wrote \(files.count) files, \(total) bytes under \(args[2])")
    } catch {
        fail("\(error)")
    }

default:
    fail("unknown mode \(mode)")
}
