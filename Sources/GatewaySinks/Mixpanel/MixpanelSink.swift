import AsyncHTTPClient
import Foundation
import GatewayCore
import NIOCore

/// Updates Mixpanel user profiles through `/engage`, asking for the verbose answer
/// because Mixpanel answers `200` even when it rejected the data.
///
/// A rejected batch is re-sent one record at a time, so that a malformed record goes to
/// the dead-letter queue with Mixpanel's error and the others are delivered. `429`,
/// `502`, `503` and other `5xx` are retried with `Retry-After`; other `4xx` reject.
/// Records without a real `app_user_id` are not sent (Mixpanel refuses placeholders).
public final class MixpanelSink: AttributionSink {
    public struct Options: Sendable {
        public var token: String
        public var endpoint: String
        public var propertyPrefix: String
        public var timeout: Duration

        public init(token: String, endpoint: String, propertyPrefix: String = "asa_", timeout: Duration = .seconds(10)) {
            self.token = token
            self.endpoint = endpoint
            self.propertyPrefix = propertyPrefix
            self.timeout = timeout
        }
    }

    /// Mixpanel's limit is 2,000 updates per request and each record makes at most two.
    public let maxBatchSize = 1000
    /// Mixpanel's documented request limit is larger; 2 MB is the safe older figure.
    static let maxRequestBytes = 2_000_000
    let options: Options
    let mapping: MixpanelProfileMapping
    let client: HTTPClient

    public init(options: Options, client: HTTPClient = .shared) {
        self.options = options
        self.mapping = MixpanelProfileMapping(token: options.token, prefix: options.propertyPrefix)
        self.client = client
    }

    enum Answer: Equatable {
        case accepted
        case rejected(String)
        case retry(String, Duration?)
    }

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let updates = records.map(mapping.updates)
        let batch = updates.flatMap { $0 }
        guard !batch.isEmpty else { return Array(repeating: .delivered, count: records.count) }

        let whole = try await send(batch)
        switch whole {
        case .accepted:
            return Array(repeating: .delivered, count: records.count)
        case .retry(let reason, let after):
            return Array(repeating: .retry(reason: reason, after: after), count: records.count)
        case .rejected(let reason) where records.count == 1:
            return [.reject(reason: reason)]
        case .rejected:
            // Find the records Mixpanel refuses; the rest go through.
            var outcomes: [DeliveryOutcome] = []
            for recordUpdates in updates {
                if recordUpdates.isEmpty {
                    outcomes.append(.delivered)
                    continue
                }
                switch try await send(recordUpdates) {
                case .accepted: outcomes.append(.delivered)
                case .rejected(let reason): outcomes.append(.reject(reason: reason))
                case .retry(let reason, let after): outcomes.append(.retry(reason: reason, after: after))
                }
            }
            return outcomes
        }
    }

    func send(_ updates: [JSONValue]) async throws -> Answer {
        let body = try JSONEncoder().encode(updates)
        if body.count > Self.maxRequestBytes && updates.count > 1 {
            let half = updates.count / 2
            let first = try await send(Array(updates[..<half]))
            guard first == .accepted else { return first }
            return try await send(Array(updates[half...]))
        }
        var request = HTTPClientRequest(url: options.endpoint + "/engage?verbose=1&ip=0")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))

        let status: Int
        let text: String
        let retryAfter: Duration?
        do {
            let response = try await client.execute(
                request, timeout: .milliseconds(options.timeout.milliseconds))
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "Retry-After").flatMap { Int($0) }.map { .seconds($0) }
            text = String(buffer: try await response.body.collect(upTo: 1 << 20))
        } catch {
            throw Unavailable(description: "Mixpanel unreachable: \(WebhookSink.describe(error))")
        }

        switch status {
        case 200..<300:
            guard let answer = try? JSONValue.parse(Data(text.utf8)), case .integer(let ok)? = answer["status"] else {
                return .retry("Mixpanel answered \(status) without a verbose status", nil)
            }
            if ok == 1 { return .accepted }
            if case .string(let error)? = answer["error"] { return .rejected("Mixpanel: \(error)") }
            return .rejected("Mixpanel rejected the update")
        case 429, 500...599:
            return .retry("Mixpanel answered \(status)", retryAfter)
        case 401, 403:
            // A wrong token is a configuration problem: keep the records until it is fixed.
            return .retry("Mixpanel answered \(status): check the project token", nil)
        default:
            return .rejected("Mixpanel answered \(status): \(text.prefix(200))")
        }
    }
}

/// Registers the Mixpanel sink as `type: mixpanel`.
public enum MixpanelSinkPlugin: SinkPlugin {
    public typealias Options = MixpanelSink.Options
    public static let typeName = "mixpanel"
    static let regions = ["us": "https://api.mixpanel.com", "eu": "https://api-eu.mixpanel.com", "in": "https://api-in.mixpanel.com"]

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let token = reader.requiredString("token")
        let region = reader.choice("region", regions.keys.sorted()) ?? "us"
        var endpoint = reader.string("endpoint") ?? regions[region]!
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        if URL(string: endpoint)?.scheme.map({ ["http", "https"].contains($0) }) != true {
            reader.report("must be an http or https URL", key: "endpoint")
        }
        let prefix = reader.string("property_prefix") ?? "asa_"
        let timeout = reader.int("timeout_ms", in: 100...600_000) ?? 10_000
        guard let token else { return nil }
        return Options(token: token, endpoint: endpoint, propertyPrefix: prefix, timeout: .milliseconds(timeout))
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        MixpanelSink(options: options)
    }

    public static func summary(_ options: Options) -> String {
        "profiles via \(options.endpoint)/engage, properties prefixed '\(options.propertyPrefix)'"
    }
}
