/// Calendar arithmetic for the two date formats the tool meets, without Foundation's
/// formatters (and their ICU data): HTTP dates (`Retry-After`, RFC 9110 IMF-fixdate) and
/// the ISO 8601 UTC timestamps it prints. Proleptic Gregorian calendar, UTC only.
package enum CivilTime {
    /// Days from 1970-01-01 to a civil date (Howard Hinnant's `days_from_civil`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day count from 1970-01-01 (`civil_from_days`).
    static func civil(days z0: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// `2026-12-01T14:13:04Z` for seconds since 1970; nil outside years 0…9999 or for NaN.
    package static func iso8601(_ seconds: Double) -> String? {
        guard seconds.isFinite, seconds >= -62_167_219_200, seconds < 253_402_300_800 else { return nil }
        let whole = Int64(seconds.rounded(.down))
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let rest = whole - days * 86_400
        let (y, m, d) = civil(days: days)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let year = String(y)
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + "-\(two(m))-\(two(d))T"
            + "\(two(rest / 3600)):\(two(rest / 60 % 60)):\(two(rest % 60))Z"
    }

    /// Seconds since 1970 of an HTTP date in the preferred format,
    /// `Sun, 06 Nov 1994 08:49:37 GMT`; nil for anything else (the obsolete RFC 850 and
    /// asctime forms included: no current server sends them in `Retry-After`).
    package static func httpDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = ExternalNumber.decimal(parts[1]), parts[1].count == 2, (1...31).contains(day),
              let monthIndex = months.firstIndex(of: String(parts[2])),
              let year = ExternalNumber.decimal(parts[3]), parts[3].count == 4 else { return nil }
        let clock = parts[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let h = ExternalNumber.decimal(clock[0]), let m = ExternalNumber.decimal(clock[1]),
              let s = ExternalNumber.decimal(clock[2]), h <= 23, m <= 59, s <= 60 else { return nil }
        return days(year: year, month: Int64(monthIndex + 1), day: day) * 86_400 + h * 3600 + m * 60 + s
    }

    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
}
