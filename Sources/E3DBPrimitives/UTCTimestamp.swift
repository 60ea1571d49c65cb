/// RFC 3339 UTC timestamps, `YYYY-MM-DDTHH:MM:SS.fffZ` with a fixed number of fraction digits, written digit by
/// digit, and the proleptic Gregorian calendar arithmetic under them: the one writer of the package's timestamp text
/// (the E3DB wire's `APITimestamp`, six digits; the store's `StoreTime`, three).
package enum UTCTimestamp {
    /// The text of the instant `seconds` since 1970-01-01T00:00:00Z plus `fraction` units of
    /// 10^-`fractionDigits` seconds (`0 ..< 10^fractionDigits`). Years 0 to 9999 have four digits; others have
    /// their decimal digits, at least four (a minus sign first before year 0).
    /// - Parameters:
    ///   - seconds: whole seconds since the epoch (negative: before it).
    ///   - fraction: the fraction of the second, in units of 10^-`fractionDigits` seconds.
    ///   - fractionDigits: the number of fraction digits (1 to 9).
    package static func format(seconds: Int64, fraction: Int, fractionDigits: Int) -> String {
        let days = floorDivide(seconds, 86_400)
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = civil(fromDays: days)
        let (hour, minute, second) = (secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60)
        guard (0...9999).contains(year) else {
            // Outside four digits (no timestamp the package writes).
            let parts: [String] = [
                year < 0 ? "-" : "", padded(Int(year.magnitude), 4), "-", padded(month, 2), "-", padded(day, 2), "T",
                padded(hour, 2), ":", padded(minute, 2), ":", padded(second, 2), ".", padded(fraction, fractionDigits),
                "Z",
            ]
            return parts.joined()
        }
        let count = 21 + fractionDigits
        // Safety: `put` writes `width` bytes from `offset`; the fields below cover bytes 0 to `count` - 1 of the
        // buffer (whose capacity is `count`) exactly once, before the closure returns `count`.
        return unsafe String(unsafeUninitializedCapacity: count) { buffer in
            func put(_ value: Int, _ width: Int, at offset: Int) {
                var rest = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    unsafe buffer[index] = UInt8(truncatingIfNeeded: 48 + rest % 10)
                    rest /= 10
                }
            }
            put(Int(year), 4, at: 0)
            put(month, 2, at: 5)
            put(day, 2, at: 8)
            put(hour, 2, at: 11)
            put(minute, 2, at: 14)
            put(second, 2, at: 17)
            put(fraction, fractionDigits, at: 20)
            // - - T : : . Z
            unsafe (buffer[4], buffer[7], buffer[10], buffer[13], buffer[16], buffer[19], buffer[count - 1]) =
                (45, 45, 84, 58, 58, 46, 90)
            return count
        }
    }

    /// `value` (not negative) in decimal, zero-padded to at least `width` digits.
    private static func padded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// `value / divisor` rounded toward negative infinity (`divisor` > 0).
    package static func floorDivide(_ value: Int64, _ divisor: Int64) -> Int64 {
        let quotient = value / divisor
        return value % divisor < 0 ? quotient - 1 : quotient
    }

    /// The date `days` after 1970-01-01 (Howard Hinnant's civil-from-days algorithm).
    package static func civil(fromDays days: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), Int(month), Int(day))
    }

    /// The days from 1970-01-01 to a date (the days-from-civil algorithm); `month` 1 to 12.
    package static func days(fromCivil year: Int64, month: Int, day: Int) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The days from 1970-01-01 to `year`-`month`-`day`, or nil when that is no date of the proleptic Gregorian
    /// calendar (a month outside 1 to 12, a day outside 1 to the month's length: 2026-02-29, 2026-04-31): the one
    /// date check of the package's timestamp parsers (`APITimestamp.parse`, the store's `StoreTime`).
    package static func days(year: Int64, month: Int, day: Int) -> Int64? {
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return days(fromCivil: year, month: month, day: day)
    }

    /// The number of days in `month` (1 to 12) of `year`.
    package static func daysIn(month: Int, year: Int64) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
