// Storage fit (what a download still needs against what the real filesystem has) and
// the memory readings of SystemDeviceProbe, with fixture /proc and /sys folders.
import Foundation
import GlassesTestSupport
import Testing
@testable import LocalModelKit

@Suite("DeviceFit", .ownThreads, .networkGuard)
struct DeviceFitTests {
    typealias S = StoreTestSupport

    static let mib: Int64 = 1 << 20

    static let filesModel = S.filesModel("files-model", files: [("weights/model.gguf", 3_000_000), ("tokenizer.json", 12_345)])
    static let archiveModel = S.archiveModel("archive-model", archiveSize: 2_000_000,
                                             files: [("voice/model.onnx", 5_000_000), ("voice/tokens.txt", 1_000)])
    static let catalog = S.catalog([filesModel, archiveModel])

    /// 32 MiB + 1 % of the installed size, written out rather than asked of the code under test.
    static func margin(_ installed: Int64) -> Int64 { 33_554_432 + installed / 100 }

    static func engine(_ dir: String) -> LocalModelEngine {
        S.engine(root: dir + "/store", catalog: catalog)
    }

    static func available(_ path: String) throws -> Int64 {
        try FilesystemSpace.of(path: path).availableBytes
    }

    /// Runs `body` with a folder on a tmpfs of its own (1 GiB; nothing is taken from memory
    /// until written). Its free space moves only when this test writes, so it is compared
    /// exactly: the shared temporary folder's moves while parallel tests write into it.
    static func withPrivateFilesystem<T>(_ body: (String) throws -> T) throws -> T {
        let fs = try PrivateTmpfs(size: 1 << 30)
        defer { fs.remove() }
        return try body(fs.path)
    }

    // MARK: Requirement

    @Test("the margin is 32 MiB plus 1 % of the installed size")
    func marginFormula() {
        #expect(StorageMargin.bytes(forInstalledBytes: 0) == 33_554_432)
        #expect(StorageMargin.bytes(forInstalledBytes: 1_000_000_000) == 33_554_432 + 10_000_000)
        #expect(StorageMargin.bytes(forInstalledBytes: 3_012_345) == 33_554_432 + 30_123)
    }

    @Test("a fresh files-source model needs its download plus the margin")
    func freshFilesModel() throws {
        try S.withTempDir { dir in
            let fit = try Self.engine(dir).deviceFit(for: "files-model")
            #expect(Self.filesModel.installedBytes == 3_012_345)
            #expect(fit.requiredBytes == 3_012_345 + Self.margin(3_012_345))
            #expect(fit.presentBytes == 0)
            #expect(fit.modelId == "files-model")
        }
    }

    @Test("an installed model needs nothing more")
    func installedModelNeedsZero() throws {
        try S.withTempDir { dir in
            let engine = Self.engine(dir)
            let (records, _) = try engine.open()
            try S.install(Self.filesModel, layout: engine.layout, records: records)
            try S.install(Self.archiveModel, layout: engine.layout, records: records)
            for model in [Self.filesModel, Self.archiveModel] {
                let status = try engine.status(of: model.id)
                #expect(status.isInstalled)
                #expect(status.fit.requiredBytes == 0)
                #expect(status.fit.requiredMb == 0)
                #expect(status.fit.fits)
                #expect(status.fit.presentBytes == model.installedBytes)
            }
        }
    }

    @Test("N bytes of a file already in .partial reduce the requirement by exactly N")
    func partialFileReducesRequirement() throws {
        try S.withTempDir { dir in
            let engine = Self.engine(dir)
            let fresh = try engine.deviceFit(for: "files-model")
            let partial = engine.layout.partialPath(id: "files-model")
            let n: Int64 = 1_000_003
            try S.writeFile(partial + "/weights/model.gguf", count: Int(n))
            let one = try engine.deviceFit(for: "files-model")
            #expect(one.requiredBytes == fresh.requiredBytes - n)
            #expect(one.presentBytes == n)
            // A second, complete file counts in full.
            try S.writeFile(partial + "/tokenizer.json", count: 12_345)
            let two = try engine.deviceFit(for: "files-model")
            #expect(two.requiredBytes == fresh.requiredBytes - n - 12_345)
            #expect(two.presentBytes == n + 12_345)
            // Bytes past a file's declared size, and files the catalog does not name, count for nothing.
            try S.writeFile(partial + "/tokenizer.json", count: 20_000)
            try S.writeFile(partial + "/stray.bin", count: 50_000)
            #expect(try engine.deviceFit(for: "files-model").requiredBytes == two.requiredBytes)
            // Nothing else changes the requirement: the margin stays.
            try S.writeFile(partial + "/weights/model.gguf", count: 3_000_000)
            #expect(try engine.deviceFit(for: "files-model").requiredBytes == Self.margin(3_012_345))
        }
    }

    @Test("an archive model needs the archive, room to unpack it, and the margin; partial archive bytes reduce it")
    func archiveModelRequirement() throws {
        try S.withTempDir { dir in
            let engine = Self.engine(dir)
            let installed: Int64 = 5_001_000
            let fresh = try engine.deviceFit(for: "archive-model")
            #expect(fresh.requiredBytes == 2_000_000 + installed + Self.margin(installed))
            let n: Int64 = 750_001
            try S.writeFile(engine.layout.partialArchivePath(id: "archive-model"), count: Int(n))
            let partial = try engine.deviceFit(for: "archive-model")
            #expect(partial.requiredBytes == fresh.requiredBytes - n)
            #expect(partial.presentBytes == n)
            // An archive longer than declared never reduces the unpack room or the margin.
            try S.writeFile(engine.layout.partialArchivePath(id: "archive-model"), count: 2_100_000)
            #expect(try engine.deviceFit(for: "archive-model").requiredBytes == installed + Self.margin(installed))
        }
    }

    @Test("requiredMb rounds up and availableMb rounds down")
    func megabyteRounding() throws {
        func fit(_ required: Int64, _ available: Int64) -> StorageFit {
            StorageFit(modelId: "m", requiredBytes: required, availableBytes: available, presentBytes: 0)
        }
        #expect(fit(0, 0).requiredMb == 0)
        #expect(fit(1, 0).requiredMb == 1)
        #expect(fit(Self.mib, 0).requiredMb == 1)
        #expect(fit(Self.mib + 1, 0).requiredMb == 2)
        #expect(fit(0, Self.mib - 1).availableMb == 0)
        #expect(fit(0, Self.mib).availableMb == 1)
        #expect(fit(0, 2 * Self.mib + 5).availableMb == 2)
        #expect(fit(0, -5).availableMb == 0)
        // fits compares bytes, not rounded megabytes.
        #expect(fit(Self.mib + 1, Self.mib + 1).fits)
        #expect(!fit(Self.mib + 2, Self.mib + 1).fits)
        try S.withTempDir { dir in
            let real = try Self.engine(dir).deviceFit(for: "files-model")
            #expect(real.requiredMb == Int((real.requiredBytes + Self.mib - 1) / Self.mib))
            #expect(Int64(real.requiredMb) * Self.mib >= real.requiredBytes)
            #expect(Int64(real.availableMb) * Self.mib <= real.availableBytes)
            #expect(Int64(real.availableMb + 1) * Self.mib > real.availableBytes)
        }
    }

    // MARK: Available space

    @Test("availableBytes matches df for the store's folder")
    func availableMatchesDf() throws {
        let df = try S.tool(["/usr/bin/df", "/bin/df"])
        try Self.withPrivateFilesystem { dir in
            let engine = Self.engine(dir)
            try engine.open()
            func dfAvail() throws -> (avail: Int64, size: Int64) {
                let result = try S.run(df, ["-B1", "--output=avail,size", engine.layout.root])
                #expect(result.status == 0, "\(result.stderr)")
                let fields = result.stdout.split(separator: "\n").last?.split(separator: " ").compactMap { Int64($0) } ?? []
                #expect(fields.count == 2, "unexpected df output: \(result.stdout)")
                return (fields.first ?? -1, fields.last ?? -1)
            }
            let before = try dfAvail()
            let fit = try engine.deviceFit(for: "files-model")
            let after = try dfAvail()
            #expect(before.avail == after.avail, "nothing else writes on this filesystem, and asking for a fit writes nothing")
            #expect(fit.availableBytes == before.avail, "df says \(before.avail)")
            #expect(try FilesystemSpace.of(path: engine.layout.root).totalBytes == before.size)
            #expect(before.size == 1 << 30)
        }
    }

    @Test("a store that does not exist yet reads the space of its nearest existing folder and is not created")
    func spaceOfMissingStore() throws {
        try Self.withPrivateFilesystem { dir in
            let engine = S.engine(root: dir + "/not/yet/store", catalog: Self.catalog)
            let before = try Self.available(dir)
            let fit = try engine.deviceFit(for: "files-model")
            #expect(fit.availableBytes == before && before == 1 << 30, "the empty filesystem's \(before) bytes")
            #expect(try Self.available(dir) == before)
            #expect(!FileIO.exists(dir + "/not"), "asking for a fit must not create the store")
        }
    }

    @Test("reservations of other downloads reduce availableBytes; the model's own does not")
    func reservationsOfOthersCount() throws {
        try Self.withPrivateFilesystem { dir in
            let engine = Self.engine(dir)
            let (records, _) = try engine.open()
            let own: Int64 = 128 * Self.mib
            let other: Int64 = 64 * Self.mib
            try records.write { ctx in
                try ctx.reserve("files-model", bytes: own, pid: 1)
                try ctx.reserve("someone-else", bytes: other, pid: 2)
            }
            let root = engine.layout.root
            let free = try Self.available(root)
            let filesFit = try engine.deviceFit(for: "files-model")
            let archiveFit = try engine.deviceFit(for: "archive-model")
            let listed = try engine.models()
            let inputs = try engine.autoChoiceInputs()
            #expect(try Self.available(root) == free, "the readings wrote nothing")
            #expect(filesFit.availableBytes == free - other)
            #expect(archiveFit.availableBytes == free - other - own)
            #expect(try #require(listed.first { $0.model.id == "files-model" }).fit.availableBytes == free - other)
            #expect(try #require(listed.first { $0.model.id == "archive-model" }).fit.availableBytes == free - other - own)
            #expect(inputs.freeStorageBytes == free - other - own)
            // Releasing the other download gives its space back (the release itself may
            // grow the database: read the free space again).
            try records.write { try $0.release("someone-else") }
            let freeAfterRelease = try Self.available(root)
            #expect(try engine.deviceFit(for: "files-model").availableBytes == freeAfterRelease)
        }
    }

    @Test("unknown model ids throw .unknownModel")
    func unknownModel() throws {
        try S.withTempDir { dir in
            let engine = Self.engine(dir)
            #expect(throws: LocalModelError.unknownModel("no-such-model")) { _ = try engine.deviceFit(for: "no-such-model") }
            #expect(throws: LocalModelError.unknownModel("")) { _ = try engine.status(of: "") }
            try engine.open()
            let error = #expect(throws: LocalModelError.self) { _ = try engine.deviceFit(for: "FILES-MODEL") }
            #expect(error == .unknownModel("FILES-MODEL"))
            #expect(error?.description.contains("glasses-local list") == true)
        }
    }

    // MARK: SystemDeviceProbe memory

    static let meminfo = """
        MemTotal:        8000000 kB
        MemFree:         1000000 kB
        MemAvailable:    4000000 kB
        Buffers:          100000 kB

        """
    /// 8000000 kB and 4000000 kB in whole MB.
    static let fixturePhysical = 7812
    static let fixtureAvailable = 3906

    static func probe(_ dir: String, _ env: [String: String], meminfo: String? = DeviceFitTests.meminfo) throws -> SystemDeviceProbe {
        try FileIO.createDirectory(dir + "/proc")
        try FileIO.createDirectory(dir + "/sys")
        if let meminfo { try S.writeFile(dir + "/proc/meminfo", Array(meminfo.utf8)) }
        return SystemDeviceProbe(environment: env, procRoot: dir + "/proc", sysRoot: dir + "/sys")
    }

    @Test("without overrides the numbers come from meminfo")
    func meminfoFixture() throws {
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, [:]).memory()
            #expect(reading.physicalMb == Self.fixturePhysical)
            #expect(reading.availableMb == Self.fixtureAvailable)
            #expect(reading.source.contains("meminfo"))
        }
    }

    @Test("an old kernel without MemAvailable falls back to MemFree")
    func meminfoWithoutMemAvailable() throws {
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, [:], meminfo: "MemTotal: 2048000 kB\nMemFree: 512000 kB\n").memory()
            #expect(reading.physicalMb == 2000)
            #expect(reading.availableMb == 500)
        }
    }

    @Test("EXTENTOS_MEMORY_MB and EXTENTOS_MEMORY_AVAILABLE_MB override both readings")
    func bothOverrides() throws {
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "4096", "EXTENTOS_MEMORY_AVAILABLE_MB": "1000"]).memory()
            #expect(reading.physicalMb == 4096)
            #expect(reading.availableMb == 1000)
            #expect(reading.source.contains("EXTENTOS_MEMORY_MB"))
            // Available never exceeds physical.
            let capped = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "2048", "EXTENTOS_MEMORY_AVAILABLE_MB": "3000"]).memory()
            #expect(capped.physicalMb == 2048)
            #expect(capped.availableMb == 2048)
        }
    }

    @Test("one override at a time keeps the other reading from meminfo, capped by physical")
    func singleOverrides() throws {
        try S.withTempDir { dir in
            let small = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "2048"]).memory()
            #expect(small.physicalMb == 2048)
            #expect(small.availableMb == 2048)
            let large = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "16384"]).memory()
            #expect(large.physicalMb == 16384)
            #expect(large.availableMb == Self.fixtureAvailable)
            let available = try Self.probe(dir, ["EXTENTOS_MEMORY_AVAILABLE_MB": "1000"]).memory()
            #expect(available.physicalMb == Self.fixturePhysical)
            #expect(available.availableMb == 1000)
            let tooMuch = try Self.probe(dir, ["EXTENTOS_MEMORY_AVAILABLE_MB": "99999"]).memory()
            #expect(tooMuch.availableMb == Self.fixturePhysical)
        }
    }

    @Test("garbage override values are ignored", arguments: ["abc", "-5", "12MB", "", "4096.5", "0x100", "1e3", "99999999999999999999"])
    func garbageOverridesIgnored(value: String) throws {
        try S.withTempDir { dir in
            for env in [["EXTENTOS_MEMORY_MB": value], ["EXTENTOS_MEMORY_AVAILABLE_MB": value],
                        ["EXTENTOS_MEMORY_MB": value, "EXTENTOS_MEMORY_AVAILABLE_MB": value]] {
                let reading = try Self.probe(dir, env).memory()
                #expect(reading.physicalMb == Self.fixturePhysical, "\(env)")
                #expect(reading.availableMb == Self.fixtureAvailable, "\(env)")
            }
            // A valid partner is still honoured next to a garbage one.
            let mixed = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "3000", "EXTENTOS_MEMORY_AVAILABLE_MB": value]).memory()
            #expect(mixed.physicalMb == 3000)
            #expect(mixed.availableMb == 3000)
            // Every ignored value is reported (an empty one counts as unset).
            #expect(mixed.overrideProblems.map(\.variable) == (value.isEmpty ? [] : ["EXTENTOS_MEMORY_AVAILABLE_MB"]), "\(mixed)")
        }
    }

    @Test("a zero override is not a memory size and is ignored (the documented rule: a positive whole number)")
    func zeroOverrideIgnored() throws {
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": "0"]).memory()
            #expect(reading.physicalMb == Self.fixturePhysical)
            #expect(reading.overrideProblems == [MemoryOverrideProblem(variable: "EXTENTOS_MEMORY_MB", rawValue: "0", reason: .outOfRange)])
        }
    }

    @Test("hostile override values never trap: each is refused with its reason, the value cut short in the message",
          arguments: [
            ("9223372036854775807", MemoryOverrideProblem.Reason.outOfRange), ("9223372036854775808", .outOfRange),
            ("-9223372036854775809", .outOfRange), ("-1", .outOfRange), ("0", .outOfRange), ("-0", .outOfRange),
            ("1073741825", .outOfRange), (String(repeating: "9", count: 10_000), .outOfRange),
            ("1e400", .notAWholeNumber), ("NaN", .notAWholeNumber), ("inf", .notAWholeNumber), ("+", .notAWholeNumber),
            ("--5", .notAWholeNumber), ("4 096", .notAWholeNumber), ("\u{0}", .notAWholeNumber), ("٤٠٩٦", .notAWholeNumber),
          ])
    func hostileOverrides(_ value: String, _ reason: MemoryOverrideProblem.Reason) throws {
        #expect(MemoryOverride.parse(value) == .ignored(reason))
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, ["EXTENTOS_MEMORY_MB": value, "EXTENTOS_MEMORY_AVAILABLE_MB": value]).memory()
            #expect(reading.physicalMb == Self.fixturePhysical)
            #expect(reading.availableMb == Self.fixtureAvailable)
            #expect(reading.overrideProblems.map(\.reason) == [reason, reason])
            for problem in reading.overrideProblems {
                #expect(problem.description.count < 300, "\(problem.description.prefix(400))")
                #expect(!problem.description.unicodeScalars.contains { $0.value < 0x20 }, "one line, no control characters")
            }
        }
    }

    @Test("the accepted range is 1 MiB to 2^30 MiB (1 PiB), spaces around the number allowed")
    func acceptedRange() {
        #expect(MemoryOverride.acceptedMb == 1...(1 << 30))
        #expect(MemoryOverride.parse("1") == .megabytes(1))
        #expect(MemoryOverride.parse("1073741824") == .megabytes(1 << 30))
        #expect(MemoryOverride.parse(" 4096\t") == .megabytes(4096))
        #expect(MemoryOverride.parse("+4096") == .megabytes(4096))
        #expect(MemoryOverride.parse(nil) == .unset)
        #expect(MemoryOverride.parse("  ") == .unset)
    }

    @Test("a cgroup v2 memory limit caps physical and available memory")
    func cgroupLimit() throws {
        try S.withTempDir { dir in
            let probe = try Self.probe(dir, [:])
            try S.writeFile(dir + "/proc/self/cgroup", Array("0::/app.slice/glasses.service\n".utf8))
            let group = dir + "/sys/fs/cgroup/app.slice/glasses.service"
            try S.writeFile(group + "/memory.max", Array("2147483648\n".utf8))
            try S.writeFile(group + "/memory.current", Array("536870912\n".utf8))
            let limited = probe.memory()
            #expect(limited.physicalMb == 2048)
            #expect(limited.availableMb == 1536)
            #expect(limited.source.contains("cgroup"))
            // "max" means no limit.
            try S.writeFile(group + "/memory.max", Array("max\n".utf8))
            let unlimited = probe.memory()
            #expect(unlimited.physicalMb == Self.fixturePhysical)
            #expect(unlimited.availableMb == Self.fixtureAvailable)
        }
    }

    @Test("without /proc/meminfo the physical size comes from ProcessInfo")
    func noMeminfo() throws {
        try S.withTempDir { dir in
            let reading = try Self.probe(dir, [:], meminfo: nil).memory()
            // ProcessInfo and sysconf must agree on this machine: both are the kernel's figure.
            let expected = Int(sysconf(Int32(_SC_PHYS_PAGES))) * Int(sysconf(Int32(_SC_PAGESIZE))) / (1 << 20)
            #expect(reading.physicalMb == expected)
            #expect(reading.source == "ProcessInfo.physicalMemory")
            #expect(reading.physicalMb > 0)
            #expect(reading.availableMb <= reading.physicalMb)
        }
    }

    @Test("the real device answers plausible numbers")
    func realDevice() {
        let reading = SystemDeviceProbe(environment: [:]).memory()
        #expect(reading.physicalMb > 0)
        #expect(reading.availableMb > 0)
        #expect(reading.availableMb <= reading.physicalMb)
    }
}
