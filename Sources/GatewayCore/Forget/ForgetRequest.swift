import Foundation

/// Who a forget request names: a user of an app, by the app's own user id or by a device.
public struct ForgetSubject: Sendable, Equatable {
    public var appID: String
    public var appUserID: String?
    public var idfv: String?
    public var idfa: String?

    public init(appID: String, appUserID: String? = nil, idfv: String? = nil, idfa: String? = nil) {
        self.appID = appID
        self.appUserID = appUserID
        self.idfv = idfv
        self.idfa = idfa
    }

    /// The id the request named, with its kind (`app_user_id:U`): the audit trail keeps its
    /// SHA-256, which proves which user a request was for to someone who knows the id, and
    /// tells nobody else.
    public var namedID: String {
        appUserID.map { "app_user_id:" + $0 } ?? idfv.map { "idfv:" + $0 } ?? idfa.map { "idfa:" + $0 } ?? ""
    }
}

/// Every id of a user that the store found in the user's records: what a sink deletes by.
/// Sink tables keyed by `record_id` delete those rows; destinations that key by user or
/// device delete by the ids.
public struct ForgottenIdentifiers: Sendable, Equatable, Codable {
    public var appUserIDs: [String] = []
    public var idfvs: [String] = []
    public var idfas: [String] = []
    /// Vendors' own device ids the app sent with its events (`vendor_ids`), by name:
    /// `appsflyer_id`, `adid`.
    public var vendorIDs: [String: [String]] = [:]
    public var recordIDs: [String] = []

    public init() {}

    enum CodingKeys: String, CodingKey {
        case appUserIDs = "app_user_ids"
        case idfvs, idfas
        case vendorIDs = "vendor_ids"
        case recordIDs = "record_ids"
    }
}

/// A forget request as a sink receives it.
public struct ForgetRequest: Sendable, Equatable {
    public var requestID: String
    public var appID: String
    public var requestedAt: Date
    public var identifiers: ForgottenIdentifiers
    /// What this sink noted at its last attempt for a deletion its destination works on
    /// (``ForgetOutcome/inProgress(note:checkAfter:)``, a task to poll); nil at the first.
    public var progress: String?

    public init(
        requestID: String, appID: String, requestedAt: Date, identifiers: ForgottenIdentifiers,
        progress: String? = nil
    ) {
        self.requestID = requestID
        self.appID = appID
        self.requestedAt = requestedAt
        self.identifiers = identifiers
        self.progress = progress
    }
}

/// What a sink made of a forget request.
public enum ForgetOutcome: Sendable, Equatable {
    /// The destination holds nothing of the user any more.
    case done
    /// The destination cannot be asked to forget (a plugin without the message, a sink that
    /// keeps nothing): final, and shown as such in the request's status.
    case notSupported(reason: String)
    /// The destination took the deletion and works on it: asked again after `checkAfter`,
    /// with `note` as ``ForgetRequest/progress``, no attempt counted.
    case inProgress(note: String, checkAfter: Duration)
    /// Try again later, as a record's retry (an outage): counted towards the dead letters.
    case retry(reason: String, after: Duration? = nil)
    /// The destination refused it for good: the request goes to the dead letters, and its
    /// status says `failed` with the reason.
    case failed(reason: String)
}
