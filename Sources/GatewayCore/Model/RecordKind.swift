/// What happened, as far as the record can tell.
public enum RecordKind: String, Sendable, Codable, CaseIterable {
    case install, reinstall, postback, session, event, purchase
    /// A purchase given back (App Store refund): its `transaction_ref` names the purchase.
    case refund
    /// Not a signal: a forget request on its way through the sinks' outboxes (see
    /// ``ForgetStore``). Sinks get it through ``AttributionSink/forget(_:)``, never `deliver`.
    case forget

    /// The kinds a signal can have: what a route's `kinds` may name.
    public static let signals = allCases.filter { $0 != .forget }
}

/// How far a provider got in turning the signal into an attribution.
public enum Resolution: String, Sendable, Codable, CaseIterable {
    /// The source answered; `attributed` says whether an ad was behind it.
    case resolved
    /// Stored, waiting for the source (an AdServices token Apple has not resolved yet).
    case pending
    /// The source never found a match within its retry schedule.
    case notFound = "not_found"
    /// The source rejected the signal (a bad token, a forged postback).
    case invalid
}
