#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Timestamps on the E3DB wire (spec api §1.5).
///
/// Servers emit UTC with exactly six fraction digits and `Z` (`2026-11-25T12:34:56.123456Z`): Python accepts at
/// most six digits and needs a fraction for files, Java parses `SSSSSS`, old Swift needs a fraction. Time is kept
/// as microseconds since the Unix epoch so that two back-to-back writes get distinct, increasing stamps.
public enum APITimestamp {
    /// Formats microseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
    /// - Parameter micros: microseconds since 1970-01-01T00:00:00Z (negative values clamp to the epoch).
    /// - Returns: the wire form.
    public static func format(micros: Int64) -> String {
        let clamped = max(micros, 0)
        let seconds = clamped / 1_000_000
        let fraction = Int(clamped % 1_000_000)
        let (y, m, d) = civil(fromDays: seconds / 86_400)
        let secOfDay = Int(seconds % 86_400)
        if y <= 9999 {
            // The common case, written digit by digit into one 27-byte string.
            return unsafe String(unsafeUninitializedCapacity: 27) { b in
                func put(_ v: Int, _ width: Int, at offset: Int) {
                    var v = v
                    for i in stride(from: offset + width - 1, through: offset, by: -1) {
                        unsafe b[i] = UInt8(truncatingIfNeeded: 48 + v % 10)
                        v /= 10
                    }
                }
                put(y, 4, at: 0)
                put(m, 2, at: 5)
                put(d, 2, at: 8)
                put(secOfDay / 3600, 2, at: 11)
                put(secOfDay / 60 % 60, 2, at: 14)
                put(secOfDay % 60, 2, at: 17)
                put(fraction, 6, at: 20)
                unsafe (b[4], b[7], b[10], b[13], b[16], b[19], b[26]) = (45, 45, 84, 58, 58, 46, 90)  // - - T : : . Z
                return 27
            }
        }
        return pad(y, 4) + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(secOfDay / 3600, 2) + ":"
            + pad(secOfDay / 60 % 60, 2) + ":" + pad(secOfDay % 60, 2) + "." + pad(fraction, 6) + "Z"
    }

    /// The current time in microseconds since the epoch.
    public static func nowMicros() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down)) }

    /// Parses an RFC 3339 timestamp as the SDKs send them in search ranges: `YYYY-MM-DDTHH:MM:SS`, an optional
    /// fraction of any length (truncated to microseconds), then `Z` or `±HH:MM` (or no zone, read as UTC). A space
    /// may stand for `T`.
    /// - Parameter text: the timestamp.
    /// - Returns: microseconds since the epoch, or `nil` when the text is not such a timestamp.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for i in from..<(from + count) {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                v = v * 10 + Int(b[i] - 48)
            }
            return v
        }
        guard b.count >= 19, let y = num(0, 4), b[4] == 45, let mo = num(5, 2), b[7] == 45, let d = num(8, 2),
            b[10] == 84 || b[10] == 116 || b[10] == 32, let h = num(11, 2), b[13] == 58, let mi = num(14, 2),
            b[16] == 58, let s = num(17, 2), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61
        else { return nil }
        var i = 19
        var micros = 0
        if i < b.count, b[i] == 46 {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 6 { micros = micros * 10 + Int(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 6) { micros *= 10 }
        }
        var offsetSeconds = 0
        if i < b.count {
            if b[i] == 90 || b[i] == 122 {
                i += 1
            } else if b[i] == 43 || b[i] == 45, let oh = num(i + 1, 2), i + 3 < b.count, b[i + 3] == 58,
                let om = num(i + 4, 2)
            {
                offsetSeconds = (oh * 3600 + om * 60) * (b[i] == 43 ? 1 : -1)
                i += 6
            } else {
                return nil
            }
        }
        guard i == b.count else { return nil }
        let days = days(fromCivil: y, mo, d)
        let seconds = Int64(days) * 86_400 + Int64(h * 3600 + mi * 60 + s) - Int64(offsetSeconds)
        return seconds * 1_000_000 + Int64(micros)
    }

    private static func pad(_ v: Int, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }

    // Howard Hinnant's civil-from-days algorithms (proleptic Gregorian calendar).
    private static func civil(fromDays z0: Int64) -> (Int, Int, Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (Int(yoe + era * 400 + (m <= 2 ? 1 : 0)), Int(m), Int(d))
    }

    private static func days(fromCivil y0: Int, _ m: Int, _ d: Int) -> Int {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
