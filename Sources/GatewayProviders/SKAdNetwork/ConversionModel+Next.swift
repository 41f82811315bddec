import Foundation
import GatewayCore

/// The next conversion values an app should set, as the SKAN server-to-server pattern
/// asks them: for `GET /v1/skadnetwork/conversion-value` and for the answers of
/// `POST /v1/events`, so that both answer one app state alike.
extension ConversionModel {
    /// What an app reports of itself when it asks for its next values.
    public struct AppState: Sendable, Equatable {
        public enum Timing: Sendable, Equatable {
            /// SKAN 3 and earlier: one update window, kept open for 24 hours by each update;
            /// `lastCall` is the app's last SKAdNetwork call, when it says.
            case skan3(lastCall: Double?)
            /// SKAN 4 and AdAttributionKit: three windows fixed from the app's first call.
            case windowed(firstCall: Double)
        }

        /// The event's name; `__SESSION__` for a session.
        public var event: String
        /// Revenue by currency.
        public var revenue: [String: Decimal]
        /// The fine value the app has set; 0 before any.
        public var fineValue: Int
        /// The current window's coarse value the app has set (low, medium or high).
        public var coarseValue: String?
        public var timing: Timing

        public init(
            event: String, revenue: [String: Decimal] = [:], fineValue: Int = 0, coarseValue: String? = nil,
            timing: Timing
        ) {
            self.event = event
            self.revenue = revenue
            self.fineValue = fineValue
            self.coarseValue = coarseValue
            self.timing = timing
        }
    }

    /// Values to set; nil ones stay as they are.
    public struct Next: Sendable, Equatable {
        public var fineValue: Int?
        public var coarseValue: String?
        /// The window answered for (postback-sequence-index 0, 1, 2); nil for SKAN 3 and
        /// once every window has closed.
        public var window: Int?
    }

    /// Whether a `skan_version` names SKAN 4 or later, or AdAttributionKit (`aak`), whose
    /// windows and coarse values apply; nil when it names no version. Read as Apple
    /// writes versions (`4.0`, `3`): `Double` would also take `0x4` and `1e9`.
    public static func isWindowed(skanVersion text: String) -> Bool? {
        let version = text.trimmingCharacters(in: .whitespaces)
        if version.lowercased() == "aak" { return true }
        let parts = version.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.allSatisfy(\.isASCIIDigits), let major = Int(parts[0]) else { return nil }
        return major >= 4
    }

    /// The values `state` qualifies for above those it has set; values never go down.
    /// For SKAN 3 nothing changes once the update window (24 h after the last call)
    /// closed. SKAN 4 and AdAttributionKit are answered for the window the first call
    /// places the app in (days 0–2, 3–7, 8–35): a fine and a coarse value in the first,
    /// a coarse value alone in the two later ones; no 24-hour timer.
    public func next(for state: AppState, now: Date) -> Next {
        let firstCall: Double
        switch state.timing {
        case .skan3(let lastCall):
            if let lastCall, now.timeIntervalSince1970 > lastCall + 24 * 3600 { return Next() }
            guard let next = fineValue(event: state.event, revenue: state.revenue), next > state.fineValue else {
                return Next()
            }
            return Next(fineValue: next)
        case .windowed(let first):
            firstCall = first
        }
        let day = 86_400.0
        let window: Int
        switch now.timeIntervalSince1970 - firstCall {
        case ..<(2 * day): window = 0
        case ..<(7 * day): window = 1
        case ..<(35 * day): window = 2
        default: return Next()  // every window has closed
        }
        var next = Next(window: window)
        if window == 0, let fine = fineValue(event: state.event, revenue: state.revenue), fine > state.fineValue {
            next.fineValue = fine
        }
        if let coarse = coarseValue(window: window, event: state.event, revenue: state.revenue),
            Self.level(coarse) > Self.level(state.coarseValue)
        {
            next.coarseValue = coarse
        }
        return next
    }

    /// A coarse value's rank, low 0 to high 2; -1 for none.
    static func level(_ coarse: String?) -> Int {
        coarse.flatMap { coarseLevels.firstIndex(of: $0) } ?? -1
    }
}
