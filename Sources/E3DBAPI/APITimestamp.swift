import E3DBPrimitives

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
        return UTCTimestamp.format(
            seconds: clamped / 1_000_000, fraction: Int(clamped % 1_000_000), fractionDigits: 6)
    }

    /// Go's zero time, `0001-01-01T00:00:00Z`, in microseconds since the epoch (719,162 days before it): what the
    /// SDKs send for "no time" (an unbounded search range, a note that does not expire).
    package static let goZeroTime: Int64 = -62_135_596_800_000_000

    /// The current time in microseconds since the epoch.
    public static func nowMicros() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded(.down)) }

    /// Parses an RFC 3339 timestamp as the SDKs send them in search ranges: `YYYY-MM-DDTHH:MM:SS`, an optional
    /// fraction of any length (truncated to microseconds), then `Z` or `±HH:MM` (or no zone, read as UTC). A space
    /// may stand for `T`.
    /// - Parameter text: the timestamp.
    /// - Returns: microseconds since the epoch, or `nil` when the text is not such a timestamp (a date that does not
    ///   exist, such as `2026-02-29` or `2026-04-31`, is not one).
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
            b[16] == 58, let s = num(17, 2), let days = UTCTimestamp.days(year: Int64(y), month: mo, day: d), h < 24,
            mi < 60, s < 61
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
        let seconds = days * 86_400 + Int64(h * 3600 + mi * 60 + s) - Int64(offsetSeconds)
        return seconds * 1_000_000 + Int64(micros)
    }
}
