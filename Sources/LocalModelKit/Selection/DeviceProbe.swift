import FoundationEssentials

/// Memory readings that drive `autoChoice`.
public struct MemoryReading: Sendable, Equatable {
    /// Physical memory (on Linux the smaller of `MemTotal` and the cgroup limit).
    public var physicalMb: Int
    /// Memory available now (`MemAvailable`, capped by the cgroup's headroom).
    public var availableMb: Int
    /// Where the numbers came from ("/proc/meminfo", "EXTENTOS_MEMORY_MB", …), for `doctor`.
    public var source: String
    /// Overrides that were set but could not be used (the device's own reading was used
    /// instead). The probe never prints them: `doctor`, `auto --explain` and the command
    /// line's one warning line do.
    public var overrideProblems: [MemoryOverrideProblem]

    /// A reading: a probe's, or a test's stand-in for a device.
    public init(physicalMb: Int, availableMb: Int, source: String, overrideProblems: [MemoryOverrideProblem] = []) {
        self.physicalMb = physicalMb
        self.availableMb = availableMb
        self.source = source
        self.overrideProblems = overrideProblems
    }
}

/// The memory overrides `EXTENTOS_MEMORY_MB` (physical) and `EXTENTOS_MEMORY_AVAILABLE_MB`
/// (available now), for tests and "what would a 4 GB device get?".
///
/// A value is a whole number of MiB within ``acceptedMb`` (spaces and tabs around it are
/// allowed; an empty value counts as unset). Anything else — zero, a negative number, more
/// than 1 PiB, a number too long for any integer, text — is ignored and reported as a
/// ``MemoryOverrideProblem``; the device's own reading is used instead.
public enum MemoryOverride {
    /// The variable overriding the physical memory: `EXTENTOS_MEMORY_MB`.
    public static let physicalVariable = "EXTENTOS_MEMORY_MB"
    /// The variable overriding the memory available now: `EXTENTOS_MEMORY_AVAILABLE_MB`.
    public static let availableVariable = "EXTENTOS_MEMORY_AVAILABLE_MB"
    /// 1 MiB … 2^30 MiB (1 PiB): from the smallest memory a size can name to far beyond any device.
    public static let acceptedMb: ClosedRange<Int> = 1...(1 << 30)

    /// What one override's text says.
    public enum Parsed: Sendable, Equatable {
        /// Not set, or empty.
        case unset
        /// A usable value, in MiB.
        case megabytes(Int)
        /// Set to something it cannot use.
        case ignored(MemoryOverrideProblem.Reason)
    }

    /// Reads one override's text. Never traps, whatever the text (10,000 digits,
    /// `Int.max + 1`, control characters).
    public static func parse(_ text: String?) -> Parsed {
        guard let text else { return .unset }
        let trimmed = text.trimmed(of: " \t")
        if trimmed.isEmpty { return .unset }
        var digits = Substring(trimmed)
        if digits.first == "+" || digits.first == "-" { digits = digits.dropFirst() }
        let isWholeNumber = !digits.isEmpty && digits.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard isWholeNumber else { return .ignored(.notAWholeNumber) }
        // Int(_:) answers nil for a number beyond Int's range: out of range either way.
        guard let value = Int(trimmed), acceptedMb.contains(value) else { return .ignored(.outOfRange) }
        return .megabytes(value)
    }
}

/// A memory override that was set but not used, with what to say about it.
public struct MemoryOverrideProblem: Sendable, Equatable, CustomStringConvertible {
    /// Why the value cannot be used.
    public enum Reason: String, Sendable, Equatable {
        /// Text, a fraction, a unit suffix, hex: not digits.
        case notAWholeNumber
        /// A whole number outside ``MemoryOverride/acceptedMb`` (zero, negative, too large).
        case outOfRange
    }

    /// `EXTENTOS_MEMORY_MB` or `EXTENTOS_MEMORY_AVAILABLE_MB`.
    public var variable: String
    /// The value as set, for messages: control characters escaped, and cut to its first
    /// 32 characters (saying how long it was) when longer than 40.
    public var value: String
    /// Why it was ignored.
    public var reason: Reason

    /// A problem with `rawValue` (kept escaped and cut for messages, never printed raw).
    public init(variable: String, rawValue: String, reason: Reason) {
        self.variable = variable
        self.value = Self.shown(rawValue)
        self.reason = reason
    }

    /// One line: the variable, the value, why, the accepted range, and what is used instead.
    public var description: String {
        let range = "\(MemoryOverride.acceptedMb.lowerBound) to \(Self.grouped(MemoryOverride.acceptedMb.upperBound)) MiB (1 PiB)"
        let why = reason == .outOfRange ? "outside the accepted range, \(range)" : "not a whole number of MiB; the accepted range is \(range)"
        let instead = variable == MemoryOverride.availableVariable ? "the memory available now as measured" : "the physical memory as measured"
        return "\(variable)='\(value)' is ignored: \(why); \(instead) is used instead"
    }

    static func shown(_ raw: String) -> String {
        func escaped<S: Sequence>(_ scalars: S) -> String where S.Element == Unicode.Scalar {
            var out = ""
            for scalar in scalars {
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
            return out
        }
        let count = raw.unicodeScalars.count
        if count <= 40 { return escaped(raw.unicodeScalars) }
        return escaped(raw.unicodeScalars.prefix(32)) + "… (\(Self.grouped(count)) characters)"
    }

    static func grouped(_ n: Int) -> String {
        let digits = String(n)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return out
    }
}

/// What the engine asks of the device. A parameter of the engine so tests can stand in
/// for a phone's memory; storage is always read from the real filesystem.
public protocol DeviceProbe: Sendable {
    /// The memory now: physical and available, with where the numbers came from.
    func memory() -> MemoryReading
    /// The free space of the filesystem holding `path` (for this user, as `statvfs` tells).
    /// - Throws: ``LocalModelError/system(_:modelId:)`` when the filesystem cannot be read.
    func space(at path: String) throws(LocalModelError) -> FilesystemSpace
}

/// Reads the real device, honouring the documented overrides
/// `EXTENTOS_MEMORY_MB` (physical) and `EXTENTOS_MEMORY_AVAILABLE_MB` (available now);
/// see ``MemoryOverride`` for the values they accept.
public struct SystemDeviceProbe: DeviceProbe {
    /// Where the overrides are read.
    public var environment: [String: String]
    /// Root of `/proc` and `/sys` (a parameter so tests can feed fixture files).
    public var procRoot: String
    /// Root of `/sys` (the cgroup's `memory.max` and `memory.current` are read below it).
    public var sysRoot: String

    /// The device's probe; tests point `procRoot` and `sysRoot` at fixture folders.
    public init(environment: [String: String], procRoot: String = "/proc", sysRoot: String = "/sys") {
        self.environment = environment
        self.procRoot = procRoot
        self.sysRoot = sysRoot
    }

    /// `statvfs` of `path`: the space this user may fill (`f_bavail`).
    /// - Throws: ``LocalModelError/system(_:modelId:)`` when `statvfs` fails.
    public func space(at path: String) throws(LocalModelError) -> FilesystemSpace {
        do { return try FilesystemSpace.of(path: path) } catch { throw .system(error, modelId: nil) }
    }

    /// `/proc/meminfo`, capped by a cgroup v2 `memory.max`, unless an override is set
    /// (an unusable one is reported in ``MemoryReading/overrideProblems``).
    public func memory() -> MemoryReading {
        var problems: [MemoryOverrideProblem] = []
        func override(_ name: String) -> Int? {
            switch MemoryOverride.parse(environment[name]) {
            case .megabytes(let mb): return mb
            case .ignored(let reason):
                problems.append(MemoryOverrideProblem(variable: name, rawValue: environment[name] ?? "", reason: reason))
                return nil
            case .unset: return nil
            }
        }
        let physicalOverride = override(MemoryOverride.physicalVariable)
        let availableOverride = override(MemoryOverride.availableVariable)
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
        return MemoryReading(physicalMb: physical, availableMb: available, source: source, overrideProblems: problems)
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
