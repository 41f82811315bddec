import Foundation

/// The state of the ASA Attribution SDK's backend contract (`/functions/v1/*`): its users,
/// named by integers, and the StoreKit transactions each one claimed.
public protocol SDKUserStore: Sendable {
    /// A new user under an id no one can guess.
    func createSDKUser(now: Date) async throws -> SDKUser

    /// The ids of a user's purchase records still `pending`: the records whose dedupe
    /// key is `keyPrefix` and one of the user's transaction ids.
    func sdkPendingPurchaseIDs(userID: Int64, keyPrefix: String) async throws -> [String]

    /// The answered records of the users who still have a purchase `pending` (dedupe key
    /// `keyPrefix` and one of their transaction ids): purchases whose crediting a crash or
    /// a busy store cut short.
    func sdkAnsweredUsersWithPendingPurchases(keyPrefix: String) async throws -> [String]

    func sdkUser(id: Int64) async throws -> SDKUser?

    /// Links a user to the record of their AdServices token.
    func setSDKUserAttribution(userID: Int64, recordID: String) async throws

    /// Ties a StoreKit original transaction id to a user, once.
    func associateTransaction(userID: Int64, transactionID: String, now: Date) async throws -> TransactionAssociation
}

/// A user of the ASA Attribution SDK's backend: the SDK knows them by an integer id.
public struct SDKUser: Sendable, Equatable {
    public var id: Int64
    /// The AdServices record of their token (pending until Apple answers).
    public var attributionRecordID: String?
    public var createdAt: Date

    public init(id: Int64, attributionRecordID: String?, createdAt: Date) {
        self.id = id
        self.attributionRecordID = attributionRecordID
        self.createdAt = createdAt
    }
}

/// What associating a transaction with a user did.
public enum TransactionAssociation: Sendable, Equatable {
    case associated
    /// The same user had it already: associating again changes nothing.
    case alreadyAssociated
    /// Another user has it.
    case belongsTo(userID: Int64)
}
