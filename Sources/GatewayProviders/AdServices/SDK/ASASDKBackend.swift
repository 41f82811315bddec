import Foundation
import GatewayCore
import Logging

/// The backend contract of the ASA Attribution SDK (`/functions/v1/…`), so that an app
/// using that SDK works by changing only its base URL. Users get integer ids; their
/// token goes through the same AdServices provider, resolver and store as
/// `POST /v1/adservices`; a StoreKit transaction tied to a user becomes a `purchase`
/// record carrying the user's campaign and keyword.
struct ASASDKBackend: Sendable {
    let appID: String
    let resolver: PendingResolver
    let pipeline: IngestPipeline
    let logger: Logger
    /// One crediting at a time per user: the start sweep, Apple's answer and the user's
    /// next purchase could each read the same purchase `pending` and send it twice.
    let crediting = PerKeySerial<Int64>()

    var store: any AttributionStore { pipeline.store }

    struct AttributionAnswer: Encodable {
        let didUserComeFromAsa: Bool
        let asaAttributionResolved: Bool
    }

    struct CreatedUser: Encodable {
        let userId: Int64
        let didUserComeFromAsa: Bool
        let asaAttributionResolved: Bool
    }

    struct Association: Encodable {
        struct User: Encodable {
            let id: Int64
            let transaction_id: String
        }
        let success: Bool
        let user: User
    }

    func createUser(_ request: RouteRequest) async throws -> RouteAnswer {
        let fields = try await read(request, emptyMeansObject: true)
        let token = try Self.token(fields, required: false)
        let user = try await stored { try await store.createSDKUser(now: Date()) }
        var answer = AttributionAnswer(didUserComeFromAsa: false, asaAttributionResolved: false)
        if let token { answer = try await resolve(user, token: token) }
        return RouteAnswer(
            status: 200,
            CreatedUser(
                userId: user.id, didUserComeFromAsa: answer.didUserComeFromAsa,
                asaAttributionResolved: answer.asaAttributionResolved))
    }

    func resolveAttribution(_ request: RouteRequest) async throws -> RouteAnswer {
        let fields = try await read(request)
        let user = try await user(fields)
        let token = try Self.token(fields, required: true)!
        // The SDK sends a fresh token at every launch until the answer is resolved. While
        // the user's first is still waiting for Apple (an outage, its 404 retries), each
        // became work of its own, and every one a user's install record when Apple came
        // back. The waiting token stands for the user; a new one is taken only once it
        // has been answered (an invalid token) or is gone. Asked before the record: Apple's
        // answer replaces the waiting work in one commit, so a token seen waiting is, and
        // one not seen waiting has its record (read the other way round, an answer landing
        // between the two reads let a second token through).
        if let waiting = user.attributionRecordID, try await stored({ try await store.isPending(recordID: waiting) }) {
            return RouteAnswer(
                status: 200, AttributionAnswer(didUserComeFromAsa: false, asaAttributionResolved: false))
        }
        // A user whose token Apple answered keeps that answer. One it could not attribute
        // (`not_found` after its retries, `invalid`) is not organic: Apple is asked again
        // with this launch's token, as `/v1/adservices` asks for every new token.
        if let known = try await attribution(of: user), known.resolution == .resolved {
            return RouteAnswer(status: 200, Self.answer(for: known))
        }
        return RouteAnswer(status: 200, try await resolve(user, token: token))
    }

    /// A StoreKit transaction id (`Transaction.originalID`, a UInt64) in one spelling:
    /// `" 1000000001"` or `"01000000001"` held apart from `"1000000001"` let a second user
    /// claim the same purchase past the 409, and a blank or invisible one claimed nothing.
    static func transactionID(_ text: String) throws -> String {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.isASCIIDigits, let number = UInt64(trimmed)
        else {
            throw GatewayError.invalid(
                "transaction_id", "expected a StoreKit transaction id: digits, as Transaction.originalID")
        }
        return String(number)
    }

    func associateUser(_ request: RouteRequest) async throws -> RouteAnswer {
        let fields = try await read(request)
        let user = try await user(fields)
        let transactionID = try Self.transactionID(try fields.requiredString("transaction_id"))
        let now = Date()
        let association = try await stored {
            try await store.associateTransaction(userID: user.id, transactionID: transactionID, now: now)
        }
        if case .belongsTo = association {
            throw GatewayError(.conflict, "this transaction belongs to another user", field: "transaction_id")
        }
        // Made again on a repeated call: its dedupe key keeps it to one record, and a
        // crash between the association and the record cannot lose the purchase.
        let attribution = try await attribution(of: user)
        let purchase = ASAPurchaseRecord.make(
            userID: user.id, transactionID: transactionID, appID: appID, attribution: attribution,
            tokenPending: user.attributionRecordID != nil && attribution == nil, receivedAt: now)
        pipeline.metrics.received(provider: purchase.provider)
        _ = try await pipeline.ingest([purchase])
        // Apple may have answered between the read above and the purchase's storing, after
        // the answer's own crediting looked for it; and a crediting that failed then (a
        // busy store, a crash) is done now, at the user's next purchase. The association
        // is stored either way: a crediting that fails here is no reason to answer 503.
        do {
            try await creditPurchases(of: user.id)
        } catch {
            logger.warning(
                "cannot credit an SDK user's purchases", metadata: ["user_id": "\(user.id)", "error": "\(error)"])
        }
        return RouteAnswer(
            status: 200, Association(success: true, user: .init(id: user.id, transaction_id: transactionID)))
    }

    /// Credits the purchases a user made while their token waited for Apple, once it has
    /// answered: until then they were stored `pending` with no campaign, and nothing told
    /// a sink that the paying user came from a keyword. Returns how many were replaced.
    @discardableResult
    func creditPurchases(of userID: Int64) async throws -> Int {
        guard let user = try await store.sdkUser(id: userID), let source = try await attribution(of: user) else {
            return 0
        }
        return try await creditPurchases(of: userID, with: source)
    }

    /// Credits user `userID`'s pending purchases with `source`, their answered record.
    func creditPurchases(of userID: Int64, with source: AttributionRecord) async throws -> Int {
        guard source.resolution != .pending else { return 0 }
        return try await crediting.run(userID) { try await creditPending(of: userID, with: source) }
    }

    /// The dedupe keys of this app's SDK purchases, less the transaction id. Transaction ids
    /// are digits (`transactionID(_:)`), never escaped in a key.
    var purchaseKeyPrefix: String { ASAPurchaseRecord.dedupeKey(appID: appID, transactionID: "") }

    private func creditPending(of userID: Int64, with source: AttributionRecord) async throws -> Int {
        var credited: [RoutedRecord] = []
        for recordID in try await store.sdkPendingPurchaseIDs(userID: userID, keyPrefix: purchaseKeyPrefix) {
            guard var purchase = try await store.record(id: recordID), purchase.resolution == .pending else { continue }
            ASAPurchaseRecord.credit(&purchase, with: source)
            credited.append(RoutedRecord(record: purchase, sinks: pipeline.router.sinksForLateVersion(of: purchase)))
        }
        return try await pipeline.commitNewVersions(credited)
    }

    /// At start: the users whose purchases a stopped gateway had not credited yet (a crash
    /// between Apple's answer and its crediting). Without this, a user who never bought
    /// again kept them `pending`, with no keyword, in every sink.
    func creditPurchasesLeftPending() async {
        do {
            let answered = try await store.sdkAnsweredUsersWithPendingPurchases(keyPrefix: purchaseKeyPrefix)
            guard !answered.isEmpty else { return }
            logger.info("crediting SDK purchases left pending", metadata: ["users": "\(answered.count)"])
            await creditPurchases(answered: answered)
        } catch is CancellationError {
            // The resolver stopped first (a shutdown, or a reload that replaced it): the
            // next one looks again.
        } catch {
            logger.warning("cannot look for SDK purchases left pending", metadata: ["error": "\(error)"])
        }
    }

    /// After a round of Apple's answers: the SDK users whose token it was.
    func creditPurchases(answered recordIDs: [String]) async {
        for recordID in recordIDs {
            do {
                guard let answered = try await store.record(id: recordID),
                    answered.provider == AdServicesProvider.typeName,
                    let userID = answered.appUserID.flatMap({ Int64($0) }),
                    try await store.sdkUser(id: userID)?.attributionRecordID == recordID
                else { continue }
                _ = try await creditPurchases(of: userID, with: answered)
            } catch {
                // The purchase stays pending in the sinks; `report keywords` credits it anyway.
                logger.warning(
                    "cannot credit an SDK user's purchases",
                    metadata: ["record_id": "\(recordID)", "error": "\(error)"])
            }
        }
    }

    // MARK: helpers

    func read(_ request: RouteRequest, emptyMeansObject: Bool = false) async throws -> PayloadFields {
        if let apps = try request.admit(), !apps.contains(appID) {
            throw GatewayError.keyNotForApp
        }
        let body = try await request.body()
        if emptyMeansObject && body.isEmpty { return PayloadFields([:]) }
        return try PayloadFields.parseObject(body)
    }

    func user(_ fields: PayloadFields) async throws -> SDKUser {
        guard let id = try fields.id("user_id") else { throw GatewayError.missing("user_id") }
        guard let user = try await stored({ try await store.sdkUser(id: id) }) else {
            throw GatewayError(
                .notFound, "no user has this id; create it with /functions/v1/create-user", field: "user_id")
        }
        return user
    }

    static func token(_ fields: PayloadFields, required: Bool) throws -> String? {
        // Optional where it may be absent: `null`, empty or blank is absent too (a client
        // encoding a missing token one way or another).
        guard let value = fields.value("asa_attribution_token"), value != .null else {
            if required { throw GatewayError.missing("asa_attribution_token") }
            return nil
        }
        guard case .string(let token) = value else {
            throw GatewayError.invalid("asa_attribution_token", "expected a string, found \(value.typeName)")
        }
        if token.trimmingWhitespace().isEmpty {
            if required { throw GatewayError.missing("asa_attribution_token") }
            return nil
        }
        // Checked before anything is stored, so a bad token leaves no user behind.
        return try AdServicesProvider.checkToken(token, field: "asa_attribution_token")
    }

    /// Sends the user's token through the AdServices provider and remembers its record.
    func resolve(_ user: SDKUser, token: String) async throws -> AttributionAnswer {
        let body: [String: String] = ["token": token, "app_id": appID, "app_user_id": String(user.id)]
        let payload = IngestPayload(body: try JSONEncoder().encode(body), receivedAt: Date(), path: "/functions/v1")
        let answer = try await resolver.submit(payload)
        try await stored { try await store.setSDKUserAttribution(userID: user.id, recordID: answer.recordID) }
        return answer.record.map(Self.answer(for:))
            ?? AttributionAnswer(didUserComeFromAsa: false, asaAttributionResolved: false)
    }

    func attribution(of user: SDKUser) async throws -> AttributionRecord? {
        guard let id = user.attributionRecordID else { return nil }
        return try await stored { try await store.record(id: id) }
    }

    /// Only Apple's answer is final: after `not_found` or `invalid` the SDK sends a fresh
    /// token at its next launch, which is sent to Apple.
    static func answer(for record: AttributionRecord) -> AttributionAnswer {
        AttributionAnswer(
            didUserComeFromAsa: record.attributed, asaAttributionResolved: record.resolution == .resolved)
    }

    func stored<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as GatewayError {
            throw error
        } catch {
            throw GatewayError.storageUnavailable(cause: error)
        }
    }
}
