import Foundation

/// A report's installs and revenue day by day (UTC) over a period: one entry per day, days
/// without data at zero. Its size is the number of days, whatever the number of users.
///
/// An install counts on the day it happened (a user's credited install, as ``KeywordReport``
/// counts it once per user), attributed or not: `organic` also holds installs whose source
/// never answered (`unknown`). Revenue counts on the purchase's day, refunds left out.
public struct DailySeries: Sendable, Equatable, Codable {
    /// The first day's midnight, UTC.
    public let start: Date
    /// The days, `YYYY-MM-DD`.
    public let days: [String]
    /// Installs through an ad, per day.
    public private(set) var attributed: [Int]
    /// Installs with no ad behind them, or none known, per day.
    public private(set) var organic: [Int]
    /// Revenue per currency code, per day.
    public private(set) var revenue: [String: [Decimal]] = [:]
    /// Purchases per currency code over the period: which currency to chart.
    public private(set) var purchases: [String: Int] = [:]

    /// The most days a series holds: a period longer than this keeps its last days.
    public static let maxDays = 366

    /// The days from `since`'s to the one before `until` (exclusive). Without `until`, up to
    /// `now`'s day; without `since`, the 30 days up to `until`'s.
    public init(since: Date?, until: Date?, now: Date = Date()) {
        let calendar = Calendar.utc
        // `until` is exclusive: a period ending at midnight ends the day before.
        let last = calendar.startOfDay(for: until.map { $0.addingTimeInterval(-1) } ?? now)
        var first = since.map { calendar.startOfDay(for: $0) } ?? calendar.date(byAdding: .day, value: -29, to: last)!
        if first > last { first = last }
        let count = min((calendar.dateComponents([.day], from: first, to: last).day ?? 0) + 1, Self.maxDays)
        let start = calendar.date(byAdding: .day, value: -(count - 1), to: last)!
        self.start = start
        days = (0..<count).map { ISO8601.format(start.addingTimeInterval(Double($0) * 86400)).prefix(10).description }
        attributed = Array(repeating: 0, count: count)
        organic = Array(repeating: 0, count: count)
    }

    /// `time`'s day as days since 1970-01-01 (UTC), as a database's daily counts name it.
    public static func epochDay(_ time: Date) -> Int { Int((time.timeIntervalSince1970 / 86400).rounded(.down)) }

    mutating func addInstall(at time: Date, attributed isAttributed: Bool) {
        addInstalls(1, onEpochDay: Self.epochDay(time), attributed: isAttributed)
    }

    mutating func addRevenue(_ amount: Decimal, _ currency: String, at time: Date) {
        addRevenue(amount, currency, purchases: 1, onEpochDay: Self.epochDay(time))
    }

    /// The series' days as days since 1970-01-01 (UTC): where a database's daily counts land.
    public var epochDays: Range<Int> {
        let first = Self.epochDay(start)
        return first..<(first + days.count)
    }

    /// Adds `count` installs on a day given as days since 1970-01-01; one outside the series is left out.
    public mutating func addInstalls(_ count: Int, onEpochDay day: Int, attributed isAttributed: Bool) {
        guard epochDays.contains(day) else { return }
        let index = day - epochDays.lowerBound
        if isAttributed { attributed[index] += count } else { organic[index] += count }
    }

    /// Adds the revenue of `purchases` purchases on a day given as days since 1970-01-01; one
    /// outside the series is left out.
    public mutating func addRevenue(_ amount: Decimal, _ currency: String, purchases count: Int, onEpochDay day: Int) {
        guard epochDays.contains(day) else { return }
        purchases[currency, default: 0] += count
        if revenue[currency] == nil { revenue[currency] = Array(repeating: 0, count: days.count) }
        revenue[currency]![day - epochDays.lowerBound] += amount
    }

    /// The currency with the most purchases (then the first by code): the one charted when
    /// there are several, since amounts in two currencies do not add up, nor compare: ¥500
    /// is less than $26.97.
    public var mainCurrency: String? {
        var best: (currency: String, count: Int)?
        for currency in revenue.keys.sorted() {
            let count = purchases[currency, default: 0]
            if best.map({ count > $0.count }) ?? true { best = (currency, count) }
        }
        return best?.currency
    }
}
