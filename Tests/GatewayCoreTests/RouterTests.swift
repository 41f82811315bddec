import Foundation
import GatewayCore
import Testing

/// `routes:` at work: which sinks' outboxes a record lands in.
@Suite struct RouterTests {
    func record(
        provider: String = "iad", app: String? = "111", attributed: Bool = true, kind: RecordKind = .install,
        isTest: Bool = false
    ) -> AttributionRecord {
        var record = AttributionRecord(
            provider: provider, kind: kind, dedupeKey: UUID().uuidString, receivedAt: Date(timeIntervalSince1970: 0),
            attributed: attributed)
        record.appID = app
        record.isTest = isTest
        return record
    }

    @Test func anEmptyFilterMatchesEverythingButTestPayloads() {
        #expect(RecordFilter().matches(record()))
        #expect(RecordFilter().matches(record(provider: "anything", app: nil, attributed: false, kind: .event)))
        // Apple's developer-mode payloads reach only the routes that ask for them.
        #expect(!RecordFilter().matches(record(isTest: true)))
        #expect(
            RecordRouter(routes: [Route(sinks: ["prod"]), Route(sinks: ["qa"], filter: RecordFilter(isTest: true))])
                .sinks(for: record(isTest: true)) == ["qa"])
    }

    @Test func aQuarantineRouteTakesWhatDidNotVerifyEvenWhenItClaimsToBeATest() {
        var forged = record(kind: .postback, isTest: true)
        forged.signature = "invalid"
        // "Test" is read from unsigned fields (source-app-id and conversion-value 0): a
        // forgery marked so must still reach the audit sink.
        #expect(
            {
                var f = RecordFilter(); f.quarantined = true; return f
            }().matches(forged))
        #expect(!RecordFilter().matches(forged))
        #expect(!RecordFilter(isTest: true).matches(forged))
        // A quarantine route that says `is_test` still means it.
        #expect(
            !{
                var f = RecordFilter(isTest: false); f.quarantined = true; return f
            }().matches(forged))
        #expect(
            {
                var f = RecordFilter(isTest: true); f.quarantined = true; return f
            }().matches(forged))
        // A verified test postback stays on test routes only.
        var test = record(kind: .postback, isTest: true)
        test.signature = "verified"
        #expect(
            !{
                var f = RecordFilter(); f.quarantined = true; return f
            }().matches(test))
        #expect(RecordFilter(isTest: true).matches(test))
    }

    @Test func eachConditionAlone() {
        #expect(RecordFilter(providers: ["iad"]).matches(record()))
        #expect(!RecordFilter(providers: ["iad"]).matches(record(provider: "adservices")))

        #expect(RecordFilter(appIDs: ["111"]).matches(record()))
        #expect(!RecordFilter(appIDs: ["111"]).matches(record(app: "1111")))
        #expect(!RecordFilter(appIDs: ["111"]).matches(record(app: nil)))

        #expect(RecordFilter(attributed: true).matches(record()))
        #expect(!RecordFilter(attributed: true).matches(record(attributed: false)))
        #expect(RecordFilter(attributed: false).matches(record(attributed: false)))
        #expect(!RecordFilter(attributed: false).matches(record()))

        #expect(RecordFilter(kinds: [.reinstall]).matches(record(kind: .reinstall)))
        #expect(!RecordFilter(kinds: [.reinstall]).matches(record(kind: .install)))

        // `is_test: false` keeps Apple's test payloads out; `true` keeps only them.
        #expect(RecordFilter(isTest: false).matches(record()))
        #expect(!RecordFilter(isTest: false).matches(record(isTest: true)))
        #expect(RecordFilter(isTest: true).matches(record(isTest: true)))
        #expect(!RecordFilter(isTest: true).matches(record()))
    }

    @Test func aListMeansAnyOfItsValues() {
        let providers = RecordFilter(providers: ["iad", "adservices"])
        #expect(providers.matches(record(provider: "iad")))
        #expect(providers.matches(record(provider: "adservices")))
        #expect(!providers.matches(record(provider: "skadnetwork")))

        let apps = RecordFilter(appIDs: ["111", "222"])
        #expect(apps.matches(record(app: "111")))
        #expect(apps.matches(record(app: "222")))
        #expect(!apps.matches(record(app: "333")))

        let kinds = RecordFilter(kinds: [.install, .reinstall])
        #expect(kinds.matches(record(kind: .install)))
        #expect(kinds.matches(record(kind: .reinstall)))
        #expect(!kinds.matches(record(kind: .purchase)))
    }

    @Test func everyConditionGivenMustHold() {
        let filter = RecordFilter(
            providers: ["iad", "adservices"], appIDs: ["111"], attributed: true, kinds: [.install], isTest: false)
        #expect(filter.matches(record()))
        #expect(filter.matches(record(provider: "adservices")))
        #expect(!filter.matches(record(provider: "skadnetwork")))
        #expect(!filter.matches(record(app: "222")))
        #expect(!filter.matches(record(attributed: false)))
        #expect(!filter.matches(record(kind: .reinstall)))
        #expect(!filter.matches(record(isTest: true)))
    }

    @Test func aRecordGoesToEachMatchingSinkOnceInConfigOrder() {
        let router = RecordRouter(routes: [
            Route(sinks: ["local"]),
            Route(sinks: ["mixpanel", "hook"], filter: RecordFilter(attributed: true)),
            Route(sinks: ["hook", "local", "audit"], filter: RecordFilter(kinds: [.install])),
            Route(sinks: ["never"], filter: RecordFilter(providers: ["s2s"])),
        ])
        #expect(router.sinks(for: record()) == ["local", "mixpanel", "hook", "audit"])
        #expect(router.sinks(for: record(kind: .reinstall)) == ["local", "mixpanel", "hook"])
        #expect(router.sinks(for: record(attributed: false)) == ["local", "hook", "audit"])
        #expect(router.sinks(for: record(attributed: false, kind: .reinstall)) == ["local"])
        #expect(router.sinks(for: record(provider: "s2s", attributed: false, kind: .event)) == ["local", "never"])
    }

    @Test func theOrderIsTheConfigsNotTheMatchOrder() {
        // A later route naming a sink first does not move it ahead of an earlier route's sinks.
        let router = RecordRouter(routes: [
            Route(sinks: ["b", "a"], filter: RecordFilter(attributed: true)),
            Route(sinks: ["c", "a", "b"]),
        ])
        #expect(router.sinks(for: record()) == ["b", "a", "c"])
        #expect(router.sinks(for: record(attributed: false)) == ["c", "a", "b"])
    }

    @Test func noMatchingRouteMeansNoSinks() {
        let router = RecordRouter(routes: [
            Route(sinks: ["paid"], filter: RecordFilter(attributed: true)),
            Route(sinks: ["app9"], filter: RecordFilter(appIDs: ["9"])),
        ])
        #expect(router.sinks(for: record(attributed: false)).isEmpty)
        #expect(RecordRouter(routes: []).sinks(for: record()).isEmpty)
    }
}
