import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP
import NIOCore

/// Updates Mixpanel user profiles through `/engage`, asking for the verbose answer
/// because Mixpanel answers `200` even when it rejected the data; with `event_name`, also
/// sends one event per record through `/import` (see ``MixpanelImport``). In `file` mode
/// the same JSON goes to newline-delimited files instead.
///
/// A rejected batch is re-sent one record at a time, so that a malformed record goes to
/// the dead-letter queue with Mixpanel's error and the others are delivered. `429`,
/// `502`, `503` and other `5xx` are retried with `Retry-After`; other `4xx` reject.
/// Redirects are not followed (``NoRedirectHTTPClient``: the updates carry the project
/// token, `/import` its Basic credentials); a `3xx` is retried, like a wrong token,
/// until `endpoint` is corrected.
/// Records without a real `app_user_id` are not sent (Mixpanel refuses placeholders).
public final class MixpanelSink: AttributionSink {
    public enum Mode: Sendable, Equatable {
        case api
        /// Newline-delimited JSON files in this folder.
        case file(directory: String)
    }

    public struct Options: Sendable {
        public var token: String
        public var endpoint: String
        public var propertyPrefix: String
        public var timeout: Duration
        /// When set, each record is also an event of this name.
        public var eventName: String?
        public var mode: Mode
        /// Property names that replace `prefix + name`, by unprefixed name.
        public var propertyNames: [String: String] = [:]
        /// The GDPR API's OAuth token (`gdpr_token`): with it, a forget request also deletes
        /// the user's events, through Mixpanel's data-deletion API.
        public var gdprToken: String?
        /// That API's host (`gdpr_endpoint`): the region's `mixpanel.com` host by default.
        public var gdprEndpoint = "https://mixpanel.com"
        /// How long after asking, or after the last look, a deletion's status is read again.
        public var gdprCheckEvery: Duration = .seconds(3600)

        public init(
            token: String, endpoint: String, propertyPrefix: String = "asa_", timeout: Duration = .seconds(10),
            eventName: String? = nil, mode: Mode = .api
        ) {
            self.token = token
            self.endpoint = endpoint
            self.propertyPrefix = propertyPrefix
            self.timeout = timeout
            self.eventName = eventName
            self.mode = mode
        }
    }

    /// Mixpanel's limit is 2,000 updates per request and each record makes at most two.
    public let maxBatchSize = batchLimit
    static let batchLimit = 1000
    /// Mixpanel's documented request limit is larger; 2 MB is the safe older figure.
    static let maxRequestBytes = 2_000_000
    let options: Options
    let mapping: MixpanelProfileMapping
    let events: MixpanelEventMapping?
    let importer: MixpanelImport
    let client: HTTPClient
    let now: @Sendable () -> Date

    public init(
        options: Options, client: HTTPClient = NoRedirectHTTPClient.shared,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.options = options
        let mapping = MixpanelProfileMapping(
            token: options.token, prefix: options.propertyPrefix, names: options.propertyNames)
        self.mapping = mapping
        self.events = options.eventName.map { MixpanelEventMapping(name: $0, profile: mapping) }
        self.importer = MixpanelImport(
            endpoint: options.endpoint, token: options.token, timeout: options.timeout, client: client)
        self.client = client
        self.now = now
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
        // Mixpanel keeps nothing of a record without a real user: `declined`, so that the
        // sink's `delivered` counts what Mixpanel holds.
        let sent = try await deliverAll(records)
        return zip(records, sent).map { record, outcome in
            guard outcome == .delivered, MixpanelProfileMapping.distinctID(record) == nil else { return outcome }
            return .declined(reason: "no real user id: nothing is sent to Mixpanel")
        }
    }

    /// Deletes the profile of each of the user's ids (`$delete` on `/engage`, the project
    /// token's own right); Mixpanel only ever got profiles keyed by the app's user id.
    /// Events already imported stay: removing them takes Mixpanel's GDPR API.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        // A deletion of events asked for at an earlier attempt: only its status is read.
        if let task = request.progress.flatMap(MixpanelDataDeletion.task(inNote:)) {
            return try await dataDeletion.status(of: task)
        }
        let profiles = try await forgetProfiles(request)
        guard profiles == .done, case .api = options.mode, gdprToken != nil else { return profiles }
        return try await dataDeletion.ask(distinctIDs: distinctIDs(request))
    }

    /// The user ids Mixpanel may know the user by, placeholders left out.
    func distinctIDs(_ request: ForgetRequest) -> [String] {
        request.identifiers.appUserIDs.filter(UserIDs.isReal).map { $0.trimmingCharacters(in: .whitespaces) }
    }

    var gdprToken: String? { options.gdprToken }

    var dataDeletion: MixpanelDataDeletion {
        MixpanelDataDeletion(options: options, client: client)
    }

    /// `$delete` for each of the user's profiles.
    func forgetProfiles(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let deletions: [JSONValue] = distinctIDs(request).map { id in
            .object([
                "$token": .string(options.token), "$distinct_id": .string(id), "$delete": .null,
                "$ignore_alias": .bool(false),
            ])
        }
        guard !deletions.isEmpty else { return .done }
        if case .file(let directory) = options.mode {
            try MixpanelFileWriter(directory: directory).append("engage", deletions, now: now())
            return .done
        }
        switch try await send(deletions) {
        case .accepted: return .done
        case .retry(let reason, let after): return .retry(reason: reason, after: after)
        case .rejected(let reason): return .failed(reason: reason)
        }
    }

    /// Profiles and events of `records`, to Mixpanel or its files; a record without a
    /// real user, with nothing to send, comes back `delivered`.
    func deliverAll(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let indexedEvents =
            events.map { events in
                records.enumerated().compactMap { index, record in events.event(for: record).map { (index, $0) } }
            } ?? []
        if case .file(let directory) = options.mode {
            let writer = MixpanelFileWriter(directory: directory)
            try writer.append("engage", records.flatMap(mapping.updates), now: now())
            try writer.append("events", indexedEvents.map(\.1), now: now())
            return Array(repeating: .delivered, count: records.count)
        }
        let profiles = try await deliverProfiles(records)
        guard events != nil else { return profiles }
        var eventOutcomes = Array(repeating: DeliveryOutcome.delivered, count: records.count)
        try await importer.send(indexedEvents.map { (index: $0.0, event: $0.1) }, into: &eventOutcomes)
        return zip(profiles, eventOutcomes).map(Self.combine)
    }

    /// A record is delivered when its profile update and its event both are; resending
    /// either is harmless (`$set`, `$set_once`, `$insert_id`). One part refused while the
    /// other waits for a retry is retried, so that the waiting part still goes once
    /// Mixpanel is back (dead-lettered at once, it waited for an operator's `dlq retry`);
    /// the refused part is refused again then, and the record dead-lettered with its reason.
    static func combine(_ profile: DeliveryOutcome, _ event: DeliveryOutcome) -> DeliveryOutcome {
        switch (profile, event) {
        case (.reject(let a), .reject(let b)): .reject(reason: a == b ? a : "\(a); \(b)")
        case (.retry(let waiting, let after), .reject(let refused)),
            (.reject(let refused), .retry(let waiting, let after)):
            .retry(reason: "\(waiting); \(refused)", after: after)
        case (.reject, _): profile
        case (_, .reject): event
        // Both wait: the longer wait either endpoint asked for holds for the record.
        case (.retry(let a, let afterA), .retry(let b, let afterB)):
            .retry(reason: a == b ? a : "\(a); \(b)", after: longer(afterA, afterB))
        case (.retry, _): profile
        case (_, .retry): event
        default: .delivered
        }
    }

    /// The longer of two waits, a destination's (`.zero` or more) over a record's own (nil).
    static func longer(_ a: Duration?, _ b: Duration?) -> Duration? {
        switch (a, b) {
        case (let a?, let b?): max(a, b)
        case (let a?, nil): a
        case (nil, let b): b
        }
    }

    func deliverProfiles(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        let updates = records.map(mapping.updates)
        let batch = updates.flatMap { $0 }
        guard !batch.isEmpty else { return Array(repeating: .delivered, count: records.count) }

        return try await outcomes(of: updates[...], batch: batch)
    }

    /// The outcome of each record's updates, sent as `batch`. Mixpanel refuses a batch
    /// whole for one bad update without saying which: the refused batch is split in
    /// halves until the refused records stand alone. Sent again one record at a time, a
    /// batch with one bad record would cost a request per record, and a backlog would drain
    /// many times slower; halves cost about two per level.
    func outcomes(of updates: ArraySlice<[JSONValue]>, batch: [JSONValue]) async throws -> [DeliveryOutcome] {
        guard !batch.isEmpty else { return Array(repeating: .delivered, count: updates.count) }
        switch try await send(batch) {
        case .accepted:
            return Array(repeating: .delivered, count: updates.count)
        case .retry(let reason, let after):
            return Array(repeating: .retry(reason: reason, after: after), count: updates.count)
        case .rejected(let reason) where updates.count == 1:
            return [.reject(reason: reason)]
        case .rejected where updates.count <= 4:
            // Halves of a few records cost more requests than the records themselves.
            var outcomes: [DeliveryOutcome] = []
            for record in updates { outcomes += try await self.outcomes(of: [record][...], batch: record) }
            return outcomes
        case .rejected:
            let half = updates.startIndex + updates.count / 2
            let first = updates[..<half], second = updates[half...]
            return try await outcomes(of: first, batch: first.flatMap { $0 })
                + outcomes(of: second, batch: second.flatMap { $0 })
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
        let location: String?
        do {
            let exchange = try await client.exchange(request, timeout: options.timeout, bodyLimit: 1 << 20)
            let response = exchange.response
            status = Int(response.status.code)
            retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
            location = response.headers.first(name: "Location")
            // Mixpanel's verdict is in the body (verbose): without it, a retry.
            text = String(buffer: try exchange.body.get())
        } catch {
            throw Unavailable(description: "Mixpanel unreachable: \(OutboundFailure.describe(error))")
        }

        switch status {
        case 200..<300:
            guard let answer = try? JSONValue.parse(Data(text.utf8)), case .integer(let ok)? = answer["status"] else {
                return .retry("Mixpanel answered \(status) without a verbose status", nil)
            }
            if ok == 1 { return .accepted }
            if answer["error"] != nil {
                return .rejected("Mixpanel: \(MixpanelRefusal.reason(text, token: options.token))")
            }
            return .rejected("Mixpanel rejected the update")
        case 429, 500...599:
            // Mixpanel asks for at least 2 s before a retry, as `/import` does.
            return .retry("Mixpanel answered \(status)", max(retryAfter ?? .seconds(2), .seconds(2)))
        case 401, 403:
            // A wrong token is a configuration problem: keep the records until it is fixed.
            return .retry("Mixpanel answered \(status): check the project token", .zero)
        case _ where RedirectAnswer.contains(status):
            // So is an endpoint that moved.
            return .retry("Mixpanel answered \(RedirectAnswer.describe(status: status, location: location))", .zero)
        default:
            return .rejected("Mixpanel answered \(status): \(MixpanelRefusal.reason(text, token: options.token))")
        }
    }
}

/// Registers the Mixpanel sink as `type: mixpanel`.
public enum MixpanelSinkPlugin: SinkPlugin {
    public typealias Options = MixpanelSink.Options
    public static let typeName = "mixpanel"
    /// Mixpanel's guidance: back off from 2 s, doubling to 60 s, with jitter.
    public static var deliveryDefaults: DeliverySettings {
        DeliverySettings(backoffInitial: .seconds(2), backoffMax: .seconds(60))
    }
    /// The GDPR API's host per region.
    static let gdprRegions = [
        "us": "https://mixpanel.com", "eu": "https://eu.mixpanel.com", "in": "https://in.mixpanel.com",
    ]
    static let regions = [
        "us": "https://api.mixpanel.com", "eu": "https://api-eu.mixpanel.com", "in": "https://api-in.mixpanel.com",
    ]

    public static func readOptions(_ reader: ConfigReader, context: SinkContext) -> Options? {
        let token = reader.requiredString("token")
        let region = reader.choice("region", regions.keys.sorted()) ?? "us"
        var endpoint = reader.string("endpoint") ?? regions[region]!
        while endpoint.hasSuffix("/") { endpoint.removeLast() }
        if URL(string: endpoint)?.scheme.map({ ["http", "https"].contains($0) }) != true {
            reader.report("must be an http or https URL", key: "endpoint")
        }
        // `endpoint` wins over `region`: one naming another region's Mixpanel host would
        // send EU data to the US host, which does not take it, with check-config silent.
        if reader.has("region"), reader.has("endpoint"),
            let other = regions.first(where: { $0.value == endpoint && $0.key != region })
        {
            reader.report(
                "is Mixpanel's \(other.key) host, but region is \(region): leave endpoint out", key: "endpoint")
        }
        let gdprToken = reader.string("gdpr_token")
        let gdprEndpoint = reader.url("gdpr_endpoint") ?? gdprRegions[region]!
        let gdprCheckEvery = reader.int("gdpr_check_every_s", in: 1...86_400) ?? 3600
        let prefix = reader.string("property_prefix") ?? "asa_"
        let timeout = reader.int("timeout_ms", in: 100...600_000) ?? 10_000
        let eventName = reader.string("event_name")
        if eventName?.isEmpty == true { reader.report("must not be empty", key: "event_name") }
        var mode = MixpanelSink.Mode.api
        // Read on past a missing directory, so that the keys after it are not called unknown.
        var noDirectory = false
        if reader.choice("mode", ["api", "file"]) == "file" {
            if reader.requiredString("directory") != nil, let directory = reader.filePath("directory") {
                mode = .file(directory: directory)
            } else {
                noDirectory = true
            }
        } else if reader.string("directory") != nil {
            reader.report("only with mode: file", key: "directory")
        }
        var names: [String: String] = [:]
        if let properties = reader.child("properties") {
            for key in properties.keys {
                guard MixpanelProfileMapping.propertyNames.contains(key) else {
                    properties.report(
                        "unknown property '\(key)'; known: \(MixpanelProfileMapping.propertyNames.joined(separator: ", "))",
                        key: key)
                    _ = properties.node(key)
                    continue
                }
                if let name = properties.string(key) {
                    if name.isEmpty || name.hasPrefix("$") {
                        properties.report("must be a non-empty name not starting with $", key: key)
                    } else if MixpanelEventMapping.ownProperties.contains(name) {
                        properties.report("'\(name)' is a property the gateway sets itself on every event", key: key)
                    } else if let other = names.first(where: { $0.value == name })?.key {
                        properties.report("'\(name)' is also the name of \(other): one would hide the other", key: key)
                    } else {
                        names[key] = name
                    }
                }
            }
            for (key, name) in names.sorted(by: { $0.key < $1.key }) {
                if let other = MixpanelProfileMapping.propertyNames.first(where: {
                    names[$0] == nil && prefix + $0 == name
                }) {
                    properties.report(
                        "'\(name)' is also the name of \(other), prefixed: one would hide the other", key: key)
                }
            }
            properties.finish()
        }
        if prefix.hasPrefix("$") {
            reader.report("must not start with $ (Mixpanel's own properties)", key: "property_prefix")
        }
        if eventName?.hasPrefix("$") == true {
            reader.report("must not start with $ (Mixpanel's own events, such as $identify)", key: "event_name")
        }
        guard let token, !noDirectory else { return nil }
        var options = Options(
            token: token, endpoint: endpoint, propertyPrefix: prefix, timeout: .milliseconds(timeout),
            eventName: eventName, mode: mode)
        options.propertyNames = names
        options.gdprToken = gdprToken
        options.gdprEndpoint = gdprEndpoint
        options.gdprCheckEvery = .seconds(gdprCheckEvery)
        return options
    }

    public static func makeSink(options: Options, context: SinkContext) async throws -> any AttributionSink {
        MixpanelSink(options: options)
    }

    public static func maxBatchSize(_ options: Options) -> Int? { MixpanelSink.batchLimit }

    public static func summary(_ options: Options) -> String {
        let events = options.eventName.map { ", events '\($0)'" } ?? ""
        if case .file(let directory) = options.mode {
            return "profiles\(events) as NDJSON files in \(directory), properties prefixed '\(options.propertyPrefix)'"
        }
        let via = options.eventName == nil ? "/engage" : "/engage and /import"
        return
            "profiles\(events) via \(ShownURL.of(options.endpoint))\(via), properties prefixed '\(options.propertyPrefix)'"
    }
}
