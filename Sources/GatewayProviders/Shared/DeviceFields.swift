import Foundation
import GatewayCore

/// The device and consent fields that app- and backend-facing payloads share.
struct DeviceFields {
    var idfv: String?
    var idfa: String?
    var attStatus: Int?

    static let authorized = 3

    /// Reads `idfv`, `idfa` and `att_status` (0–3). The IDFA is kept only when ATT is
    /// authorised and it is not the all-zero IDFA, as Apple's rules require: no sink
    /// ever sees an IDFA the user did not allow.
    ///
    /// The all-zero IDFV, which an app sends when `identifierForVendor` was nil, names
    /// no device: kept, it made one person of every user who sent it (`report keywords`
    /// joins a user's devices), and credited one's purchases to another's keyword.
    ///
    /// Each id kept must be a UUID, as iOS writes them, on every route: a vendor's callback
    /// stored `idfv=zzz`, which `/v1/events` refused, and reports joined devices on it. It
    /// is kept in iOS's own upper case: a device whose id one caller sent in lower case
    /// was two devices, with two delivery lanes to a vendor and so no order between them.
    init(_ fields: PayloadFields) throws {
        idfv = try Self.deviceID("idfv", in: fields)
        attStatus = try fields.int("att_status", in: 0...3)
        // An IDFA the user did not allow is dropped unread, whatever it holds.
        if attStatus == Self.authorized {
            idfa = try Self.deviceID("idfa", in: fields)
        }
    }

    /// The id at `key` as iOS writes it, or nil where it is absent or the all-zero id.
    private static func deviceID(_ key: String, in fields: PayloadFields) throws -> String? {
        guard let text = try fields.string(key) else { return nil }
        guard let uuid = UUID(uuidString: text) else {
            throw GatewayError.invalid(
                fields.fieldPath(key), "expected a UUID such as 6D92078A-8246-4BA4-AE5B-76104861E7DC")
        }
        let canonical = uuid.uuidString
        return canonical == AttributionRecord.unsetDeviceID ? nil : canonical
    }

    /// `object` (a payload kept as `raw`) without the IDFA this did not keep: `raw` must not
    /// hold what the record may not.
    func scrubbed(_ object: [String: JSONValue]) -> [String: JSONValue] {
        guard idfa == nil else { return object }
        var object = object
        object["idfa"] = nil
        return object
    }

    func apply(to record: inout AttributionRecord) {
        record.idfv = idfv
        record.idfa = idfa
        record.attStatus = attStatus
    }
}
