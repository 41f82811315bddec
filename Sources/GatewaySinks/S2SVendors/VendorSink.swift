import AsyncHTTPClient
import Foundation
import GatewayCore
import GatewayHTTP
import GatewayProviders
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Delivers stored events to one vendor through its ``VendorAdapter``, one request per
/// event (no vendor batches S2S events). The worker around it owns the outbox, retries,
/// backoff and dead letters, so a vendor outage delays events and loses none (one sent and
/// left unanswered is dead-lettered, unless `on_no_answer: retry`: it may have been counted).
///
/// A batch is split by device: each device's events go in order, and once one of them
/// must wait, the later ones of that device wait too rather than overtake it.
public final class VendorSink<Adapter: VendorAdapter>: AttributionSink {
    public let maxBatchSize: Int
    public var countsEveryCopy: Bool { true }
    let adapter: Adapter
    let settings: VendorSettings
    let client: HTTPClient
    let logger: Logger
    let now: @Sendable () -> Date
    /// Told of the conversion value in each answer (nil for an event not delivered, or
    /// answered without one), for the `POST /v1/events` request that may wait for it.
    let conversionValues: AnswerWaiters<VendorConversionValue>?

    public init(
        adapter: Adapter, settings: VendorSettings, client: HTTPClient = NoRedirectHTTPClient.shared, logger: Logger,
        now: @escaping @Sendable () -> Date = { Date() }, conversionValues: AnswerWaiters<VendorConversionValue>? = nil
    ) {
        self.adapter = adapter
        self.settings = settings
        self.maxBatchSize = settings.delivery.batchSize
        self.client = client
        self.logger = logger
        self.now = now
        self.conversionValues = conversionValues
    }

    public func deliver(_ records: [AttributionRecord]) async throws -> [DeliveryOutcome] {
        try await deliver(records, progress: .none)
    }

    /// Each event is marked as being sent before its request and its answer written as it
    /// comes: a batch's answers all written at its end would be lost to a crash, and the
    /// vendor would count again every event it had answered.
    public func deliver(_ records: [AttributionRecord], progress: DeliveryProgress) async throws -> [DeliveryOutcome] {
        var lanes: [String: [Int]] = [:]
        var order: [String] = []
        var events: [Int: RawEvent] = [:]
        var outcomes = [DeliveryOutcome](repeating: .retry(reason: "not sent"), count: records.count)
        for (index, record) in records.enumerated() {
            // Routes send a vendor only its kinds, but `replay` may queue any record: a kind
            // it does not take (a refund; sessions for AppsFlyer) is declined, never sent.
            guard adapter.kinds.contains(record.kind) else {
                outcomes[index] = .declined(
                    reason: "\(adapter.vendor.displayName) takes no \(record.kind.rawValue) records")
                continue
            }
            // `replay` may queue a forgotten user's record too: its device ids are stand-ins,
            // which the vendor would count as a device.
            guard !record.isForgotten else {
                outcomes[index] = .declined(reason: "the user was forgotten; the record holds no ids of theirs")
                continue
            }
            // Its route holds back events without consent; this holds back those queued
            // before `require_consent` was set.
            guard !settings.requireConsent || record.hasTrackingConsent else {
                outcomes[index] = .declined(reason: "\(adapter.vendor.displayName) takes consented events only")
                continue
            }
            do {
                let event = try RawEvent(stored: record.raw)
                events[index] = event
                // The outbox's own device (lane); records naming none go one app at a time.
                let key = record.deliveryLane ?? "app:\(record.appID ?? "")"
                if lanes[key] == nil { order.append(key) }
                lanes[key, default: []].append(index)
            } catch {
                outcomes[index] = .reject(reason: "the record holds no readable event: \(error)")
            }
        }
        // Devices are dealt round-robin onto `concurrency` workers.
        let workers = max(1, min(settings.concurrency, order.count))
        let shares: [[[(index: Int, event: RawEvent)]]] = (0..<workers).map { worker in
            stride(from: worker, to: order.count, by: workers).map { device in
                lanes[order[device]]!.map { (index: $0, event: events[$0]!) }
            }
        }
        // The wait of the vendor's refusal of everything (a `429` or `5xx`), once one came:
        // the batch's events not sent yet are held back, no attempt counted, rather than
        // each sent to be refused too.
        let refused = RefusalWait()
        let vendor = adapter.vendor.displayName
        let backoffInitial = settings.delivery.backoffInitial
        let results = await withTaskGroup(of: [(Int, DeliveryOutcome)].self) { group in
            for share in shares {
                group.addTask {
                    var done: [(Int, DeliveryOutcome)] = []
                    for device in share {
                        var waiting: DeliveryOutcome?
                        for item in device {
                            if let waiting {
                                done.append((item.index, waiting))
                                continue
                            }
                            // A shutdown sends nothing more: what is left stays as it was.
                            if Task.isCancelled {
                                done.append((item.index, .retry(reason: "not sent: the gateway is stopping")))
                                continue
                            }
                            if let wait = refused.wait.withLock({ $0 }) {
                                let reason = "not sent: \(vendor) refused the batch's first events"
                                done.append((item.index, .postponed(reason: reason, after: max(wait, backoffInitial))))
                                continue
                            }
                            let outcome: DeliveryOutcome
                            do {
                                try await progress.sending(item.index)
                                outcome = await self.send(item.event, record: records[item.index])
                                await progress.answered(item.index, outcome)
                            } catch {
                                outcome = .retry(reason: "not sent: it could not be marked as being sent (\(error))")
                            }
                            done.append((item.index, outcome))
                            if case .retry(_, let after) = outcome {
                                waiting = .retry(reason: "waits for an earlier event of the same device", after: after)
                                if let after { refused.wait.withLock { $0 = max($0 ?? after, after) } }
                            }
                        }
                    }
                    return done
                }
            }
            var all: [(Int, DeliveryOutcome)] = []
            for await part in group { all += part }
            return all
        }
        for (index, outcome) in results { outcomes[index] = outcome }
        // Events not sent this time get no answer now: a request waiting for one need not
        // wait out its bound. Those sent were told as they were answered, which stands.
        if let conversionValues {
            for record in records { await conversionValues.attempted(record.recordID, answer: nil) }
        }
        return outcomes
    }

    /// The vendor has the event and its answer was lost. No vendor dedupes S2S events, so
    /// sending it again could count it (and its revenue) twice: it goes to the dead letters,
    /// for an operator to check against the vendor's data, unless `on_no_answer: retry`.
    func unanswered(_ what: String) -> DeliveryOutcome {
        let vendor = adapter.vendor.displayName
        if settings.retryUnanswered {
            return .retry(reason: "\(vendor) was sent the event and \(what); sending it again (on_no_answer: retry)")
        }
        return .reject(
            reason: "\(vendor) was sent the event and \(what): it may have counted it; check before dlq retry "
                + "(or set on_no_answer: retry)")
    }

    /// The gateway stopped after the event was marked as being sent and before its answer
    /// was written: the vendor may have counted it.
    public func interruptedSend(of record: AttributionRecord) -> DeliveryOutcome {
        unanswered("the gateway stopped before its answer was written")
    }

    func send(_ event: RawEvent, record: AttributionRecord) async -> DeliveryOutcome {
        let (outcome, body) = await exchange(event, record: record)
        if let conversionValues {
            let value = outcome == .delivered ? body.flatMap(adapter.conversionValue(answer:)) : nil
            await conversionValues.attempted(record.recordID, answer: value)
        }
        return outcome
    }

    /// Sends the event; the outcome, and the answer's body when the vendor's answer decided it.
    func exchange(_ event: RawEvent, record: AttributionRecord) async -> (DeliveryOutcome, String?) {
        let prepared: VendorRequest
        do {
            prepared = try adapter.request(for: event, record: record, now: now())
        } catch {
            return (.reject(reason: error.reason), nil)
        }
        guard let request = prepared.clientRequest else {
            return (.reject(reason: "\(adapter.vendor.displayName): the request's URL is not valid"), nil)
        }
        let answer: SentExchange.Answer
        do {
            answer = try await SentExchange.exchange(
                request, on: client, timeout: settings.timeout, bodyLimit: 64 * 1024)
        } catch {
            // Typed: `error` is the exchange's `Failure`.
            if error.sent { return (unanswered("gave no answer (\(error))"), nil) }
            return (.retry(reason: "\(adapter.vendor.displayName) unreachable: \(error)"), nil)
        }
        let status = answer.status
        // A status that says "again later" stands without its body; every other answer is
        // read from its body (Singular's `status`, Adjust's "device not found"), and one
        // cut short says nothing: the vendor has the event, and its verdict was lost.
        if !answer.complete && !(status == 408 || status == 429 || status >= 500) {
            return (unanswered("answered \(status) but its body did not arrive in time"), nil)
        }
        let retryAfter = answer.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: now()) }
        // An answer quoting the request (an error page's echo of the headers or the URL)
        // would put the vendor's key into the dead letter's reason and the log.
        let credentials =
            [settings.apiKey ?? ""] + prepared.headers.filter { $0.0.lowercased() != "content-type" }.map(\.1)
        let body = SecretText.removing(credentials, from: String(buffer: answer.body), as: "key")
        let age = Duration.milliseconds(Int64(max(0, now().timeIntervalSince(record.receivedAt)) * 1000))
        return (adapter.outcome(status: status, body: body, retryAfter: retryAfter, age: age), body)
    }
}

extension VendorSink {
    /// Asks the vendor to erase the user, through its deletion API (``VendorAdapter/forgetRequests(for:)``):
    /// done once every request is, failed or retried on the first that is not. Asking again
    /// erases nothing more.
    public func forget(_ request: ForgetRequest) async throws -> ForgetOutcome {
        let vendor = adapter.vendor.displayName
        let requests: [VendorRequest]
        switch adapter.forgetRequests(for: request) {
        case .notSupported(let reason): return .notSupported(reason: reason)
        case .requests(let prepared): requests = prepared
        }
        for prepared in requests {
            guard let built = prepared.clientRequest else {
                return .failed(reason: "\(vendor): the deletion request's URL is not valid")
            }
            let answer: SentExchange.Answer
            do {
                answer = try await SentExchange.exchange(
                    built, on: client, timeout: settings.timeout, bodyLimit: 64 * 1024)
            } catch {
                return .retry(reason: "\(vendor) deletion API unreachable: \(error)")
            }
            let retryAfter = answer.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0, now: now()) }
            // An answer may quote the request, keys and all.
            let credentials =
                ([settings.apiKey, settings.gdprToken].compactMap { $0 }
                + prepared.headers.filter { $0.0.lowercased() != "content-type" }.map(\.1)).filter { !$0.isEmpty }
            let body = SecretText.removing(credentials, from: String(buffer: answer.body), as: "key")
            let outcome = adapter.forgetOutcome(status: answer.status, body: body, retryAfter: retryAfter)
            guard outcome == .done else { return outcome }
        }
        return .done
    }
}

extension VendorRequest {
    /// The request for the HTTP client; nil when its URL is not one.
    var clientRequest: HTTPClient.Request? {
        var headers = HTTPHeaders()
        for (name, value) in self.headers { headers.add(name: name, value: value) }
        return try? HTTPClient.Request(
            url: url, method: method == .get ? .GET : .POST, headers: headers, body: body.map { .bytes($0) })
    }
}

/// The wait of a vendor's refusal of everything, shared by a batch's lanes.
private final class RefusalWait: Sendable {
    let wait = Mutex<Duration?>(nil)
}
