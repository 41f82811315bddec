import Foundation
import GatewayCore

/// Raw sessions, events and purchases from a backend (`POST /v1/events`), stored as
/// records of kind `session`, `event` or `purchase` and forwarded to the vendors that
/// `providers.s2s.vendor` names (each vendor is a destination with its own outbox, see
/// ``S2SProviderPlugin``); and the vendors' own attribution results
/// (`/v1/s2s/{vendor}/callbacks`), normalised into install records.
public struct S2SProvider: AttributionProvider {
    public static let typeName = "s2s"
    public static let eventsPath = "/v1/events"
    /// The most events one request may hold.
    static let maxBatch = 1000

    public struct Options: Sendable {
        /// Vendors events are forwarded to, in config order.
        public var forwarding: [VendorSettings] = []
        /// Vendors whose callbacks are accepted: those with a `callback_secret`.
        public var callbacks: [VendorSettings] = []
        /// Conversion values from vendors' answers (Singular's, with
        /// `return_conversion_value`), by record id: filled by the vendor's sink as it
        /// delivers an event, read by the `POST /v1/events` that stored it.
        public let conversionValues = AnswerWaiters<VendorConversionValue>()

        public init() {}
    }

    public let options: Options
    public var name: String { Self.typeName }

    public init(options: Options = Options()) {
        self.options = options
    }

    public var routes: [ProviderRoute] {
        // Events carry revenue that vendors receive: never from a key an app ships.
        var routes = [ProviderRoute(.post, Self.eventsPath, keyScope: .backend)]
        for vendor in options.callbacks {
            guard let secret = vendor.callbackSecretSHA256 else { continue }
            let path = VendorCallback.path(vendor.vendor)
            // Adjust calls back with GET and the values in the query; the others POST.
            for method in [ProviderRoute.Method.post, .get] {
                routes.append(
                    ProviderRoute(method, path, requiresAPIKey: false, acceptedStatus: 200, sharedSecretSHA256: secret))
            }
        }
        return routes
    }

    public func normalize(_ payload: IngestPayload) throws -> [AttributionRecord] {
        if let vendor = VendorCallback.vendor(forPath: payload.path) {
            return [try VendorCallback.normalize(payload, vendor: vendor)]
        }
        return try PayloadFields.parseObjects(payload.body, maxCount: Self.maxBatch, noun: "event").enumerated().map {
            index, fields in
            let event = try RawEvent(fields)
            try checkBundle(event, fields)
            return Self.record(event, receivedAt: payload.receivedAt, index: index, isLive: !payload.hasFixedArrival)
        }
    }

    /// With `vendors.singular.apps`, an event's bundle must be its app's: the API key
    /// proves the app id, and Singular goes by the bundle.
    func checkBundle(_ event: RawEvent, _ fields: PayloadFields) throws {
        // Refunds are never sent to a vendor.
        guard event.type != .refund else { return }
        for vendor in options.forwarding where !vendor.singularBundles.isEmpty {
            guard let bundle = vendor.singularBundles[event.appID] else {
                throw GatewayError.invalid(
                    fields.fieldPath("app_id"), "no bundle_id is configured for this app under vendors.singular.apps")
            }
            if let posted = event.bundleID, posted != bundle {
                throw GatewayError.invalid(fields.fieldPath("bundle_id"), "is not this app's bundle id")
            }
        }
    }

    static func record(_ event: RawEvent, receivedAt: Date, index: Int = 0, isLive: Bool = true) -> AttributionRecord {
        let kind: RecordKind =
            switch event.type {
            case .session: .session
            case .event: .event
            case .purchase: .purchase
            case .refund: .refund
            }
        let recordID = AttributionRecord.newRecordID()
        var record = AttributionRecord(
            provider: typeName, kind: kind,
            dedupeKey: dedupeKey(event, receivedAt: receivedAt, index: index, arrivalID: isLive ? recordID : nil),
            receivedAt: receivedAt, recordID: recordID)
        record.appID = event.appID
        record.appUserID = event.appUserID
        event.device.apply(to: &record)
        record.eventName = event.name ?? event.type.rawValue
        record.revenue = event.revenue
        record.currency = event.currency
        record.transactionRef = event.transactionID
        record.vendorIDs = event.vendorIDs.isEmpty ? nil : event.vendorIDs
        if event.type == .purchase { record.purchaseDate = event.timestamp }
        record.raw = .object(event.stored)
        return record
    }

    /// A resent event is the same record: a purchase or a refund by its transaction, others
    /// by their `event_id`, anything else by its content. An event with none of these and no
    /// `timestamp` cannot be told from a second one alike, so its arrival joins its
    /// content: it is never deduped. A live arrival's `arrivalID` (its record's id) tells
    /// apart two such requests in one millisecond, which their time alone would make one
    /// record; an import envelope's fixed `received_at` with its place in the line keeps one
    /// key, so that importing the file again stores the event once.
    static func dedupeKey(_ event: RawEvent, receivedAt: Date, index: Int, arrivalID: String? = nil) -> String {
        // A transaction is one purchase, and has one refund, whatever else a resend changes
        // (a backend's retry with a new `event_id`, or none; App Store Server Notifications
        // resend theirs): before `event_id`, which would let a second through to the vendors,
        // who would book its revenue twice.
        if event.type == .refund, let transaction = event.transactionID {
            return DedupeKey.make(typeName, event.appID, "refund", transaction)
        }
        if event.type == .purchase, let transaction = event.transactionID {
            return DedupeKey.make(typeName, event.appID, "purchase", transaction)
        }
        if let id = event.eventID { return DedupeKey.make(typeName, event.appID, "id", id) }
        // By its content written one way, so that a resend spelling its time or IDFV
        // otherwise is the same event. Keys of an earlier rule (`content`), which hashed the
        // text as sent, are rekeyed by the store's upgrade `data:s2s-events-keyed-by-content`.
        return EventContent.dedupeKey(
            appID: event.appID, stored: event.stored, received: event.timestamp == nil ? (receivedAt, index) : nil,
            arrivalID: arrivalID, sha256Hex: SHA256Text.hex)
    }

    /// Whether `dedupeKey` keys the event by its arrival, so that it is never a duplicate:
    /// imported twice, it is stored twice. Asked of the key itself, so that the answer
    /// follows the rule wherever it goes.
    public static func isKeyedByArrival(_ event: RawEvent) -> Bool {
        dedupeKey(event, receivedAt: .distantPast, index: 0) != dedupeKey(event, receivedAt: .distantFuture, index: 0)
    }
}
