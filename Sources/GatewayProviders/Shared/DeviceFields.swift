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
    /// stored `idfv=zzz`, which `/v1/events` refused, and reports joined devices on it.
    init(_ fields: PayloadFields) throws {
        idfv = try fields.string("idfv").flatMap { $0 == AttributionRecord.unsetDeviceID ? nil : $0 }
        attStatus = try fields.int("att_status", in: 0...3)
        let idfa = try fields.string("idfa")
        if attStatus == Self.authorized, let idfa, idfa != AttributionRecord.unsetDeviceID {
            self.idfa = idfa
        }
        // An IDFA the user did not allow is dropped unread, whatever it holds.
        for (key, id) in [("idfv", idfv), ("idfa", self.idfa)] {
            if let id, UUID(uuidString: id) == nil {
                throw GatewayError.invalid(fields.fieldPath(key), "expected a UUID such as 6D92078A-8246-4BA4-AE5B-76104861E7DC")
            }
        }
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
