/// `HH:MM-HH:MM` in local time; a window whose end comes before its start runs across
/// midnight (`22:00-06:00`).
package struct TimeWindow: Sendable, Equatable, CustomStringConvertible {
    /// Minutes after local midnight when it opens.
    package var start: Int
    /// Minutes after local midnight when it closes (before `start`: the next day).
    package var end: Int

    /// `HH:MM-HH:MM` (two digits each; start and end differ), or nil for anything else.
    package init?(_ text: String) {
        let halves = text.split(separator: "-", omittingEmptySubsequences: false)
        guard halves.count == 2, let a = Self.minutes(halves[0]), let b = Self.minutes(halves[1]), a != b else { return nil }
        start = a
        end = b
    }

    private static func minutes(_ text: Substring) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.count == 2 }), let h = ExternalNumber.decimal(parts[0]),
              let m = ExternalNumber.decimal(parts[1]), h <= 23, m <= 59 else { return nil }
        return Int(h * 60 + m)
    }

    /// Seconds until the window closes, from `second` of the local day; nil outside it.
    package func secondsLeft(atSecondOfDay second: Int) -> Int? {
        let s = start * 60, e = end * 60
        if s < e { return second >= s && second < e ? e - second : nil }
        if second >= s { return 86_400 - second + e }
        return second < e ? e - second : nil
    }

    /// `HH:MM-HH:MM`.
    package var description: String {
        func hm(_ m: Int) -> String { (m / 60 < 10 ? "0" : "") + "\(m / 60):" + (m % 60 < 10 ? "0" : "") + "\(m % 60)" }
        return hm(start) + "-" + hm(end)
    }
}

/// What a prefetch checks about the device before any network use.
package struct PrefetchConditions: Sendable, Equatable {
    /// What powers the machine.
    package enum Power: Sendable, Equatable {
        /// A mains supply (AC adapter) is online.
        case mains
        /// Batteries only.
        case battery
        /// No battery at all (a desktop, a server): counts as mains.
        case noBattery
    }
    /// Seconds after local midnight, now.
    package var secondOfDay: Int
    /// The local time as text, for messages ("06:00:02").
    package var clock: String
    /// What powers the machine (`--require-ac` wants mains, or no battery).
    package var power: Power
    /// Where the power reading came from, for messages.
    package var powerSource: String
    /// The 1-minute load average, nil when unknown.
    package var load1: Double?
}

/// Whether the network costs by the byte (a phone's hotspot), as NetworkManager sees the
/// primary connection, or as `EXTENTOS_METERED` says.
package struct MeteredReading: Sendable, Equatable {
    /// The connection's cost, as far as is known.
    package enum State: String, Sendable, Equatable {
        /// NetworkManager says `yes` or `guess-yes`, or `EXTENTOS_METERED=yes`.
        case metered
        /// `no` or `guess-no`, or `EXTENTOS_METERED=no`.
        case unmetered
        /// No NetworkManager (or no system bus), or it does not know: treated as unmetered.
        case unknown
    }
    /// Metered, unmetered or unknown.
    package var state: State
    /// Where the answer came from, for messages ("NetworkManager: guess-yes",
    /// "EXTENTOS_METERED=yes", "NetworkManager is not running …").
    package var source: String
}

/// Reads the conditions from the system, or from the documented overrides:
/// `EXTENTOS_NOW` (ISO 8601 local time, which then advances with the clock),
/// `EXTENTOS_POWER_SUPPLY_DIR` (a folder shaped like `/sys/class/power_supply`),
/// `EXTENTOS_LOADAVG` (a number), `EXTENTOS_METERED` (`yes` or `no`). Instance-based: one per run, so the overridden clock
/// advances from the moment the run started.
package final class PrefetchConditionsProbe: Sendable {
    let environment: [String: String]
    private let startedAt = SystemClock.monotonicSeconds()

    /// A probe for one run; its overridden clock starts advancing now.
    package init(environment: [String: String]) {
        self.environment = environment
    }

    /// A problem with an override's value, to report (the real reading is used instead).
    package func overrideProblems() -> [String] {
        var problems: [String] = []
        if let now = environment["EXTENTOS_NOW"], Self.secondOfDay(iso: now) == nil {
            problems.append("EXTENTOS_NOW='\(now.prefix(40))' is not an ISO 8601 local time (2026-12-01T05:30:00); the real clock is used")
        }
        if let load = environment["EXTENTOS_LOADAVG"], Self.load(load) == nil {
            problems.append("EXTENTOS_LOADAVG='\(load.prefix(40))' is not a number; /proc/loadavg is used")
        }
        if let metered = environment["EXTENTOS_METERED"], !metered.isEmpty, Self.meteredOverride(metered) == nil {
            problems.append("EXTENTOS_METERED='\(metered.prefix(40))' is neither yes nor no; NetworkManager is asked")
        }
        return problems
    }

    /// `EXTENTOS_METERED`: `yes` or `no` (any case); anything else is no override.
    static func meteredOverride(_ text: String) -> MeteredReading.State? {
        switch text.trimmingWhitespace().lowercased() {
        case "yes": return .metered
        case "no": return .unmetered
        default: return nil
        }
    }

    /// Whether the connection is metered: `EXTENTOS_METERED` when it is `yes` or `no`, else
    /// NetworkManager's `Metered` over the system bus (`yes` and `guess-yes` are metered).
    /// Without NetworkManager the state is unknown. Asks the bus on every call: only
    /// `--require-unmetered` calls it, once per run.
    package func metered() -> MeteredReading {
        if let text = environment["EXTENTOS_METERED"], let state = Self.meteredOverride(text) {
            return MeteredReading(state: state, source: "EXTENTOS_METERED=\(text.trimmingWhitespace())")
        }
        let address = environment["DBUS_SYSTEM_BUS_ADDRESS"].flatMap { $0.isEmpty ? nil : $0 } ?? "unix:path=/run/dbus/system_bus_socket"
        switch NetworkManagerBus.metered(busAddress: address) {
        case .success(let value):
            let name = value < NetworkManagerBus.meteredNames.count ? NetworkManagerBus.meteredNames[Int(value)] : "\(value)"
            let state: MeteredReading.State = value == 1 || value == 3 ? .metered : (value == 2 || value == 4 ? .unmetered : .unknown)
            return MeteredReading(state: state, source: "NetworkManager: \(name)")
        case .failure(let problem):
            return MeteredReading(state: .unknown, source: problem.text)
        }
    }

    /// The clock, the power and the load, read now (overrides first).
    package func read() -> PrefetchConditions {
        let second = secondOfDay()
        let (power, source) = readPower()
        return PrefetchConditions(secondOfDay: second, clock: Self.clock(second), power: power, powerSource: source, load1: readLoad())
    }

    /// Seconds after local midnight now (the override advances with the monotonic clock).
    package func secondOfDay() -> Int {
        if let text = environment["EXTENTOS_NOW"], let base = Self.secondOfDay(iso: text) {
            let elapsed = Int((SystemClock.monotonicSeconds() - startedAt).rounded(.down))
            return (base + elapsed) % 86_400
        }
        return SystemClock.localSecondOfDay()
    }

    static func clock(_ second: Int) -> String {
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(second / 3600)):\(two(second / 60 % 60)):\(two(second % 60))"
    }

    /// The time of day of `2026-12-01T05:30:00` (seconds optional, a trailing zone ignored).
    static func secondOfDay(iso text: String) -> Int? {
        guard let t = text.firstIndex(of: "T") else { return nil }
        let time = text[text.index(after: t)...].prefix(8)
        let parts = time.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts.count <= 3, let h = ExternalNumber.decimal(parts[0].prefix(2)), let m = ExternalNumber.decimal(parts[1].prefix(2)),
              h <= 23, m <= 59 else { return nil }
        let s = parts.count == 3 ? ExternalNumber.decimal(parts[2].prefix(2)) ?? 0 : 0
        guard s <= 59 else { return nil }
        return Int(h * 3600 + m * 60 + s)
    }

    static func load(_ text: String) -> Double? {
        guard let value = Double(text.trimmingWhitespace()), value.isFinite, value >= 0, value < 1e6 else { return nil }
        return value
    }

    private func readLoad() -> Double? {
        if let text = environment["EXTENTOS_LOADAVG"], let value = Self.load(text) { return value }
        guard let bytes = try? FileIO.readFile(atPath: "/proc/loadavg", limit: 4096),
              let first = String(decoding: bytes, as: UTF8.self).split(separator: " ").first else { return nil }
        return Self.load(String(first))
    }

    /// Mains when any mains or USB supply is online; battery when there is a battery and no
    /// supply is online; no battery when there is none (a desktop or a server).
    private func readPower() -> (PrefetchConditions.Power, String) {
        let dir = environment["EXTENTOS_POWER_SUPPLY_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/sys/class/power_supply"
        var batteries = 0
        for name in (try? FileIO.listDirectory(dir)) ?? [] {
            func read(_ file: String) -> String? {
                (try? FileIO.readFile(atPath: dir + "/" + name + "/" + file, limit: 256)).map { String(decoding: $0, as: UTF8.self).trimmingWhitespace() }
            }
            switch read("type") {
            case "Mains"?, "USB"?:
                if read("online") == "1" { return (.mains, "\(dir)/\(name) online") }
            case "Battery"?:
                batteries += 1
            default: break
            }
        }
        return batteries > 0 ? (.battery, "\(dir): a battery and no supply online") : (.noBattery, "\(dir): no battery")
    }
}
