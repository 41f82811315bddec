import Foundation

/// Reads an HTTP `Retry-After` header: delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
public enum RetryAfter {
    /// The longest wait honoured. A receiver's value is its own to choose, and one past any
    /// clock (`Retry-After: 10000000000000000`) overflowed the milliseconds of the retry
    /// schedule and stopped the process, again at every start; a day keeps the record
    /// waiting, as asked, without that.
    public static let longest: Duration = .seconds(86_400)

    /// The wait it asks for, at most ``longest``, or nil when it is neither form.
    public static func parse(_ value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if text.isASCIIDigits {
            // Digits alone, however many: more than fit an Int is more than a day too.
            guard let seconds = Int(text) else { return longest }
            return min(.seconds(seconds), longest)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        let seconds = min(max(date.timeIntervalSince(now), 0), longest / .seconds(1))
        return .milliseconds(Int64(seconds * 1000))
    }
}
