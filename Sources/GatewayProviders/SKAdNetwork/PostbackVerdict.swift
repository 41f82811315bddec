import Foundation

/// Whether Apple signed a postback, and what the signature covers.
public struct PostbackVerdict: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        /// Apple's signature verifies over the version's fields.
        case verified
        /// The signature does not verify, or a signed field is missing or malformed.
        case invalid
        /// The version or the key is unknown: nothing can be said either way.
        case unverifiable
    }

    public var outcome: Outcome
    /// `1.0` … `4.0`, or `aak` for AdAttributionKit.
    public var version: String
    /// Why, when not verified.
    public var reason: String?
    /// The fields the signature covers (never the conversion values).
    public var signedFields: [String]

    public init(_ outcome: Outcome, version: String, reason: String? = nil, signedFields: [String] = []) {
        self.outcome = outcome
        self.version = version
        self.reason = reason
        self.signedFields = signedFields
    }

    /// One line: the verdict first, then the version, then why.
    public var line: String {
        [outcome.rawValue, version, reason].compactMap { $0 }.joined(separator: " ")
    }
}
