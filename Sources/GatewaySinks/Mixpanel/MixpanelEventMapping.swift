import Crypto
import Foundation
import GatewayCore

/// Turns a record into one Mixpanel event for `/import`, with the same properties as the
/// profile and an `$insert_id` derived from `record_id`, so that Mixpanel drops the
/// copies a retry sends.
struct MixpanelEventMapping: Sendable {
    let name: String
    let profile: MixpanelProfileMapping

    /// The event, or nil when the record has no real user.
    func event(for record: AttributionRecord) -> JSONValue? {
        guard let distinctID = MixpanelProfileMapping.distinctID(record) else { return nil }
        let (once, set) = profile.properties(for: record)
        var properties = once.merging(set) { $1 }
        properties["distinct_id"] = .string(distinctID)
        properties["$insert_id"] = .string(Self.insertID(record.recordID))
        // Milliseconds: Mixpanel accepts both, and a record's instant keeps its precision.
        properties["time"] = .integer(Int64((record.receivedAt.timeIntervalSince1970 * 1000).rounded()))
        properties["ip"] = .string("0")
        properties["gateway_provider"] = .string(record.provider)
        properties["gateway_kind"] = .string(record.kind.rawValue)
        // Tells an event whose attribution is not known yet (no asa_* properties) from an organic one.
        properties["gateway_resolution"] = .string(record.resolution.rawValue)
        properties["gateway_record_id"] = .string(record.recordID)
        if let revenue = record.revenue { properties["revenue"] = .double(revenue.doubleThroughText) }
        if let currency = record.currency { properties["currency"] = .string(currency) }
        return .object(["event": .string(name), "properties": .object(properties)])
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
