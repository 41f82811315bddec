import Foundation
import GatewayCore
import Hummingbird

/// The answer to an accepted payload. One whose record waits for an outside answer (an
/// AdServices token) also says whether it is `resolved`, and leaves `attributed` out
/// until it is; absent fields are left out of the JSON.
struct IngestAnswer: Encodable {
    /// The stored record; for a duplicate, the original.
    let record_id: String
    /// `accepted` or `duplicate`.
    let status: String
    let duplicate_of: String?
    let provider: String
    /// `pending` until an outside answer is stored.
    let resolution: String
    let resolved: Bool?
    let attributed: Bool?
    /// `POST /v1/events`, for an event of an app that uses SKAdNetwork: the values for the
    /// app to set (absent when nothing changes), and where they came from, `model` or
    /// `singular` (see ``ConversionValueAnswering``).
    var conversion_value: Int? = nil
    var coarse_value: String? = nil
    var lock_window: Bool? = nil
    var postback_sequence_index: Int? = nil
    var conversion_value_source: String? = nil

    /// A duplicate is answered from `original`, the record stored before: the payload
    /// posted again was thrown away, and an answer from it (an attributed iAd dictionary
    /// after an organic one) told the client what no sink or report holds.
    init(_ outcome: IngestOutcome, original: AttributionRecord?) {
        let record = outcome.isDuplicate ? original ?? outcome.record : outcome.record
        self.init(record: record, recordID: outcome.recordID, duplicateOf: outcome.duplicateOf)
    }

    /// What `/v1/iad` would answer for `record`, had it been stored (the no-op routes).
    init(unstored record: AttributionRecord) {
        self.init(record: record, recordID: record.recordID, duplicateOf: nil)
    }

    private init(record: AttributionRecord, recordID: String, duplicateOf: String?) {
        record_id = recordID
        status = duplicateOf != nil ? "duplicate" : "accepted"
        duplicate_of = duplicateOf
        provider = record.provider
        resolution = record.resolution.rawValue
        resolved = nil
        attributed = record.attributed
    }

    init(_ answer: PendingResolver.Answer, provider: String) {
        record_id = answer.recordID
        status = answer.isDuplicate ? "duplicate" : "accepted"
        duplicate_of = answer.isDuplicate ? answer.recordID : nil
        self.provider = provider
        resolution = answer.record?.resolution.rawValue ?? Resolution.pending.rawValue
        resolved = answer.record != nil
        attributed = answer.record?.attributed
    }
}

extension IngestAnswer {
    /// What ``encode(to:)`` writes, as a value for ``JSONResponse``.
    var json: JSONValue {
        jsonObject([
            ("attributed", attributed.map(JSONValue.bool)), ("coarse_value", coarse_value.map(JSONValue.string)),
            ("conversion_value", conversion_value.map { .integer(Int64($0)) }),
            ("conversion_value_source", conversion_value_source.map(JSONValue.string)),
            ("duplicate_of", duplicate_of.map(JSONValue.string)), ("lock_window", lock_window.map(JSONValue.bool)),
            ("postback_sequence_index", postback_sequence_index.map { .integer(Int64($0)) }),
            ("provider", .string(provider)), ("record_id", .string(record_id)), ("resolution", .string(resolution)),
            ("resolved", resolved.map(JSONValue.bool)), ("status", .string(status)),
        ])
    }

    mutating func add(_ conversion: EventConversionValue) {
        conversion_value = conversion.fineValue
        coarse_value = conversion.coarseValue
        lock_window = conversion.lockWindow
        postback_sequence_index = conversion.window
        conversion_value_source = conversion.source
    }
}

struct BatchAnswer: Encodable {
    let results: [IngestAnswer]

    var json: JSONValue { .object(["results": .array(results.map(\.json))]) }

    /// One payload's answer: an object's record's answer alone; an array's answers (one
    /// per element, even for one element, so that a client's batches of any size read
    /// alike), or several records', in `results`.
    static func response(status: HTTPResponse.Status, _ answers: [IngestAnswer], body: Data) -> Response {
        guard answers.count == 1, !JSONValue.opensArray(body) else {
            return JSONResponse.make(status: status, BatchAnswer(results: answers).json)
        }
        return JSONResponse.make(status: status, answers[0].json)
    }

}

extension GatewayHTTP {
    /// Every enabled provider's routes: body → provider → pipeline. `202` once stored,
    /// `200` when every record was already stored (a duplicate changes nothing).
    static func addIngestRoutes(to router: Router<GatewayRequestContext>, gateway: Gateway) {
        let bodies = BodyReader(gateway.configuration.server)
        let keyring = gateway.keyring
        for mounted in gateway.runningProviders.withLock({ $0 }) {
            for route in mounted.routes {
                let bodies = bodies.forRoute(limit: route.maxBodyBytes)
                let handler = countingRejections(of: mounted.name, metrics: gateway.metrics) { request, context in
                    // The provider as it stands when the request starts: a reload swaps it for
                    // the next request, never under this one. One the reload disabled or that
                    // no longer serves this route answers as these routes were made.
                    let running =
                        gateway.runningProvider(named: mounted.name)
                        .flatMap { $0.routes.contains(route) ? $0 : nil } ?? mounted
                    let provider = running.provider
                    let conversions = (provider as? any ConversionValueAnswering)?
                        .conversionValues(path: route.path, providers: gateway.providers)
                    let allowedApps =
                        route.requiresAPIKey ? try keyring.admit(request.headers, scope: route.keyScope) : nil
                    if let secret = route.sharedSecretSHA256, !SharedSecret.matches(request, sha256: secret) {
                        throw SharedSecret.unauthorized
                    }
                    let body = try await bodies.collect(request)
                    // Decoded as forms are (`+` a space), as vendors' callback URLs are
                    // filled in and as their form bodies are read.
                    var query = FormEncoding.decode(request.uri.query ?? "")
                    query["secret"] = nil
                    let payload = IngestPayload(
                        body: body, receivedAt: Date(), path: route.path, query: query,
                        contentType: request.headers[.contentType])
                    if let resolver = running.resolver {
                        let answer = try await resolver.submit(payload) { work in
                            if let allowedApps, !allowedApps.contains(work.appID ?? "") {
                                throw APIKeyring.forbidden
                            }
                        }
                        let status: HTTPResponse.Status = answer.isDuplicate ? .ok : .accepted
                        return JSONResponse.make(status: status, IngestAnswer(answer, provider: provider.name).json)
                    }
                    var admitted: [AttributionRecord] = []
                    let outcomes: [IngestOutcome]
                    do {
                        outcomes = try await gateway.pipeline.accept(
                            payload, provider: provider,
                            authorize: { appID in
                                if let allowedApps, !allowedApps.contains(appID ?? "") {
                                    throw APIKeyring.forbidden
                                }
                            },
                            beforeStoring: { records in
                                admitted = records
                                await conversions?.expect(records)
                            })
                    } catch {
                        await conversions?.forget(admitted)
                        throw error
                    }
                    let status: HTTPResponse.Status =
                        outcomes.allSatisfy(\.isDuplicate) ? .ok : .init(code: route.acceptedStatus)
                    let originals = await storedOriginals(of: outcomes, in: gateway.store)
                    var answers = outcomes.map { IngestAnswer($0, original: originals[$0.recordID]) }
                    if let conversions {
                        let values = await conversions.values(for: outcomes, now: Date())
                        for (index, value) in values.enumerated() {
                            if let value { answers[index].add(value) }
                        }
                    }
                    return BatchAnswer.response(status: status, answers, body: body)
                }
                switch route.method {
                case .post: router.post(RouterPath(route.path), use: handler)
                case .get: router.get(RouterPath(route.path), use: handler)
                }
            }
        }
        if gateway.configuration.server.noopRoute {
            router.post("/v1/noop") { request, _ -> Response in
                _ = try await bodies.collect(request)
                return JSONResponse.make(status: .accepted, JSONValue.object(["status": .string("noop")]))
            }
            // The iAd route's own work with nothing stored: normalise, route, encode the
            // stored body, answer as /v1/iad does (no API key, no enrichers). Between
            // /v1/noop and /v1/iad it splits what a stored request costs into its request
            // path and its storage. Served while the provider of /v1/iad is enabled.
            if let iad = gateway.providers.first(where: { $0.routes.contains { $0.path == "/v1/iad" } }) {
                router.post("/v1/noop/iad") { request, _ -> Response in
                    let payload = IngestPayload(
                        body: try await bodies.collect(request), receivedAt: Date(), path: "/v1/iad",
                        contentType: request.headers[.contentType])
                    let records = try iad.normalize(payload)
                    let answers = records.map { record in
                        // Kept alive so that an optimiser cannot drop the work measured.
                        withExtendedLifetime((gateway.pipeline.router.sinks(for: record), record.encoded())) {}
                        return IngestAnswer(unstored: record)
                    }
                    return BatchAnswer.response(status: .accepted, answers, body: payload.body)
                }
            }
        }
    }

    /// The stored records that `outcomes`' duplicates repeat, read only when there are any.
    /// One that cannot be read (a body an old release wrote, the store gone since the
    /// insert found it) is left out: the answer is then the resend's, as before, rather
    /// than an error for a payload that is safely stored.
    static func storedOriginals(of outcomes: [IngestOutcome], in store: any RecordStore) async -> [String:
        AttributionRecord]
    {
        var originals: [String: AttributionRecord] = [:]
        for outcome in outcomes where outcome.isDuplicate && originals[outcome.recordID] == nil {
            originals[outcome.recordID] = try? await store.record(id: outcome.recordID)
        }
        return originals
    }
}
