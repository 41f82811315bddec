import AsyncHTTPClient
import Crypto
import Foundation
import GatewayCore
import GatewayHTTP
import NIOCore
import NIOHTTP1

/// POSTs batches of records as JSON (`{"records": [...]}`) to a URL, signed with
/// ``WebhookSignature`` and carrying an `Idempotency-Key` that stays the same when the
/// same batch is retried, so a receiver can drop repeats.
///
/// Answers are classified, never retried here: `2xx` delivered; `408`, `425`, `429` and
/// `5xx` retry (honouring `Retry-After`); any other `4xx` rejects the batch to the
/// dead-letter queue; connection errors and timeouts retry.
///
/// Redirects are not followed (``NoRedirectHTTPClient``): following one would send the
/// signed body, its signature and the configured headers to whatever host the answer
/// names. A `3xx` is retried like an outage, since the receiver has not taken the batch
/// and the records must wait until `url` names the receiver's real address.
public final class WebhookSink: AttributionSink {
    public struct Options: Sendable {
        public var url: String
        public var secret: String
        /// The secret being replaced, while receivers move to `secret`: each batch is
        /// signed with both (two `v1=`), so that a receiver on either accepts it.
        public var previousSecret: String?
        public var headers: [(String, String)]
        public var timeout: Duration
        public var maxBatchSize: Int
        public var circuitThreshold: Int
        public var circuitCoolDown: Duration

        public init(
            url: String, secret: String, headers: [(String, String)] = [], timeout: Duration = .seconds(10),
            maxBatchSize: Int = 100, circuitThreshold: Int = 5, circuitCoolDown: Duration = .seconds(30)
        ) {
            self.url = url
            self.secret = secret
            self.headers = headers
            self.timeout = timeout
            self.maxBatchSize = maxBatchSize
            self.circuitThreshold = circuitThreshold
            self.circuitCoolDown = circuitCoolDown
        }
    }

    public let maxBatchSize: Int
    let options: Options
    let client: HTTPClient
    let breaker: CircuitBreaker
    let now: @Sendable () -> Date

    public init(
        options: Options, client: HTTPClient = NoRedirectHTTPClient.shared,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.options = options
        self.maxBatchSize = options.maxBatchSize
        self.client = client
        self.breaker = CircuitBreaker(
            threshold: options.circuitThreshold, coolDown: options.circuitCoolDown / .seconds(1))
        self.now = now
    }

    struct Batch: Encodable {
        let records: [AttributionRecord]
    }

    /// Thrown for answers worth retrying; its text never contains the secret.
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        if let until = breaker.blockedUntil(now: now()) {
            let wait = max(until.timeIntervalSince(now()), 0.001)
            let outcome = DeliveryOutcome.postponed(
                reason: "circuit open after repeated failures", after: .milliseconds(Int64(wait * 1000)))
            return Array(repeating: outcome, count: records.count)
        }

        let body = try AttributionRecord.makeEncoder().encode(Batch(records: records))
        let (status, retryAfter, location) = try await post(body, idempotencyKey: Self.idempotencyKey(records))
        switch status {
        case 200..<300:
            breaker.recordSuccess()
            return Array(repeating: .delivered, count: records.count)
        case 413 where records.count > 1:
            // The receiver's body limit (nginx's default is 1 MB): the whole batch refused
            // went to the dead letters at once, and `dlq retry` rebuilt the same batch.
            // Halves go through where the whole did not; a record too large alone is
            // refused alone.
            let half = records.count / 2
            return await deliverPart(Array(records[..<half])) + deliverPart(Array(records[half...]))
        case 408, 425, 429, 500...599:
            breaker.recordFailure(now: now())
            // `.zero` without `Retry-After`: the receiver as a whole said no (see DeliveryOutcome).
            return Array(
                repeating: .retry(reason: "webhook answered \(status)", after: retryAfter ?? .zero),
                count: records.count)
        case _ where RedirectAnswer.contains(status):
            breaker.recordFailure(now: now())
            let reason = "webhook answered \(RedirectAnswer.describe(status: status, location: location))"
            return Array(repeating: .retry(reason: reason, after: retryAfter ?? .zero), count: records.count)
        default:
            breaker.recordSuccess()
            return Array(repeating: .reject(reason: "webhook answered \(status)"), count: records.count)
        }
    }

    /// Sends a signed body; the answer's status, `Retry-After` and `Location`. Throws
    /// ``Unavailable`` when the receiver cannot be reached.
    private func post(_ body: Data, idempotencyKey: String) async throws -> (Int, Duration?, String?) {
        var request = HTTPClientRequest(url: options.url)
        request.method = .POST
        for (name, value) in options.headers { request.headers.add(name: name, value: value) }
        request.headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        request.headers.replaceOrAdd(name: "Idempotency-Key", value: idempotencyKey)
        request.headers.replaceOrAdd(
            name: WebhookSignature.header,
            value: WebhookSignature.sign(
                body: body, secrets: [options.secret] + (options.previousSecret.map { [$0] } ?? []),
                timestamp: Int(now().timeIntervalSince1970)))
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            // The answer is its status; its body is read (bounded) only so that the
            // connection can be reused, and one cut short changes nothing.
            let response = try await client.exchange(request, timeout: options.timeout, bodyLimit: 64 * 1024).response
            return (
                Int(response.status.code),
                response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: now()) },
                response.headers.first(name: "Location")
            )
        } catch {
            breaker.recordFailure(now: now())
            throw Unavailable(description: "webhook unreachable: \(OutboundFailure.describe(error))")
        }
    }

    /// Posts a signed `user.forgotten` event, with every id the gateway held of the user,
    /// for the receiver to delete what it keeps; answers are read as for a batch.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let ids = request.identifiers
        let event: JSONValue = .object([
            "type": .string("user.forgotten"), "request_id": .string(request.requestID),
            "app_id": .string(request.appID),
            "app_user_id": ids.appUserIDs.first.map(JSONValue.string) ?? .null,
            "app_user_ids": .array(ids.appUserIDs.map(JSONValue.string)),
            "idfvs": .array(ids.idfvs.map(JSONValue.string)), "idfas": .array(ids.idfas.map(JSONValue.string)),
            "record_ids": .array(ids.recordIDs.map(JSONValue.string)),
            "requested_at": .string(ISO8601.format(request.requestedAt)),
        ])
        let (status, retryAfter, location) = try await post(
            Data(event.compactUTF8), idempotencyKey: "forget-" + request.requestID)
        switch status {
        case 200..<300:
            breaker.recordSuccess()
            return .done
        case 408, 425, 429, 500...599:
            breaker.recordFailure(now: now())
            return .retry(reason: "webhook answered \(status)", after: retryAfter)
        case _ where RedirectAnswer.contains(status):
            breaker.recordFailure(now: now())
            return .retry(
                reason: "webhook answered \(RedirectAnswer.describe(status: status, location: location))",
                after: retryAfter)
        default:
            breaker.recordSuccess()
            return .failed(reason: "webhook answered \(status)")
        }
    }

    /// A part of a batch split on `413`: one that cannot be sent is retried, while the
    /// part before it keeps its outcome.
    private func deliverPart(_ records: [AttributionRecord]) async -> [DeliveryOutcome] {
        do {
            return try await deliver(records)
        } catch {
            let reason = (error as? Unavailable)?.description ?? "webhook batch could not be sent"
            return Array(repeating: .retry(reason: reason), count: records.count)
        }
    }

    /// Stable for the same records in the same order: a retried batch keeps its key.
    /// The batch's records, each by its id and its content, in any order: a retry reads its
    /// rows back in another order (the outbox's, once they share a due time) than the first
    /// send made them, and a late version of a record (its keyword names come) is another
    /// batch, which a receiver honouring the key must not drop as a repeat.
    static func idempotencyKey(_ records: [AttributionRecord]) -> String {
        let versions = records.map { record in
            record.recordID + ":" + Hex.lowercase(SHA256.hash(data: record.jsonData()).prefix(8))
        }
        let digest = SHA256.hash(data: Data(versions.sorted().joined(separator: ",").utf8))
        return Hex.lowercase(digest.prefix(16))
    }
}

/// Registers the webhook sink as `type: webhook`.
public enum WebhookSinkPlugin: SinkPlugin {
    public typealias Options = WebhookSink.Options
    public static let typeName = "webhook"

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let url = reader.requiredString("url")
        if let url, URL(string: url)?.scheme.map({ ["http", "https"].contains($0) }) != true {
            reader.report("must be an http or https URL", key: "url")
        } else if let url, let parsed = URL(string: url), parsed.user != nil || parsed.password != nil {
            // Never sent (the HTTP client takes no credentials from a URL), so a receiver
            // that needs them refused every batch into the dead letters.
            reader.report(
                "must not hold credentials (user:password@); send them as a header: headers: { Authorization: \"Basic …\" }",
                key: "url")
        }
        let secret = reader.requiredString("secret")
        if let secret, secret.count < 16 {
            reader.report("must be at least 16 characters", key: "secret")
        }
        let previousSecret = reader.string("previous_secret")
        if let previousSecret, previousSecret.count < 16 {
            reader.report("must be at least 16 characters", key: "previous_secret")
        }
        var headers: [(String, String)] = []
        if let mapping = reader.child("headers") {
            for name in mapping.keys {
                guard let value = mapping.string(name) else { continue }
                // Checked here, not at the first delivery, where every batch failed with
                // "Invalid header field names" for good. The value is never echoed: it is
                // often a credential.
                if !HTTPHeaderText.isName(name) {
                    mapping.report(
                        "`\(name)` is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)", key: name)
                } else if !HTTPHeaderText.isValue(value) {
                    mapping.report("holds a line break or another control character", key: name)
                } else {
                    headers.append((name, value))
                }
            }
            mapping.finish()
        }
        let timeout = reader.int("timeout_ms", in: 100...600_000) ?? 10_000
        let batch = reader.int("max_batch_size", in: 1...10_000) ?? 100
        let threshold = reader.int("circuit_failure_threshold", in: 1...1000) ?? 5
        let coolDown = reader.int("circuit_cool_down_ms", in: 1...3_600_000) ?? 30_000
        guard let url, let secret, secret.count >= 16 else { return nil }
        var options = Options(
            url: url, secret: secret, headers: headers, timeout: .milliseconds(timeout), maxBatchSize: batch,
            circuitThreshold: threshold, circuitCoolDown: .milliseconds(coolDown))
        options.previousSecret = previousSecret
        return options
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        WebhookSink(options: options)
    }

    public static func summary(_ options: Options) -> String {
        "POST \(ShownURL.of(options.url)), signed"
    }

    public static func maxBatchSize(_ options: Options) -> Int? { options.maxBatchSize }
}
