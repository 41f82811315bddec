import Foundation

/// ISO-8601 dates as Apple sends them and as the gateway writes them.
///
/// Apple is not consistent: iAd dates carry seconds (`2020-08-04T17:18:07Z`), AdServices
/// dates stop at the minute (`2024-10-08T17:17Z`), and some relays add fractional seconds
/// or a numeric offset. Strict parsers reject half of these, so one lenient parser serves
/// every provider.
public enum ISO8601 {
    /// Parses `YYYY-MM-DDTHH:MM[:SS[.fff…]](Z|±HH:MM|±HHMM)`; a space may stand for `T`.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    static func parse(utf8 chars: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0

        func number(_ digits: Int) -> Int? {
            guard index + digits <= chars.count else { return nil }
            var value = 0
            for _ in 0..<digits {
                let c = chars[index]
                guard c >= 48 && c <= 57 else { return nil }
                value = value * 10 + Int(c - 48)
                index += 1
            }
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard index < chars.count, chars[index] == c else { return false }
            index += 1
            return true
        }

        guard let year = number(4), expect(UInt8(ascii: "-")),
            let month = number(2), expect(UInt8(ascii: "-")),
            let day = number(2)
        else { return nil }
        guard expect(UInt8(ascii: "T")) || expect(UInt8(ascii: "t")) || expect(UInt8(ascii: " ")) else {
            return nil
        }
        guard let hour = number(2), expect(UInt8(ascii: ":")), let minute = number(2) else { return nil }
        var second = 0
        var fraction = 0.0
        if expect(UInt8(ascii: ":")) {
            guard let s = number(2) else { return nil }
            second = s
            if expect(UInt8(ascii: ".")) || expect(UInt8(ascii: ",")) {
                var digits = 0
                var scale = 1.0
                let start = index
                while index < chars.count, chars[index] >= 48, chars[index] <= 57 {
                    if index - start < 9 {
                        digits = digits * 10 + Int(chars[index] - 48)
                        scale *= 10
                    }
                    index += 1
                }
                guard index > start else { return nil }
                fraction = Double(digits) / scale
            }
        }
        var offsetSeconds = 0
        if expect(UInt8(ascii: "Z")) || expect(UInt8(ascii: "z")) {
            offsetSeconds = 0
        } else if index < chars.count, chars[index] == UInt8(ascii: "+") || chars[index] == UInt8(ascii: "-") {
            let sign = chars[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            guard let oh = number(2) else { return nil }
            _ = expect(UInt8(ascii: ":"))
            guard let om = number(2) else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard index == chars.count,
            (1...12).contains(month), (1...31).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }

        guard day <= daysInMonth(year: year, month: month) else { return nil }  // rejects 2024-02-31
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// The date `seconds` after 1970 rounded to the millisecond, exactly as ``parse(_:)``
    /// reads what ``format(_:)`` writes of it: a store keeping a time as a number gives
    /// back the date its text would have.
    public static func milliseconds(_ seconds: Double) -> Date {
        let totalMillis = Int((seconds * 1000).rounded())
        let millis = ((totalMillis % 1000) + 1000) % 1000
        let whole = Double((totalMillis - millis) / 1000)
        return Date(timeIntervalSince1970: millis == 0 ? whole : whole + Double(millis) / 1000)
    }

    /// Formats in UTC with milliseconds only when the date has them: `2020-08-04T17:18:07Z`.
    public static func format(_ date: Date) -> String {
        let totalMillis = Int((date.timeIntervalSince1970 * 1000).rounded())
        let millis = ((totalMillis % 1000) + 1000) % 1000
        let seconds = (totalMillis - millis) / 1000
        let secondOfDay = ((seconds % 86_400) + 86_400) % 86_400
        let (year, month, day) = civilFromDays((seconds - secondOfDay) / 86_400)
        guard (0...9999).contains(year) else {
            return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + "T" + pad(secondOfDay / 3600, 2) + ":"
                + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
                + (millis != 0 ? "." + pad(millis, 3) : "")
                + "Z"
        }
        // Written into one buffer: this runs for every date of every record stored or read.
        return String(unsafeUninitializedCapacity: 24) { buffer in
            var at = 0
            func digits(_ value: Int, _ width: Int) {
                var value = value
                for offset in stride(from: width - 1, through: 0, by: -1) {
                    buffer[at + offset] = UInt8(48 + value % 10)
                    value /= 10
                }
                at += width
            }
            func char(_ c: Unicode.Scalar) {
                buffer[at] = UInt8(ascii: c)
                at += 1
            }
            digits(year, 4); char("-"); digits(month, 2); char("-"); digits(day, 2); char("T")
            digits(secondOfDay / 3600, 2); char(":"); digits(secondOfDay / 60 % 60, 2); char(":");
            digits(secondOfDay % 60, 2)
            if millis != 0 { char("."); digits(millis, 3) }
            char("Z")
            return at
        }
    }

    // Calendar arithmetic without Foundation's Calendar, which is slow on Linux and sits on
    // the ingest path. Howard Hinnant's days-from-civil algorithms, proleptic Gregorian.

    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}

extension Calendar {
    /// The Gregorian calendar in UTC, in which the gateway's days are counted.
    public static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
