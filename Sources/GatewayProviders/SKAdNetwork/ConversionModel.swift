import Foundation
import GatewayCore

/// What an app's conversion values mean, from a YAML file that config names: for each
/// postback window (`postback-sequence-index` 0, 1, 2), fine values 0–63 in ranges and
/// coarse values low/medium/high, each with the events it stands for and a revenue range.
///
/// ```yaml
/// windows:
///   - postback: 0
///     fine:
///       - { values: 0, events: [install] }
///       - { values: 1-9, events: [install, trial] }
///       - { values: 10-63, events: [install, purchase], revenue: { min: 0.99, max: 49.99 }, currency: USD }
///     coarse:
///       low: { events: [install] }
///       high: { events: [purchase], revenue: { min: 0.99 } }
/// ```
public struct ConversionModel: Sendable, Equatable {
    /// What one value means.
    public struct Outcome: Sendable, Equatable {
        public var events: [String]
        public var revenueMin: Decimal?
        public var revenueMax: Decimal?
        public var currency: String?
    }

    public struct FineRange: Sendable, Equatable {
        public var values: ClosedRange<Int>
        public var outcome: Outcome
    }

    public struct Window: Sendable, Equatable {
        public var fine: [FineRange] = []
        public var coarse: [String: Outcome] = [:]
    }

    /// By postback-sequence-index.
    public var windows: [Int: Window]

    /// The meaning of a fine or coarse value in a window; nil when the model says nothing.
    public func outcome(window: Int, fine: Int?, coarse: String?) -> Outcome? {
        guard let model = windows[window] else { return nil }
        if let fine { return model.fine.first { $0.values.contains(fine) }?.outcome }
        if let coarse { return model.coarse[coarse] }
        return nil
    }

    /// Fills `events`, `revenue_min`, `revenue_max` and `currency` of a postback record.
    public func decode(_ record: inout AttributionRecord) {
        guard
            let outcome = outcome(
                window: record.postbackSequenceIndex ?? 0, fine: record.fineValue, coarse: record.coarseValue)
        else { return }
        record.events = outcome.events
        record.revenueMin = outcome.revenueMin
        record.revenueMax = outcome.revenueMax
        record.currency = outcome.currency
    }

    /// The highest fine value of the first window that an app state qualifies for: its
    /// event is one of the range's events and its revenue (in the range's currency) is
    /// within the range's bounds. Values stand for the lowest value of their range.
    public func fineValue(event: String, revenue: [String: Decimal]) -> Int? {
        guard let first = windows[0] else { return nil }
        let outcomes = first.fine.map(\.outcome)
        return first.fine.filter { Self.qualifies($0.outcome, among: outcomes, event: event, revenue: revenue) }
            .map(\.values.lowerBound).max()
    }

    /// Coarse values from lowest to highest.
    public static let coarseLevels = ["low", "medium", "high"]

    /// The highest coarse value of `window` that an app state qualifies for, by the same
    /// rule as ``fineValue(event:revenue:)``.
    public func coarseValue(window: Int, event: String, revenue: [String: Decimal]) -> String? {
        guard let model = windows[window] else { return nil }
        let outcomes = Array(model.coarse.values)
        return Self.coarseLevels.last { level in
            model.coarse[level].map { Self.qualifies($0, among: outcomes, event: event, revenue: revenue) } ?? false
        }
    }

    /// Whether an app state qualifies for `outcome`. Revenue past the `max` of the
    /// highest range for the event (the one with the highest `min`) still counts there: a
    /// user who spends more than the top bucket names is the best payer, not no payer.
    static func qualifies(_ outcome: Outcome, among outcomes: [Outcome], event: String, revenue: [String: Decimal])
        -> Bool
    {
        func isFor(_ outcome: Outcome) -> Bool {
            outcome.events.contains(event) || (event == "__SESSION__" && outcome.events.contains("session"))
        }
        guard isFor(outcome) else { return false }
        let amount = outcome.currency.map { revenue[$0] ?? 0 } ?? revenue.values.reduce(0, +)
        if let min = outcome.revenueMin, amount < min { return false }
        if let max = outcome.revenueMax, amount > max {
            let top = outcomes.filter(isFor).compactMap(\.revenueMin).max()
            guard let min = outcome.revenueMin, min == top else { return false }
        }
        return true
    }

    // MARK: reading

    /// Reads and checks a model: windows 0–2 once each, fine values 0–63 in ranges that
    /// neither overlap nor leave gaps below the highest one, coarse keys low/medium/high,
    /// revenue minimums not above maximums.
    public static func read(_ reader: ConfigReader) -> ConversionModel? {
        let before = reader.diagnostics.issues.count
        var windows: [Int: Window] = [:]
        for window in reader.list("windows") ?? [] {
            guard let index = window.int("postback", in: 0...2) else {
                if !window.has("postback") { window.report("is required", key: "postback") }
                continue
            }
            if windows[index] != nil { window.report("window \(index) is defined twice", key: "postback") }
            var model = Window()
            var owner: [Int: Int] = [:]
            for (position, item) in (window.list("fine") ?? []).enumerated() {
                guard let values = readRange(item) else { continue }
                var overlap: (value: Int, other: Int)?
                for value in values {
                    if let other = owner[value] {
                        overlap = overlap ?? (value, other)
                    } else {
                        owner[value] = position
                    }
                }
                if let overlap {
                    item.report("value \(overlap.value) is also in fine[\(overlap.other)]", key: "values")
                }
                if let outcome = readOutcome(item) { model.fine.append(FineRange(values: values, outcome: outcome)) }
                item.finish()
            }
            if let highest = owner.keys.max(), let gap = (0...highest).first(where: { owner[$0] == nil }) {
                window.report("fine value \(gap) is in no range (values must run from 0 without gaps)", key: "fine")
            }
            if let coarse = window.child("coarse") {
                for level in ["low", "medium", "high"] {
                    if let item = coarse.child(level) {
                        if let outcome = readOutcome(item) { model.coarse[level] = outcome }
                        item.finish()
                    }
                }
                coarse.finish()
            }
            window.finish()
            windows[index] = model
        }
        if windows.isEmpty && reader.diagnostics.issues.count == before {
            reader.report("defines no windows", key: nil)
        }
        reader.finish()
        return reader.diagnostics.issues.count == before ? ConversionModel(windows: windows) : nil
    }

    /// `values: 5` or `values: 1-9`, within 0–63.
    static func readRange(_ item: ConfigReader) -> ClosedRange<Int>? {
        guard let text = item.string("values") else {
            item.report("is required", key: "values")
            return nil
        }
        // Empty pieces kept: `-1` and `1-` are mistakes, not the value 1.
        let bounds = text.split(separator: "-", omittingEmptySubsequences: false).map { piece in
            let digits = piece.trimmingCharacters(in: .whitespaces)
            return digits.isASCIIDigits ? Int(digits) : nil
        }
        guard (1...2).contains(bounds.count), let low = bounds.first ?? nil, let high = bounds.last ?? nil, low <= high
        else {
            item.report("expected a value or a range such as 1-9, found '\(text)'", key: "values")
            return nil
        }
        guard low >= 0 && high <= 63 else {
            item.report("fine values run from 0 to 63, found '\(text)'", key: "values")
            return nil
        }
        return low...high
    }

    static func readOutcome(_ item: ConfigReader) -> Outcome? {
        var outcome = Outcome(events: item.stringList("events") ?? [], revenueMin: nil, revenueMax: nil, currency: nil)
        if let revenue = item.child("revenue") {
            outcome.revenueMin = decimal(revenue, "min")
            outcome.revenueMax = decimal(revenue, "max")
            if let min = outcome.revenueMin, let max = outcome.revenueMax, min > max {
                revenue.report("min must not be above max", key: "min")
            }
            revenue.finish()
        }
        if let currency = item.string("currency") {
            if currency.count == 3 && currency.allSatisfy({ $0.isASCII && $0.isUppercase }) {
                outcome.currency = currency
            } else {
                item.report("expected an ISO 4217 code such as USD, found '\(currency)'", key: "currency")
            }
        }
        return outcome
    }

    static func decimal(_ reader: ConfigReader, _ key: String) -> Decimal? {
        guard let text = reader.string(key) else { return nil }
        // Digits with an optional fraction only: `Decimal(string:)` reads a prefix, so
        // `1,5` was 1 and `.nan` 0, both without a word.
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), parts.allSatisfy(\.isASCIIDigits), let value = Decimal(string: text) else {
            reader.report("expected a non-negative amount such as 4.99, found '\(text)'", key: key)
            return nil
        }
        return value
    }
}
