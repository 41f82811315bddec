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
        let chars = Array(text.utf8)
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
                var scale = 0.1
                var any = false
                while index < chars.count, chars[index] >= 48, chars[index] <= 57 {
                    fraction += Double(chars[index] - 48) * scale
                    scale /= 10
                    index += 1
                    any = true
                }
                guard any else { return nil }
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

        var components = DateComponents()
        components.year = year
        components.month = month
        components.day = day
        components.hour = hour
        components.minute = minute
        components.second = second
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        guard let base = calendar.date(from: components),
            calendar.component(.day, from: base) == day  // rejects 2024-02-31
        else { return nil }
        return base.addingTimeInterval(fraction - Double(offsetSeconds))
    }

    /// Formats in UTC with milliseconds only when the date has them: `2020-08-04T17:18:07Z`.
    public static func format(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        let millis = Int(((seconds - whole) * 1000).rounded())
        let c = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: whole))
        let base = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!)
        if millis == 0 { return base + "Z" }
        if millis == 1000 { return format(Date(timeIntervalSince1970: whole + 1)) }
        return base + String(format: ".%03dZ", millis)
    }
}
