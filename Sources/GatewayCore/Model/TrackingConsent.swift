/// App Tracking Transparency consent, as a vendor that requires it (`require_consent`) reads it.
public enum TrackingConsent {
    /// Whether a device's data may go to such a vendor: with ATT status 3 (authorised), or
    /// with no status at all from iOS before 14.5, where ATT did not exist and no app could ask.
    public static func given(attStatus: Int?, osVersion: String?) -> Bool {
        if let attStatus { return attStatus == 3 }
        return osVersion.flatMap(predatesATT) ?? false
    }

    /// Whether `version` (`14.4.1`, `13`) is an iOS before 14.5; nil when it names no version.
    public static func predatesATT(_ version: String) -> Bool? {
        let parts = version.trimmingWhitespace().split(separator: ".", omittingEmptySubsequences: false)
        guard let first = parts.first, first.isASCIIDigits, let major = Int(first) else { return nil }
        var minor = 0
        if parts.count > 1 {
            guard parts[1].isASCIIDigits, let number = Int(parts[1]) else { return nil }
            minor = number
        }
        return major < 14 || (major == 14 && minor < 5)
    }
}

extension AttributionRecord {
    /// ``TrackingConsent/given(attStatus:osVersion:)`` for this record, with the OS version
    /// of the event in `raw` (a `/v1/events` event's `os_version`).
    public var hasTrackingConsent: Bool {
        var osVersion: String?
        if case .string(let text)? = raw?["os_version"] { osVersion = text }
        return TrackingConsent.given(attStatus: attStatus, osVersion: osVersion)
    }
}
