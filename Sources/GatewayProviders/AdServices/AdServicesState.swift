import Foundation
import GatewayCore

/// A pending token's state as stored in `pending.state`: JSON with the member names that
/// `JSONEncoder` gave `State`, written and read with the gateway's own JSON writer and
/// parser. JSONEncoder and JSONDecoder on the 1 KB token cost a noticeable share of the
/// AdServices route's CPU; rows stored by either read the same.
extension AdServicesProvider.State {
    var stored: Data {
        var object: [String: JSONValue] = [
            "token": .string(token), "appID": .string(appID), "appUserID": .string(appUserID),
            "notFound": .integer(Int64(notFound)), "errors": .integer(Int64(errors)),
            "malformed": .integer(Int64(malformed)),
        ]
        if let idfv { object["idfv"] = .string(idfv) }
        if let idfa { object["idfa"] = .string(idfa) }
        if let attStatus { object["attStatus"] = .integer(Int64(attStatus)) }
        return Data(AttributionRecord.jsonText(.json(.object(object))).utf8)
    }

    /// Nil when `data` is not a state (only a store written by another program could
    /// hold such a row).
    init?(stored data: Data) {
        guard case .object(let o)? = try? JSONValue.parse(data),
            case .string(let token)? = o["token"], case .string(let appID)? = o["appID"],
            case .string(let appUserID)? = o["appUserID"]
        else { return nil }
        func string(_ key: String) -> String? {
            if case .string(let s)? = o[key] { return s }
            return nil
        }
        func integer(_ key: String) -> Int? {
            if case .integer(let n)? = o[key] { return Int(exactly: n) }
            return nil
        }
        self.init(
            token: token, appID: appID, appUserID: appUserID, idfv: string("idfv"), idfa: string("idfa"),
            attStatus: integer("attStatus"), notFound: integer("notFound") ?? 0, errors: integer("errors") ?? 0,
            malformed: integer("malformed") ?? 0)
    }
}
