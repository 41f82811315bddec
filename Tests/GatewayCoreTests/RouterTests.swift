import Foundation
import GatewayCore
import Testing

@Suite struct RouterTests {
    func record(provider: String = "iad", app: String? = "111", attributed: Bool = true, kind: RecordKind = .install,
        isTest: Bool = false) -> AttributionRecord
    {
        var record = AttributionRecord(
            provider: provider, kind: kind, dedupeKey: UUID().uuidString, receivedAt: Date(), attributed: attributed)
        record.appID = app
        record.isTest = isTest
        return record
    }

    @Test func everyConditionMustHoldAndListsMeanAnyOf() {
        let filter = RecordFilter(providers: ["iad", "adservices"], appIDs: ["111"], attributed: true, kinds: [.install])
        #expect(filter.matches(record()))
        #expect(filter.matches(record(provider: "adservices")))
        #expect(!filter.matches(record(provider: "skadnetwork")))
        #expect(!filter.matches(record(app: "222")))
        #expect(!filter.matches(record(app: nil)))
        #expect(!filter.matches(record(attributed: false)))
        #expect(!filter.matches(record(kind: .reinstall)))
        #expect(RecordFilter(isTest: false).matches(record()))
        #expect(!RecordFilter(isTest: false).matches(record(isTest: true)))
        #expect(RecordFilter().matches(record(provider: "anything", app: nil, attributed: false)))
    }

    @Test func aRecordGoesToEachMatchingSinkOnceInConfigOrder() {
        let router = RecordRouter(routes: [
            Route(sinks: ["local"]),
            Route(sinks: ["mixpanel", "hook"], filter: RecordFilter(attributed: true)),
            Route(sinks: ["hook", "local", "audit"], filter: RecordFilter(kinds: [.install])),
            Route(sinks: ["never"], filter: RecordFilter(providers: ["s2s"])),
        ])
        #expect(router.sinks(for: record()) == ["local", "mixpanel", "hook", "audit"])
        #expect(router.sinks(for: record(attributed: false, kind: .reinstall)) == ["local"])
        #expect(RecordRouter(routes: [Route(sinks: ["x"], filter: RecordFilter(appIDs: ["9"]))]).sinks(for: record()).isEmpty)
    }

    @Test func backoffDoublesIsCappedJittersAndHonoursRetryAfter() {
        let settings = DeliverySettings(backoffInitial: .seconds(2), backoffMax: .seconds(60))
        // Equal jitter: between half and all of the exponential step.
        #expect(settings.backoff(attempt: 1, retryAfter: nil, unit: 0) == .seconds(1))
        #expect(settings.backoff(attempt: 1, retryAfter: nil, unit: 0.999_999) == .milliseconds(2000))
        #expect(settings.backoff(attempt: 3, retryAfter: nil, unit: 0) == .seconds(4))
        #expect(settings.backoff(attempt: 3, retryAfter: nil, unit: 0.5) == .seconds(6))
        #expect(settings.backoff(attempt: 20, retryAfter: nil, unit: 0) == .seconds(30))
        #expect(settings.backoff(attempt: 20, retryAfter: nil, unit: 1) == .seconds(60))
        // Retry-After is a floor, never shortened.
        #expect(settings.backoff(attempt: 1, retryAfter: .seconds(90), unit: 0) == .seconds(90))
        #expect(settings.backoff(attempt: 6, retryAfter: .seconds(1), unit: 1) == .seconds(60))
    }
}
