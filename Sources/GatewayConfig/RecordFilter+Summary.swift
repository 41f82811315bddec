import GatewayCore

extension RecordFilter {
    /// The conditions in words, as `check-config` lists routes and a reload names them.
    public var summary: String {
        var parts: [String] = []
        if let providers { parts.append("provider in [\(providers.joined(separator: ", "))]") }
        if let appIDs { parts.append("app_id in [\(appIDs.joined(separator: ", "))]") }
        if let attributed { parts.append("attributed = \(attributed)") }
        if let kinds { parts.append("kind in [\(kinds.map(\.rawValue).joined(separator: ", "))]") }
        if let attStatuses { parts.append("att_status in [\(attStatuses.map(String.init).joined(separator: ", "))]") }
        if trackingConsent == true { parts.append("tracking consent (att_status 3, or none before iOS 14.5)") }
        if isTest == true { parts.append("test payloads only") }
        if quarantined == true { parts.append("quarantined postbacks only") }
        return parts.isEmpty
            ? "all records but test payloads and quarantined postbacks" : parts.joined(separator: " and ")
    }
}
