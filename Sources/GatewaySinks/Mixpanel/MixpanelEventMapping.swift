import Crypto
import Foundation
import GatewayCore

/// Turns a record into one Mixpanel event for `/import`, with the same properties as the
/// profile and an `$insert_id` derived from `record_id`, so that Mixpanel drops the
/// copies a retry sends.
struct MixpanelEventMapping: Sendable {
    let name: String
    let profile: MixpanelProfileMapping

    /// The properties every event carries besides the record's attribution: a property
    /// renamed to one of them would be overwritten, or overwrite it.
    static let ownProperties: Set<String> = [
        "distinct_id", "time", "ip", "gateway_provider", "gateway_kind", "gateway_resolution", "gateway_record_id",
        "revenue", "currency",
    ]

    /// The event, or nil when the record has no real user.
    func event(for record: AttributionRecord) -> JSONValue? {
        guard let distinctID = MixpanelProfileMapping.distinctID(record) else { return nil }
        let (once, set) = profile.properties(for: record)
        var properties = once.merging(set) { $1 }
        properties["distinct_id"] = .string(distinctID)
        properties["$insert_id"] = .string(Self.insertID(record.recordID))
        // Milliseconds: Mixpanel accepts both, and a record's instant keeps its precision.
        properties["time"] = .integer(Int64((Self.time(of: record).timeIntervalSince1970 * 1000).rounded()))
        properties["ip"] = .string("0")
        properties["gateway_provider"] = .string(record.provider)
        properties["gateway_kind"] = .string(record.kind.rawValue)
        // Tells an event whose attribution is not known yet (no asa_* properties) from an organic one.
        properties["gateway_resolution"] = .string(record.resolution.rawValue)
        properties["gateway_record_id"] = .string(record.recordID)
        // A refund takes its amount back, so that Mixpanel's sum of `revenue` is what was kept.
        if let revenue = record.revenue {
            properties["revenue"] = .double((record.kind == .refund ? -revenue : revenue).doubleThroughText)
        }
        if let currency = record.currency { properties["currency"] = .string(currency) }
        return .object(["event": .string(name), "properties": .object(properties)])
    }

    /// Mixpanel refuses events dated before 1971.
    static let earliestTime = Date(timeIntervalSince1970: 365 * 86_400)

    /// When the event happened: a purchase's `purchaseDate`, an install's or reinstall's
    /// `conversionDate`, else when the gateway received the record, so that a purchase
    /// posted a day late lands on its own day. It depends on the stored record alone:
    /// a retry sends the same `time`, which Mixpanel dedupes on with `$insert_id`.
    ///
    /// A date later than the record's arrival (a sender's clock running ahead, which
    /// Mixpanel would replace by its own now, differently on each retry) or before 1971
    /// (which Mixpanel refuses) is not believed: the arrival stands instead.
    static func time(of record: AttributionRecord) -> Date {
        let happened: Date? =
            switch record.kind {
            case .purchase: record.purchaseDate
            case .install, .reinstall: record.conversionDate
            case .postback, .session, .event, .refund, .forget: nil
            }
        guard let happened, happened >= earliestTime, happened <= record.receivedAt else { return record.receivedAt }
        return happened
    }

    /// Mixpanel allows at most 36 bytes of letters, digits and `-`; a record id (a
    /// lowercase UUID) already is one, anything else is hashed into one.
    static func insertID(_ recordID: String) -> String {
        let allowed = recordID.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45
        }
        if allowed && !recordID.isEmpty && recordID.utf8.count <= 36 { return recordID }
        return Hex.lowercase(SHA256.hash(data: Data(recordID.utf8)).prefix(16))
    }
}
