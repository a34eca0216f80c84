import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Memory readings that drive `autoChoice`.
public struct MemoryReading: Sendable, Equatable {
    /// Physical memory (on Linux the smaller of `MemTotal` and the cgroup limit).
    public var physicalMb: Int
    /// Memory available now (`MemAvailable`, capped by the cgroup's headroom).
    public var availableMb: Int
    /// Where the numbers came from ("/proc/meminfo", "EXTENTOS_MEMORY_MB", …), for `doctor`.
    public var source: String

    public init(physicalMb: Int, availableMb: Int, source: String) {
        self.physicalMb = physicalMb
        self.availableMb = availableMb
        self.source = source
    }
}

/// What the engine asks of the device. A parameter of the engine so tests can stand in
/// for a phone's memory; storage is always read from the real filesystem.
public protocol DeviceProbe: Sendable {
    func memory() -> MemoryReading
    func space(at path: String) throws(SystemError) -> FilesystemSpace
}

/// Reads the real device, honouring the documented overrides
/// `EXTENTOS_MEMORY_MB` (physical) and `EXTENTOS_MEMORY_AVAILABLE_MB` (available now).
public struct SystemDeviceProbe: DeviceProbe {
    public var environment: [String: String]
    /// Root of `/proc` and `/sys` (a parameter so tests can feed fixture files).
    public var procRoot: String
    public var sysRoot: String

    public init(environment: [String: String], procRoot: String = "/proc", sysRoot: String = "/sys") {
        self.environment = environment
        self.procRoot = procRoot
        self.sysRoot = sysRoot
    }

    public func space(at path: String) throws(SystemError) -> FilesystemSpace {
        try FilesystemSpace.of(path: path)
    }

    public func memory() -> MemoryReading {
        let physicalOverride = environment["EXTENTOS_MEMORY_MB"].flatMap(Self.megabytes)
        let availableOverride = environment["EXTENTOS_MEMORY_AVAILABLE_MB"].flatMap(Self.megabytes)
        if let physicalOverride, let availableOverride {
            return MemoryReading(physicalMb: physicalOverride, availableMb: min(availableOverride, physicalOverride),
                                 source: "EXTENTOS_MEMORY_MB, EXTENTOS_MEMORY_AVAILABLE_MB")
        }
        var measured = readMeminfo()
        if let limit = cgroupLimitMb() {
            measured.physical = min(measured.physical, limit.limit)
            measured.available = min(measured.available, max(0, limit.limit - limit.used))
            measured.source += " + cgroup memory.max"
        }
        var source = measured.source
        var physical = measured.physical
        var available = measured.available
        if let physicalOverride {
            physical = physicalOverride
            available = min(available, physicalOverride)
            source = "EXTENTOS_MEMORY_MB, available from " + source
        }
        if let availableOverride {
            available = min(availableOverride, physical)
            source = "EXTENTOS_MEMORY_AVAILABLE_MB, physical from " + source
        }
        return MemoryReading(physicalMb: physical, availableMb: available, source: source)
    }

    /// A positive whole number of MB; anything else is ignored (and `doctor` says so).
    static func megabytes(_ text: String) -> Int? {
        guard let n = Int(text.trimmed(of: " \t")), n > 0, n <= 1 << 30 else { return nil }
        return n
    }

    private func readMeminfo() -> (physical: Int, available: Int, source: String) {
        guard let bytes = try? FileIO.readFile(atPath: procRoot + "/meminfo", limit: 1 << 20) else {
            // No /proc (Apple platforms, a sandbox): ProcessInfo knows the physical size, and
            // nothing here knows "now", so it is taken as the whole.
            let mb = Int(ProcessInfo.processInfo.physicalMemory >> 20)
            return (mb, mb, "ProcessInfo.physicalMemory")
        }
        // Byte-level parsing: this runs on every autoChoice(), and splitting ~50 lines into
        // Characters cost more than the kernel takes to produce them.
        var total = 0
        var available: Int?
        var free = 0
        Self.forEachField(bytes) { name, kb in
            switch name {
            case "MemTotal": total = kb / 1024
            case "MemAvailable": available = kb / 1024
            case "MemFree": free = kb / 1024
            default: break
            }
        }
        return (total, available ?? free, procRoot + "/meminfo")
    }

    /// Calls `body` with each "Name:   value kB" line's name and number; only the names
    /// that matter are turned into Strings.
    static func forEachField(_ bytes: [UInt8], _ body: (String, Int) -> Void) {
        let wanted: [[UInt8]] = [Array("MemTotal".utf8), Array("MemAvailable".utf8), Array("MemFree".utf8)]
        var i = 0
        while i < bytes.count {
            let lineStart = i
            while i < bytes.count && bytes[i] != UInt8(ascii: ":") && bytes[i] != UInt8(ascii: "\n") { i += 1 }
            let nameEnd = i
            var value = 0
            var digits = 0
            if i < bytes.count && bytes[i] == UInt8(ascii: ":") {
                i += 1
                while i < bytes.count && bytes[i] == UInt8(ascii: " ") { i += 1 }
                while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9"), digits < 18 {
                    value = value * 10 + Int(bytes[i] - UInt8(ascii: "0"))
                    digits += 1
                    i += 1
                }
            }
            while i < bytes.count && bytes[i] != UInt8(ascii: "\n") { i += 1 }
            i += 1
            let name = bytes[lineStart..<nameEnd]
            if digits > 0, wanted.contains(where: { name.elementsEqual($0) }) {
                body(String(decoding: name, as: UTF8.self), value)
            }
        }
    }

    /// cgroup v2 limit of this process, when one is set.
    private func cgroupLimitMb() -> (limit: Int, used: Int)? {
        guard let text = try? FileIO.readFile(atPath: procRoot + "/self/cgroup", limit: 1 << 16) else { return nil }
        // cgroup v2: one line "0::/path".
        guard let line = String(decoding: text, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        let group = String(line.dropFirst(3))
        let dir = sysRoot + "/fs/cgroup" + (group == "/" ? "" : group)
        guard let maxText = try? FileIO.readFile(atPath: dir + "/memory.max", limit: 64),
              let limit = Int64(String(decoding: maxText, as: UTF8.self).trimmed(of: " \n")) else { return nil }
        let current = (try? FileIO.readFile(atPath: dir + "/memory.current", limit: 64))
            .flatMap { Int64(String(decoding: $0, as: UTF8.self).trimmed(of: " \n")) } ?? 0
        return (Int(limit >> 20), Int(current >> 20))
    }
}

extension String {
    /// Foundation-free trim for a small set of characters.
    func trimmed(of set: String) -> String {
        let chars = Set(set)
        var s = Substring(self)
        while let f = s.first, chars.contains(f) { s = s.dropFirst() }
        while let l = s.last, chars.contains(l) { s = s.dropLast() }
        return String(s)
    }
}
