import Crypto
import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GRDB
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

@testable import GatewayEnrichers

/// The `keyword_lookup` enricher against local fakes of Apple's OAuth server and the
/// Apple Ads Platform API v1.
@Suite struct KeywordLookupTests {
    let key = P256.Signing.PrivateKey()

    /// Records wait up to a minute for their names by default: a test expecting names gets them
    /// as soon as Apple answers, and a loaded machine never turns that into a test of speed.
    func options(port: Int, wait: Duration = .seconds(60)) -> KeywordLookupPlugin.Options {
        var options = KeywordLookupPlugin.Options(
            clientID: FakeAppleAds.clientID, teamID: FakeAppleAds.teamID, keyID: FakeAppleAds.keyID,
            privateKeyPEM: key.pemRepresentation, endpoint: "http://127.0.0.1:\(port)/v1")
        options.tokenEndpoint = "http://127.0.0.1:\(port)/auth/oauth2/token"
        options.wait = wait
        return options
    }

    /// The Campaign Management API v5 instead of v1.
    func v5Options(port: Int) -> KeywordLookupPlugin.Options {
        var options = options(port: port)
        options.api = "v5"
        options.endpoint = "http://127.0.0.1:\(port)/api/v5"
        return options
    }

    /// The enricher as the gateway builds it, caching in `env`'s SQLite file.
    func makeEnricher(
        _ options: KeywordLookupPlugin.Options, env: TestEnvironment, logger: Logger = Logger(label: "test"),
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) async throws -> KeywordLookupEnricher {
        try await KeywordLookupPlugin.make(
            options: options, context: EnricherContext(storagePath: env.databasePath, logger: logger), sleep: sleep)
    }

    /// A logger handing each JSON line to `line`.
    func capturing(_ line: @escaping @Sendable (String) -> Void) -> Logger {
        let handler = JSONLogHandler(label: "gateway", level: .trace, write: line)
        return Logger(label: "test", factory: { _ in handler })
    }

    func record(keyword: Int64) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "adservices", kind: .install, dedupeKey: "adservices:\(UUID())", receivedAt: Date(),
            attributed: true)
        record.orgID = FakeAppleAds.orgID
        record.campaignID = 542_370_539
        record.adGroupID = 542_317_095
        record.keywordID = keyword
        return record
    }

    func withFake(_ body: @escaping @Sendable (FakeAppleAds, Int) async throws -> Void) async throws {
        let fake = FakeAppleAds(publicKey: key.publicKey)
        try await Application(router: fake.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { client in try await body(fake, try #require(client.port)) }
    }

    /// The enricher's Apple Ads source against the fake, its waits instant; with
    /// `outagePause`, an outage of Apple Ads refuses requests that long before the next probe.
    func withSource(
        outagePause: Duration? = nil,
        _ body: @escaping @Sendable (FakeAppleAds, any AppleAdsNameSource) async throws -> Void
    ) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            var options = options(port: port)
            if let outagePause { options.backoffInitial = outagePause }
            try await body(fake, try await makeEnricher(options, env: env, sleep: { _ in }).source)
        }
    }

    @Test func aThousandLookupsOfFiftyKeywordsAskAppleOncePerNameWithOneToken() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(options(port: port), env: env)
            let batches = (0..<10).map { batch in
                (0..<100).map { record(keyword: 1000 + Int64((batch * 100 + $0) % 50)) }
            }
            let enriched = await withTaskGroup(of: [AttributionRecord].self) { group in
                for batch in batches { group.addTask { await enricher.enrich(batch) } }
                var all: [AttributionRecord] = []
                for await records in group { all += records }
                return all
            }
            #expect(enriched.count == 1000)
            #expect(enriched.allSatisfy { $0.keyword == "keyword \($0.keywordID!)" && $0.keywordMatchType == "EXACT" })
            #expect(
                enriched.allSatisfy { $0.adGroupName == "adgroup 542317095" && $0.campaignName == "campaign 542370539" }
            )
            #expect(enriched.allSatisfy { $0.enrichedAt != nil })
            #expect(fake.tokenRequests == 1)
            // The first batch's 50 keywords go in one bulk query; the others wait for it.
            #expect(fake.count("keyword-query") == 1)
            #expect(fake.count("keyword") == 0)
            #expect(fake.count("adgroup") == 1 && fake.count("campaign") == 1 && fake.count("acls") == 1)
            #expect(fake.refused.isEmpty, "\(fake.refused)")

            // An expired token is replaced once, and the lookups waiting on it succeed.
            fake.expireTokens()
            let fresh = await withTaskGroup(of: [AttributionRecord].self) { group in
                for index in 0..<20 { group.addTask { await enricher.enrich([record(keyword: 5000 + Int64(index))]) } }
                var all: [AttributionRecord] = []
                for await records in group { all += records }
                return all
            }
            #expect(fresh.allSatisfy { $0.keyword == "keyword \($0.keywordID!)" })
            #expect(fake.tokenRequests == 2)

            // Cached names survive a new enricher (a restart): no further requests.
            let again = try await makeEnricher(options(port: port), env: env)
            let cached = await again.enrich([record(keyword: 1001)])
            #expect(cached.first?.keyword == "keyword 1001")
            #expect(fake.count("keyword") == 20 && fake.count("keyword-query") == 1)
        }
    }

    @Test func theCampaignManagementAPIv5UsesTheOrgContextAndTheDataEnvelope() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(v5Options(port: port), env: env)
            let enriched = try #require(await enricher.enrich([record(keyword: 77), record(keyword: 77)]).first)
            #expect(enriched.keyword == "v5 keyword 77" && enriched.keywordMatchType == "BROAD")
            #expect(enriched.adGroupName == "v5 adgroup 542317095")
            #expect(enriched.campaignName == "v5 campaign 542370539")
            #expect(fake.count("v5-keyword") == 1 && fake.tokenRequests == 1 && fake.count("acls") == 0)
            // v5 has no bulk query by id: two keywords are two requests.
            _ = await enricher.enrich([record(keyword: 78), record(keyword: 79)])
            #expect(fake.count("v5-keyword") == 3)
            #expect(fake.refused.isEmpty, "\(fake.refused)")
        }
    }

    @Test func aKeywordTheBulkQueryLeavesOutIsAskedForByID() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(options(port: port), env: env)
            let enriched = await enricher.enrich([record(keyword: 5), record(keyword: 404_404)])
            #expect(enriched[0].keyword == "keyword 5" && enriched[1].keyword == nil)
            #expect(fake.count("keyword-query") == 1)
            // Deleted and unknown keywords are not in query results; a GET tells which.
            #expect(fake.count("keyword") == 1)
        }
    }

    /// Apple answering fewer keywords a page than asked: the next pages are asked for, not
    /// each keyword by id.
    @Test func theBulkQueryFollowsItsPages() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            fake.queryPage.withLock { $0 = 2 }
            let enricher = try await makeEnricher(options(port: port), env: env)
            let enriched = await enricher.enrich((1...5).map { record(keyword: Int64($0)) })
            #expect(enriched.map(\.keyword) == (1...5).map { "keyword \($0)" })
            #expect(fake.count("keyword-query") == 3 && fake.count("keyword") == 0)
        }
    }

    /// The bulk query refused: its keywords are asked for by id, a few requests at a time,
    /// and the failure is logged.
    @Test func keywordsTheBulkQueryCannotAnswerAreAskedAFewAtATime() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            fake.queryRefused.withLock { $0 = true }
            fake.delay.withLock { $0 = .milliseconds(20) }
            let lines = Mutex<[String]>([])
            let enricher = try await makeEnricher(
                options(port: port), env: env, logger: capturing { line in lines.withLock { $0.append(line) } })
            _ = await enricher.enrich((1...40).map { record(keyword: Int64($0)) })
            // Names past `wait_ms` are still fetched, after the records went on.
            for _ in 0..<500 where fake.count("keyword") < 40 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(fake.count("keyword") == 40)
            #expect(fake.inFlight.withLock { $0.most } <= KeywordLookupEnricher.requestsAtOnce)
            #expect(lines.withLock { $0 }.contains { $0.contains("bulk query failed") })
        }
    }

    @Test func anExhaustedRateLimitPausesTheNextRequest() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let pauses = Mutex<[Duration]>([])
        try await withFake { fake, port in
            let enricher = try await makeEnricher(
                options(port: port), env: env, sleep: { duration in pauses.withLock { $0.append(duration) } })
            fake.remaining.withLock { $0 = 0 }
            _ = await enricher.enrich([record(keyword: 11)])
            let before = pauses.withLock { $0.count }
            // Apple said the quota is spent for 3 s: the next request waits out what is left.
            _ = await enricher.enrich([record(keyword: 12)])
            let waited = pauses.withLock { Array($0.dropFirst(before)) }
            #expect(waited.contains { $0 > .zero && $0 <= .seconds(3) })
        }
    }

    @Test func unknownIdsAreCachedAsUnknownAndSearchMatchIsNotLookedUp() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(options(port: port), env: env)
            var searchMatch = record(keyword: 1)
            searchMatch.keywordID = nil
            let first = await enricher.enrich([record(keyword: 404_404), searchMatch])
            #expect(first[0].keyword == nil && first[0].campaignName == "campaign 542370539")
            #expect(first[1].keyword == nil)
            _ = await enricher.enrich([record(keyword: 404_404)])
            #expect(fake.count("keyword") == 1)
        }
    }

    /// Apple's developer-mode answer names ids no account has: nothing is asked about it.
    @Test func aTestPayloadIsNotLookedUp() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(options(port: port), env: env)
            var test = record(keyword: 123_222)
            (test.campaignID, test.adGroupID, test.isTest) = (1_234_567_890, 1_234_567_890, true)
            let enriched = await enricher.enrich([test])
            #expect(enriched[0].keyword == nil && enriched[0].campaignName == nil)
            #expect(fake.count("keyword") == 0 && fake.count("adgroup") == 0 && fake.count("campaign") == 0)
        }
    }

    @Test func withAppleDownRecordsPassWithTheirIdsAndSecretsStayOutOfTheLog() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let lines = Mutex<[String]>([])
        try await withFake { fake, port in
            let enricher = try await makeEnricher(
                options(port: port, wait: .milliseconds(200)), env: env,
                logger: capturing { line in lines.withLock { $0.append(line) } }, sleep: { _ in })
            // Apple answers, so a token exists; then its API goes down.
            _ = await enricher.enrich([record(keyword: 7)])
            fake.down.withLock { $0 = true }
            let passed = await enricher.enrich([record(keyword: 8)])
            #expect(passed.first?.keyword == nil && passed.first?.keywordID == 8)
            // The failure is logged by the fetch, which goes on after the record did.
            #expect(
                try await env.eventually {
                    lines.withLock { $0.joined(separator: "\n").contains("name lookup failed") }
                })
            let log = lines.withLock { $0.joined(separator: "\n") }
            for secret in fake.issuedTokens + [String(key.pemRepresentation.split(separator: "\n")[1]), "eyJ"] {
                #expect(!log.contains(secret))
            }
        }
    }

    /// During an outage each name's own retries would ask Apple Ads again, and each would
    /// log its failure. One request at a time finds out when Apple Ads is back, and one
    /// line stands for many.
    @Test func anOutageOfAppleAdsIsAskedByOneRequestAtATimeAndLoggedOnce() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let lines = Mutex<[String]>([])
        try await withFake { fake, port in
            var options = options(port: port, wait: .milliseconds(50))
            options.backoffInitial = .milliseconds(100)
            let enricher = try await makeEnricher(
                options, env: env, logger: capturing { line in lines.withLock { $0.append(line) } })
            _ = await enricher.enrich([record(keyword: 7)])
            fake.down.withLock { $0 = true }
            let before = fake.requests
            // Fifty names, each retrying (100 ms doubling).
            _ = await enricher.enrich((0..<50).map { record(keyword: 100 + Int64($0)) })
            try await Task.sleep(for: .seconds(1))
            // Those sent before the first failure came back, and a probe per wait (100 ms
            // doubling): not the hundreds of fifty names' own retries.
            let during = fake.requests - before
            #expect(during <= 60, "\(during) requests")
            // A loaded machine may not have seen the first failure yet: waited for, then once.
            func failures() -> Int { lines.withLock { $0.filter { $0.contains("name lookup failed") }.count } }
            #expect(try await env.eventually { failures() >= 1 })
            #expect(failures() == 1, "\(lines.withLock { $0 }.filter { $0.contains("name lookup failed") })")

            fake.down.withLock { $0 = false }
            #expect(
                try await env.eventually {
                    await enricher.enrich([record(keyword: 999)]).first?.keyword != nil
                })
        }
    }

    /// When Apple Ads came back, each failing name was asked again at its own next retry,
    /// up to a minute apart, and a record got a late version per name (two or three for
    /// most records of an outage): the first answer now wakes them all, and the record
    /// waits for the others.
    @Test func namesFailingInAnOutageComeBackTogetherInOneLateVersion() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            var options = options(port: port, wait: .milliseconds(50))
            options.backoffInitial = .milliseconds(100)
            let enricher = try await makeEnricher(options, env: env)
            let versions = Mutex<[AttributionRecord]>([])
            let collector = Task { for await batch in enricher.lateRecords { versions.withLock { $0 += batch } } }
            defer { collector.cancel() }
            _ = await enricher.enrich([record(keyword: 7)])
            fake.down.withLock { $0 = true }
            var waiting = record(keyword: 71)
            waiting.adGroupID = 71_001
            waiting.campaignID = 71_002
            #expect(await enricher.enrich([waiting]).first?.keyword == nil)
            // Long enough for the retries to spread out (100 ms doubling).
            try await Task.sleep(for: .milliseconds(1500))
            fake.down.withLock { $0 = false }
            let id = waiting.recordID
            #expect(
                try await env.eventually {
                    versions.withLock { $0.contains { $0.recordID == id && $0.campaignName != nil } }
                })
            // Nothing follows it.
            try await Task.sleep(for: .milliseconds(300))
            let late = versions.withLock { $0 }.filter { $0.recordID == id }
            #expect(late.count == 1, "\(late.map { [$0.keyword, $0.adGroupName, $0.campaignName] })")
            #expect(late.first?.keyword != nil && late.first?.adGroupName != nil && late.first?.campaignName != nil)
        }
    }

    /// A name failing in an outage is asked again as soon as Apple Ads answers one request,
    /// not at its own next retry (up to a minute later): here retries never wake on their own.
    @Test(.timeLimit(.minutes(2)))
    func aFailingNameIsAskedAgainAsSoonAsAppleAdsAnswersAgain() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            var options = options(port: port, wait: .milliseconds(50))
            options.backoffInitial = .milliseconds(100)
            let enricher = try await makeEnricher(
                options, env: env, sleep: { _ in try await Task.sleep(for: .seconds(3600)) })
            let versions = Mutex<[AttributionRecord]>([])
            let collector = Task { for await batch in enricher.lateRecords { versions.withLock { $0 += batch } } }
            defer { collector.cancel() }
            _ = await enricher.enrich([record(keyword: 7)])
            fake.down.withLock { $0 = true }
            let waiting = record(keyword: 72)
            #expect(await enricher.enrich([waiting]).first?.keyword == nil)
            fake.down.withLock { $0 = false }
            // New names, until one is sent as the probe and answered. Whether a new name is
            // answered within the 50 ms wait depends on the machine's load; the failing
            // name's late version does not, as its own retries never wake.
            var next: Int64 = 1000
            let id = waiting.recordID
            #expect(
                try await env.eventually(seconds: 90) {
                    next += 1
                    _ = await enricher.enrich([record(keyword: next)])
                    return versions.withLock { $0.contains { $0.recordID == id && $0.keyword != nil } }
                })
        }
    }

    /// An outage of Apple Ads held every record its full `wait` (a second by default), one
    /// after another: the AdServices resolver settled one token a second. A name whose
    /// fetch has failed is not waited for; the fetch goes on retrying in the background.
    @Test(.timeLimit(.minutes(1)))
    func recordsDoNotWaitForANameWhoseLookupIsFailing() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            // A wait of an hour, and retries that sleep for real: only a name known to be
            // failing lets the records go before the test's limit.
            let enricher = try await makeEnricher(
                options(port: port, wait: .seconds(3600)), env: env,
                sleep: { _ in try await Task.sleep(for: .seconds(3600)) })
            fake.down.withLock { $0 = true }
            let first = await enricher.enrich([record(keyword: 21)])
            #expect(first.first?.keywordID == 21 && first.first?.keyword == nil)
            let again = await enricher.enrich([record(keyword: 21), record(keyword: 21)])
            #expect(again.allSatisfy { $0.keyword == nil && $0.campaignName == nil })
        }
    }

    /// A bulk query's names are done when it returns, not when the group's last key is:
    /// one key Apple kept failing held the others' late versions up to an hour.
    @Test(.timeLimit(.minutes(1)))
    func aGroupsKeysFinishAsTheirNamesArriveNotWithTheSlowestOne() async throws {
        let fetches = NameFetches()
        let completed = Mutex<[String]>([])
        let entry = KeywordNameEntry(name: "found", matchType: nil, fetchedAt: Date())
        await fetches.startGroup(
            ["keyword:1", "keyword:2"],
            { keys, done in
                await done("keyword:1", entry)
                // The other key's lookup goes on (Apple failing, retried for an hour).
                try? await Task.sleep(for: .seconds(3600))
                return [:]
            },
            then: { key in completed.withLock { $0.append(key) } })
        while completed.withLock({ $0 }).isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(completed.withLock { $0 } == ["keyword:1"])
        #expect(await !fetches.isRunning("keyword:1"))
        #expect(await fetches.isRunning("keyword:2"))
        #expect(await fetches.wait("keyword:1", until: .now) == entry)
    }

    /// A 200 without the entity, or an account list without accounts, is no verdict on an
    /// id: cached as "unknown", it hid names for an hour, and for the process's life.
    @Test func anAnswerWithoutItsEntityIsAnErrorNotAnUnknownID() async throws {
        try await withSource { fake, source in
            fake.noAccounts.withLock { $0 = true }
            await #expect(throws: (any Error).self) {
                _ = try await source.campaignName(id: 542_370_539, orgID: FakeAppleAds.orgID)
            }
            // Not kept: the next lookup asks again, and finds the account.
            fake.noAccounts.withLock { $0 = false }
            let found = try await source.campaignName(id: 542_370_539, orgID: FakeAppleAds.orgID)
            #expect(found == "campaign 542370539")
            fake.malformed.withLock { $0 = true }
            await #expect(throws: (any Error).self) {
                _ = try await source.keyword(id: 31, adGroupID: nil, campaignID: nil, orgID: FakeAppleAds.orgID)
            }
            await #expect(throws: (any Error).self) {
                _ = try await source.adGroupName(id: 32, campaignID: nil, orgID: FakeAppleAds.orgID)
            }
            // An id that is not the credentials' to read is unknown to them, not an outage.
            fake.malformed.withLock { $0 = false }
            let notOurs = try await source.campaignName(id: 403_403, orgID: FakeAppleAds.orgID)
            #expect(notOurs == nil)
        }
    }

    /// A revoked key: every name asking again, each with a fresh token, sent Apple hundreds
    /// of requests a minute. One 401 with a new token stops every lookup for a minute.
    @Test func credentialsRefusedWithANewTokenStopEveryLookupForAWhile() async throws {
        try await withSource { fake, source in
            fake.refuseTokens.withLock { $0 = true }
            await #expect(throws: (any Error).self) {
                _ = try await source.campaignName(id: 1, orgID: FakeAppleAds.orgID)
            }
            let requests = fake.requests
            let tokens = fake.tokenRequests
            for id: Int64 in 2...20 {
                await #expect(throws: (any Error).self) {
                    _ = try await source.campaignName(id: id, orgID: FakeAppleAds.orgID)
                }
            }
            #expect(fake.requests == requests)
            #expect(fake.tokenRequests == tokens)
        }
    }

    /// A revoked key is refused at the token endpoint (`400 invalid_client`) before any
    /// `401`: each name and each of its retries asked it again, hundreds a minute.
    @Test func aClientTheTokenEndpointRefusesStopsEveryLookupForAWhile() async throws {
        try await withSource { fake, source in
            fake.refuseClient.withLock { $0 = true }
            for id: Int64 in 1...20 {
                await #expect(throws: (any Error).self) {
                    _ = try await source.campaignName(id: id, orgID: FakeAppleAds.orgID)
                }
            }
            #expect(fake.clientRefusals.withLock { $0 } == 1)
            #expect(fake.requests == 0)
        }
    }

    /// Only `invalid_client` refuses the client: another 400 (a proxy's, a grant type
    /// refused) is said with its OAuth error, and taken as an outage, not a revoked key.
    @Test func aTokenRequestRefusedForAnotherReasonIsNotARefusedClient() async throws {
        // The outage's pause a minute long, however slowly this machine runs the test.
        try await withSource(outagePause: .seconds(60)) { fake, source in
            fake.badTokenRequest.withLock { $0 = "unsupported_grant_type" }
            do {
                _ = try await source.campaignName(id: 1, orgID: FakeAppleAds.orgID)
                Issue.record("expected the token request to fail")
            } catch {
                #expect("\(error)".contains("answered 400 (unsupported_grant_type)"), "\(error)")
                #expect(!"\(error)".contains("refused the credentials"))
            }
            // Taken as an outage, asked again after its pause, not as a revoked key.
            do {
                _ = try await source.campaignName(id: 2, orgID: FakeAppleAds.orgID)
            } catch {
                #expect("\(error)".contains("Apple Ads is failing"), "\(error)")
            }
        }
    }

    /// Apple's token endpoint failing is an outage to the gate: rather than every name
    /// asking it on its own retries, one probe finds out.
    @Test func anOutageOfTheTokenEndpointIsAskedByOneRequestAtATime() async throws {
        // The next probe a minute away, however slowly this machine runs the loop.
        try await withSource(outagePause: .seconds(60)) { fake, source in
            fake.tokenDown.withLock { $0 = true }
            for id: Int64 in 1...20 {
                await #expect(throws: (any Error).self) {
                    _ = try await source.campaignName(id: id, orgID: FakeAppleAds.orgID)
                }
            }
            // Every other name is refused without asking.
            #expect(fake.tokenFailures.withLock { $0 } == 1)
            #expect(fake.requests == 0)
        }
    }

    /// A token renewed ahead of its end, whose renewal fails, is not dropped with minutes
    /// left, which would fail every lookup until Apple's sign-in is back.
    @Test func aTokenWhoseRenewalFailsServesUntilItsEnd() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // Now, for the client secret Apple checks; moved on by hand.
        let clock = Mutex(Date())
        let lines = Mutex<[String]>([])
        let logger = capturing { line in lines.withLock { $0.append(line) } }
        try await withFake { fake, port in
            let enricher = try await KeywordLookupPlugin.make(
                options: options(port: port), context: EnricherContext(storagePath: env.databasePath, logger: logger),
                sleep: { _ in }, now: { clock.withLock { $0 } })
            _ = try await enricher.source.campaignName(id: 1, orgID: FakeAppleAds.orgID)
            #expect(fake.tokenRequests == 1)
            // 58 minutes on: past the 5-minute renewal margin, two minutes before the end.
            clock.withLock { $0 = $0.addingTimeInterval(58 * 60) }
            fake.tokenDown.withLock { $0 = true }
            #expect(try await enricher.source.campaignName(id: 2, orgID: FakeAppleAds.orgID) == "campaign 2")
            #expect(try await env.eventually { fake.tokenFailures.withLock { $0 } == 1 })
            // Nobody waits on the renewal: it says so itself (a revoked key shows now, not
            // at the token's end).
            #expect(
                try await env.eventually {
                    lines.withLock {
                        $0.contains { $0.contains("Apple Ads token renewal failed") && $0.contains("503") }
                    }
                })
            // A renewal that hangs must not hold every lookup for its 30 s; the token
            // serves meanwhile, and a lookup is answered within that, however loaded the machine.
            fake.tokenHangs.withLock { $0 = true }
            clock.withLock { $0 = $0.addingTimeInterval(40) }
            let named = try await withThrowingTaskGroup(of: String?.self) { group in
                group.addTask { try await enricher.source.campaignName(id: 4, orgID: FakeAppleAds.orgID) }
                group.addTask {
                    try await Task.sleep(for: .seconds(25))
                    return "timed out"
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            #expect(named == "campaign 4")
            fake.tokenHangs.withLock { $0 = false }
            // Past its end, there is no token to use.
            clock.withLock { $0 = $0.addingTimeInterval(3 * 60) }
            await #expect(throws: (any Error).self) {
                _ = try await enricher.source.campaignName(id: 3, orgID: FakeAppleAds.orgID)
            }
        }
    }

    /// A token of five minutes or less was fetched anew for every request.
    @Test func aShortLivedTokenServesUntilHalfItsLife() async throws {
        try await withSource { fake, source in
            fake.tokenLifetime.withLock { $0 = 240 }
            for id: Int64 in 1...3 { _ = try await source.campaignName(id: id, orgID: FakeAppleAds.orgID) }
            #expect(fake.tokenRequests == 1)
        }
    }

    /// A name no record could hold (from a broken or hostile `endpoint`) went into every
    /// record with the id for the cache's life: 3 MB keywords, empty ones, control characters.
    @Test func aNameNoRecordCouldHoldIsAnErrorNotAName() async throws {
        try await withSource { fake, source in
            let long = "\"" + String(repeating: "k", count: 2000) + "\""
            for name in [#""""#, long, #""calm\u0007app""#] {
                fake.nameOverride.withLock { $0 = name }
                await #expect(throws: (any Error).self, "\(name.prefix(20))") {
                    _ = try await source.campaignName(id: 7, orgID: FakeAppleAds.orgID)
                }
            }
            fake.nameOverride.withLock { $0 = #""東京 calm""# }
            let named = try await source.campaignName(id: 7, orgID: FakeAppleAds.orgID)
            #expect(named == "東京 calm")
        }
    }

    /// v5 finds an entity by org (and campaign and ad group): a record without them was
    /// cached as "unknown" without asking, and the name hidden from every record that had
    /// them for `unknown_ttl_minutes`.
    @Test func aV5RecordWithoutItsOrgAsksNothingAndHidesNoName() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(v5Options(port: port), env: env, sleep: { _ in })
            var orgless = record(keyword: 77)
            orgless.orgID = nil
            let bare = try #require(await enricher.enrich([orgless]).first)
            #expect(bare.keyword == nil && bare.campaignName == nil)
            #expect(fake.count("v5-keyword") == 0 && fake.count("v5-campaign") == 0)
            // Nor owed its names: it was resumed at every start for a week, asking nothing.
            #expect(try owedNames(env) == 0)
            let named = try #require(await enricher.enrich([record(keyword: 77)]).first)
            #expect(named.keyword == "v5 keyword 77" && named.campaignName == "v5 campaign 542370539")
        }
    }

    /// A 429's `Retry-After` is the client's quota, not one request's: the next lookup waits too.
    @Test func aRetryAfterHoldsEveryLookup() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let pauses = Mutex<[Duration]>([])
        try await withFake { fake, port in
            let enricher = try await makeEnricher(
                options(port: port), env: env, sleep: { duration in pauses.withLock { $0.append(duration) } })
            let source = enricher.source
            #expect(try await source.campaignName(id: 1, orgID: FakeAppleAds.orgID) == "campaign 1")
            fake.tooMany.withLock { $0 = 1 }
            let refused = ContinuousClock.now
            #expect(try await source.campaignName(id: 2, orgID: FakeAppleAds.orgID) == "campaign 2")
            let before = pauses.withLock { $0.count }
            #expect(try await source.campaignName(id: 3, orgID: FakeAppleAds.orgID) == "campaign 3")
            // What is left of the 7 s the 429 asked for, however long the calls took.
            let elapsed = ContinuousClock.now - refused
            let waited = pauses.withLock { Array($0.dropFirst(before)) }
            #expect(waited.contains { $0 >= .seconds(7) - elapsed && $0 <= .seconds(7) }, "\(waited) \(elapsed)")
        }
    }

    /// While Apple throttles (a `429`'s `Retry-After`), a record needing a name not cached
    /// goes on at once, not after `wait_ms`, as during an outage; the lookup waits the hold
    /// out and the name still comes.
    @Test func aRecordDoesNotWaitForANameWhileAppleThrottles() async throws {
        try await expectNoWaitWhileThrottled(after: [record(keyword: 1)], [record(keyword: 2)]) {
            $0.keyword == "keyword 2"
        }
    }

    /// Lookups waiting for a turn (requests go a few at a time) count as failing too once
    /// Apple throttles, so records needing many names not cached go on at once as well.
    @Test func recordsWaitingForQueuedLookupsGoOnWhileAppleThrottles() async throws {
        // Twelve campaigns and ad groups: more lookups than go at once.
        let records = (0..<12).map { index -> AttributionRecord in
            var record = record(keyword: 100 + Int64(index))
            record.campaignID = 700 + Int64(index)
            record.adGroupID = 800 + Int64(index)
            return record
        }
        try await expectNoWaitWhileThrottled(after: [], records) { $0.campaignName == "campaign \($0.campaignID!)" }
    }

    /// A record whose three names were held by Apple's throttling gets one late version with
    /// all three once the pause is over, not one per name.
    @Test func aRecordHeldByThrottlingGetsOneLateVersionWithAllItsNames() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            // Apple's pause is real here (2 s), as the gate counts it.
            let enricher = try await makeEnricher(options(port: port, wait: .seconds(60)), env: env)
            let versions = Mutex<[AttributionRecord]>([])
            let collector = Task { for await batch in enricher.lateRecords { versions.withLock { $0 += batch } } }
            defer { collector.cancel() }
            _ = await enricher.enrich([record(keyword: 7)])
            fake.retryAfter.withLock { $0 = "2" }
            fake.tooMany.withLock { $0 = 1 }
            var waiting = record(keyword: 73)
            waiting.adGroupID = 73_001
            waiting.campaignID = 73_002
            let first = try #require(await enricher.enrich([waiting]).first)
            func named(_ record: AttributionRecord) -> Bool {
                record.keyword != nil && record.adGroupName != nil && record.campaignName != nil
            }
            // A machine slow enough that the pause ended before the record was enriched
            // gets the names at once; otherwise they come together, once.
            guard !named(first) else { return }
            let id = waiting.recordID
            #expect(try await env.eventually { versions.withLock { $0.contains { $0.recordID == id } } })
            try await Task.sleep(for: .milliseconds(500))
            let late = versions.withLock { $0 }.filter { $0.recordID == id }
            #expect(
                late.count == 1 && late.allSatisfy(named),
                "\(late.map { [$0.keyword, $0.adGroupName, $0.campaignName] })")
        }
    }

    /// Enriches `records` (after `warmUp`) while Apple holds every request, its pause lasting
    /// until the test ends it: they come back at once without names, and with them
    /// (`named`) once the hold is over.
    func expectNoWaitWhileThrottled(
        after warmUp: [AttributionRecord], _ records: [AttributionRecord],
        named: @escaping @Sendable (AttributionRecord) -> Bool
    ) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let holdEnded = Mutex(false)
        // Records that waited out the hold come back at `wait` at the soonest, so `wait` is
        // the bound: on a loaded machine each of the enricher's awaits queues behind other
        // tests' jobs, which a shorter bound mistook for waiting.
        let wait = Duration.seconds(120)
        try await withFake { fake, port in
            let enricher = try await makeEnricher(
                options(port: port, wait: wait), env: env,
                sleep: { _ in
                    while !holdEnded.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
                })
            _ = await enricher.enrich(warmUp)
            // Longer than any test, however slow the machine: the pause is Apple's, in real time.
            fake.retryAfter.withLock { $0 = "600" }
            fake.tooMany.withLock { $0 = 1 }
            let started = ContinuousClock.now
            let enriched = await enricher.enrich(records)
            #expect(ContinuousClock.now - started < wait, "records waited out the hold")
            #expect(!enriched.contains(where: named))
            holdEnded.withLock { $0 = true }
            #expect(try await env.eventually { await enricher.enrich(records).allSatisfy(named) })
        }
    }

    /// A name past its TTL that Apple cannot renew in time is still the record's name.
    @Test func aStaleNameServesWhileAppleAdsIsDown() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withFake { fake, port in
            let enricher = try await makeEnricher(
                options(port: port, wait: .milliseconds(200)), env: env, sleep: { _ in })
            let old = Date().addingTimeInterval(-30 * 86_400)
            try await enricher.cache.store(
                AppleAdsNameKey.keyword(41), .init(name: "old name", matchType: "EXACT", fetchedAt: old))
            fake.down.withLock { $0 = true }
            let records = await enricher.enrich([record(keyword: 41)])
            #expect(records.first?.keyword == "old name")
        }
    }

    /// `slow`: Apple Ads answers after the wait; `down`: it fails until it is back.
    /// A gateway asking the fake AdServices at `applePort` and the fake Apple Ads at `adsPort`.
    func keywordGateway(_ env: TestEnvironment, applePort: Int, adsPort: Int, waitMs: Int) throws
        -> GatewayConfiguration
    {
        try ConfigLoader.parse(
            yaml: keywordYAML(env, applePort: applePort, adsPort: adsPort, waitMs: waitMs), file: "keywords.yaml",
            environment: ["ADS_PRIVATE_KEY": key.pemRepresentation], registry: .builtIn)
    }

    /// The configuration of ``keywordGateway(_:applePort:adsPort:waitMs:)``, without the
    /// enricher unless `lookup`.
    func keywordYAML(_ env: TestEnvironment, applePort: Int, adsPort: Int, waitMs: Int, lookup: Bool = true) -> String {
        let enrichers = """
            enrichers:
              keyword_lookup:
                client_id: \(FakeAppleAds.clientID)
                team_id: \(FakeAppleAds.teamID)
                key_id: \(FakeAppleAds.keyID)
                private_key: "${ADS_PRIVATE_KEY}"
                token_endpoint: http://127.0.0.1:\(adsPort)/auth/oauth2/token
                endpoint: http://127.0.0.1:\(adsPort)/v1
                wait_ms: \(waitMs)
                backoff_initial_ms: 20

            """
        return """
            server: { host: 127.0.0.1, port: 0, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers:
              adservices: { endpoint: "http://127.0.0.1:\(applePort)/api/v1/", timeout_ms: 1500 }
            \(lookup ? enrichers : "")sinks:
              local: { type: sqlite, backoff_initial_ms: 10, backoff_max_ms: 100 }
            """
    }

    /// The fake Apple Ads, and a gateway's configuration asking it and a fake AdServices
    /// (every token answered with keyword 87675432).
    func withKeywordGateway(
        _ env: TestEnvironment, waitMs: Int,
        _ body: @escaping @Sendable (FakeAppleAds, GatewayConfiguration) async throws -> Void
    ) async throws {
        let apple = FakeAppleAdServices(fallback: .attributed(keywordID: 87_675_432))
        try await withFake { fake, adsPort in
            try await Application(
                router: apple.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))
            )
            .test(.live) { appleClient in
                try await body(
                    fake,
                    try keywordGateway(env, applePort: try #require(appleClient.port), adsPort: adsPort, waitMs: waitMs)
                )
            }
        }
    }

    /// Whether the SQLite sink's one row has all three names.
    func named(_ env: TestEnvironment) throws -> Bool {
        try DatabaseQueue(path: env.databasePath).read { db in
            try Bool.fetchOne(
                db,
                sql: """
                    SELECT keyword IS NOT NULL AND ad_group_name IS NOT NULL AND campaign_name IS NOT NULL
                    FROM attribution_records
                    """) ?? false
        }
    }

    /// Answers each kind of name when the test releases it.
    final class GatedNames: AppleAdsNameSource, Sendable {
        private let released = Mutex<Set<String>>([])

        func release(_ kind: String) { released.withLock { _ = $0.insert(kind) } }

        private func answer(_ kind: String, _ name: String) async -> String {
            while !released.withLock({ $0.contains(kind) }) { try? await Task.sleep(for: .milliseconds(5)) }
            return name
        }

        func keywords(ids: [Int64], orgID: Int64?) async throws -> [Int64: (text: String, matchType: String?)]? { nil }
        func keyword(id: Int64, adGroupID: Int64?, campaignID: Int64?, orgID: Int64?) async throws -> (
            text: String, matchType: String?
        )? {
            (await answer("keyword", "calm app"), "EXACT")
        }
        func adGroupName(id: Int64, campaignID: Int64?, orgID: Int64?) async throws -> String? {
            await answer("adgroup", "Exact - Core")
        }
        func campaignName(id: Int64, orgID: Int64?) async throws -> String? { await answer("campaign", "US Search") }
    }

    /// Three names arriving one after another made three late versions, each delivered
    /// again to every sink (four deliveries of one install to a webhook, three Mixpanel
    /// `$set`s): the record now waits for the names still on their way.
    @Test func namesArrivingOneByOneMakeOneLateVersion() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let source = GatedNames()
        let enricher = KeywordLookupEnricher(
            source: source, cache: try SQLiteKeywordNames(path: env.databasePath), wait: .milliseconds(10), ttl: 3600,
            unknownTTL: 3600, logger: Logger(label: "test"))
        let versions = Mutex<[AttributionRecord]>([])
        let collector = Task { for await batch in enricher.lateRecords { versions.withLock { $0 += batch } } }
        defer { collector.cancel() }
        let record = record(keyword: 31)
        #expect(await enricher.enrich([record]).first?.keyword == nil)
        for (kind, key) in [
            ("keyword", AppleAdsNameKey.keyword(31)), ("adgroup", AppleAdsNameKey.adGroup(542_317_095)),
        ] {
            source.release(kind)
            // Handled: its records no longer wait under it.
            #expect(try await env.eventually { !enricher.isWaiting(for: key) })
        }
        #expect(versions.withLock { $0.isEmpty })
        source.release("campaign")
        #expect(try await env.eventually { versions.withLock { !$0.isEmpty } })
        let late = try #require(versions.withLock { $0.first })
        #expect(late.keyword == "calm app" && late.adGroupName == "Exact - Core" && late.campaignName == "US Search")
        #expect(versions.withLock { $0.count } == 1)
    }

    /// Records the store holds as still owed a name.
    func owedNames(_ env: TestEnvironment) throws -> Int {
        try DatabaseQueue(path: env.databasePath).read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM apple_ads_names_owed") ?? -1
        }
    }

    /// A deploy during an Apple Ads outage: the names a record went on without were owed
    /// only in memory, and the restart lost them; the record stayed nameless in every sink.
    @Test func namesOwedWhenTheGatewayStoppedFollowAfterTheRestart() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        try await withKeywordGateway(env, waitMs: 100) { fake, config in
            fake.down.withLock { $0 = true }
            try await GatewayHTTP.makeApplication(gateway: try await Gateway.build(configuration: config)).test(.live) {
                client in
                let body = #"{"token": "QUJDREVG", "app_id": "1234567890", "app_user_id": "u-1"}"#
                let response = try await client.execute(
                    uri: "/v1/adservices", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .accepted)
                #expect(try await env.eventually { try env.deliveredRecordIDs().count == 1 })
                #expect(try !named(env))
            }
            fake.down.withLock { $0 = false }
            try await GatewayHTTP.makeApplication(gateway: try await Gateway.build(configuration: config)).test(.live) {
                (_: TestClientProtocol) async throws in
                #expect(try await env.eventually { try named(env) })
                #expect(try env.deliveredRecordIDs().count == 1)
                // Nothing is owed any more (let go just after the version is stored).
                #expect(try await env.eventually { try owedNames(env) == 0 })
            }
        }
    }

    @Test(arguments: ["prompt", "slow", "down"])
    func anAdServicesRecordReachesTheSinkWithKeywordNames(apple adsState: String) async throws {
        let late = adsState != "prompt"
        let env = try TestEnvironment()
        defer { env.remove() }
        // Prompt: the longest wait allowed, so that a loaded machine cannot make the names late.
        try await withKeywordGateway(env, waitMs: late ? 100 : 60000) { fake, config in
            let gateway = try await Gateway.build(configuration: config)
            // Late: Apple Ads answers after the record went on with its ids; the names
            // follow as a second version of the same record.
            if adsState == "slow" { fake.delay.withLock { $0 = .seconds(1) } }
            if adsState == "down" { fake.down.withLock { $0 = true } }
            try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                let body = #"{"token": "QUJDREVG", "app_id": "1234567890", "app_user_id": "u-1"}"#
                let response = try await client.execute(
                    uri: "/v1/adservices", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .accepted)
                #expect(try await env.eventually { try env.deliveredRecordIDs().count == 1 })
                if adsState == "down" {
                    // Delivered with its ids while Apple Ads is down…
                    #expect(try !named(env))
                    fake.down.withLock { $0 = false }
                }
                if late {
                    // …and the names follow as a second version of the same record.
                    #expect(try await env.eventually { try named(env) })
                    #expect(try env.deliveredRecordIDs().count == 1)
                }
                let row = try #require(
                    try DatabaseQueue(path: env.databasePath).read { db in
                        try Row.fetchOne(
                            db,
                            sql:
                                "SELECT keyword, keyword_match_type, ad_group_name, campaign_name, keyword_id FROM attribution_records"
                        )
                    })
                #expect(row["keyword"] as String? == "keyword 87675432")
                #expect(row["keyword_match_type"] as String? == "EXACT")
                #expect(row["ad_group_name"] as String? == "adgroup 542317095")
                #expect(row["campaign_name"] as String? == "campaign 542370539")

                // Three names (keyword, ad group, campaign) were looked up: in time, or late.
                let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                let outcome = late ? "late" : "fetched"
                #expect(
                    metrics.contains(
                        #"gateway_enrichment_lookups_total{enricher="keyword_lookup",outcome="\#(outcome)"} 3"#))
                // KeywordNamesLate takes rate() of `late`: there from the start, at zero.
                #expect(
                    metrics.contains(
                        #"gateway_enrichment_lookups_total{enricher="keyword_lookup",outcome="unknown"} 0"#))
                #expect(metrics.contains(#"gateway_delivery_latency_seconds_count{sink="local"}"#))
                // Buckets reach a day: an outage's deliveries are not all in +Inf.
                #expect(metrics.contains(#"gateway_delivery_latency_seconds_bucket{sink="local",le="86400.0"}"#))
            }
        }
    }

    /// `keyword_lookup` enabled by a reload enriches the next record, and a name that comes
    /// after the wait follows as a late version, written by the writer the reload started.
    @Test func aKeywordLookupEnabledByAReloadNamesTheNextRecordLate() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices(fallback: .attributed(keywordID: 87_675_432))
        let file = env.directory.appendingPathComponent("keywords.yaml").path
        @Sendable func rows(named: Bool) throws -> Int {
            try DatabaseQueue(path: env.databasePath).read { db in
                try Int.fetchOne(
                    db,
                    sql: "SELECT COUNT(*) FROM attribution_records WHERE (keyword IS NOT NULL) = ?",
                    arguments: [named]) ?? 0
            }
        }
        try await withFake { fake, adsPort in
            try await Application(
                router: apple.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0))
            )
            .test(.live) { appleClient in
                let applePort = try #require(appleClient.port)
                try keywordYAML(env, applePort: applePort, adsPort: adsPort, waitMs: 100, lookup: false)
                    .write(toFile: file, atomically: true, encoding: .utf8)
                fake.delay.withLock { $0 = .seconds(1) }
                try await withReloadingGateway(
                    file: file, environment: ["ADS_PRIVATE_KEY": key.pemRepresentation]
                ) { client, _, reload in
                    func post(_ user: String) async throws -> HTTPResponse.Status {
                        let body = #"{"token": "\#(user)", "app_id": "1234567890", "app_user_id": "\#(user)"}"#
                        return try await client.execute(
                            uri: "/v1/adservices", method: .post, body: ByteBuffer(string: body)
                        ).status
                    }
                    #expect(try await post("QUJDREVG") == .accepted)
                    #expect(try await env.eventually { try rows(named: false) == 1 })
                    try await reload(keywordYAML(env, applePort: applePort, adsPort: adsPort, waitMs: 100))
                    #expect(try await post("R0hJSktM") == .accepted)
                    #expect(try await env.eventually { try rows(named: true) == 1 })
                    #expect(try rows(named: false) == 1)
                    #expect(fake.count("keyword-query") + fake.count("keyword") >= 1)
                }
            }
        }
    }

    /// As `conversion_model`: `serve --config /etc/gateway/config.yaml` started from
    /// anywhere finds `keys/ads.pem` beside its config.
    @Test func thePrivateKeyFileIsFoundRelativeToTheConfigFile() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: folder.appendingPathComponent("keys"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try P256.Signing.PrivateKey().pemRepresentation.write(
            to: folder.appendingPathComponent("keys/ads.pem"), atomically: true, encoding: .utf8)
        let config = folder.appendingPathComponent("config.yaml")
        try """
        enrichers:
          keyword_lookup: { client_id: SEARCHADS.c, team_id: SEARCHADS.t, key_id: k, private_key_file: keys/ads.pem }
        """.write(to: config, atomically: true, encoding: .utf8)
        #expect(FileManager.default.currentDirectoryPath != folder.path)
        let loaded = try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn)
        #expect(loaded.enrichers.count == 1)

        // `openssl ecparam -genkey -out` writes the curve's parameters before the key: the
        // key is still found, and a text without any key says so.
        let file = folder.appendingPathComponent("keys/ads.pem")
        func loads(_ pem: String) throws -> Bool {
            try pem.write(to: file, atomically: true, encoding: .utf8)
            return try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn).enrichers.count == 1
        }
        func refusal(_ pem: String) throws -> String {
            try pem.write(to: file, atomically: true, encoding: .utf8)
            do {
                _ = try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn)
                return "accepted"
            } catch {
                return error.issues.map(\.message).joined(separator: "; ")
            }
        }
        let parameters = "-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"
        #expect(try loads(parameters + P256.Signing.PrivateKey().pemRepresentation))
        // The first key in the file, whatever its label; indented as pasted into YAML.
        let later = P384.Signing.PrivateKey().pemRepresentation.replacingOccurrences(
            of: "PRIVATE KEY", with: "EC PRIVATE KEY")
        let indented = P256.Signing.PrivateKey().pemRepresentation.split(separator: "\n").map { "    " + $0 }.joined(
            separator: "\n")
        #expect(try loads(indented + "\n" + later))
        let encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n"
        #expect(try refusal(encrypted).contains("is encrypted"))
        // A usable key first is the one read, whatever follows it.
        #expect(try loads(P256.Signing.PrivateKey().pemRepresentation + "\n" + encrypted))
        #expect(try refusal(parameters).contains("holds no PEM block BEGIN EC PRIVATE KEY"))
        // Bytes that are not UTF-8 beside the key, and a byte-order mark, do not keep the
        // key from being read; a DER key is told to be converted.
        let key = P256.Signing.PrivateKey()
        try
            (Data("# cl\u{E9} d'Apple\n".utf8.map { $0 == 0xC3 ? 0xE9 : $0 }.filter { $0 != 0xA9 })
            + Data(key.pemRepresentation.utf8))
            .write(to: file)
        #expect(try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn).enrichers.count == 1)
        #expect(try loads("\u{FEFF}" + key.pemRepresentation))
        try key.derRepresentation.write(to: file)
        let der = try { () throws -> String in
            do {
                _ = try ConfigLoader.load(path: config.path, environment: [:], registry: .builtIn)
                return "accepted"
            } catch let error as ConfigError {
                return error.issues.map(\.message).joined(separator: "; ")
            }
        }()
        #expect(der.contains("is binary (DER?)"), "\(der)")
    }

    @Test func aKeywordReportImportFillsTheCacheAndReportsBadLines() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let csv = #"""
            Campaign Name,Campaign ID,Ad Group Name,Ad Group ID,Keyword,Match Type,Keyword ID,Notes
            "US Search - Meditation, Core",542370539,Exact - Core,542317095,meditation app,Exact,87675432,"two
            lines"
            US Search - Meditation,542370539,Broad,542317096,"sleep ""sounds""",Broad,87675433
            US Search - Meditation,542370539,Broad,542317096,calm,Broad,abc
            US Search - Meditation,542370539,Broad,542317096,,Broad,87675434
            US Search - Meditation,542370539,Broad,542317096,LONG,Broad,87675435

            """#.replacingOccurrences(of: "LONG", with: String(repeating: "k", count: 2_000))
        let file = env.directory.appendingPathComponent("keywords.csv").path
        try csv.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await CommandLineTests().run(["keywords", "import", "--config", config, file])
        #expect(result.status == 1)
        // Distinct ids, not rows: the campaign of every row is one campaign.
        #expect(result.stdout.contains("2 keywords, 2 ad groups, 1 campaigns; 3 rows rejected"), "\(result.stdout)")
        // Lines of the file, counted past the line break inside a quoted cell.
        #expect(result.stdout.contains("line 5: keyword_id 'abc' is not a positive integer"), "\(result.stdout)")
        #expect(result.stdout.contains("line 6: keyword is empty"))
        // A name is held to the length a record's text is.
        #expect(result.stdout.contains("line 7: keyword 'kkkk"), "\(result.stdout)")
        #expect(result.stdout.contains("is longer than 1024 characters"), "\(result.stdout)")
        // The campaign renamed between two rows is named with both lines, not replaced silently.
        #expect(result.stdout.contains("1 ids named differently on two lines"), "\(result.stdout)")
        #expect(result.stdout.contains("campaign 542370539: line 2, then line 4"), "\(result.stdout)")

        // The enricher finds them without asking Apple.
        let enriched = try await enrichedFromImport(keyword: 87_675_433, adGroup: 542_317_096, env: env)
        #expect(enriched.keyword == #"sleep "sounds""#)
        #expect(enriched.keywordMatchType == "BROAD")
        #expect(enriched.adGroupName == "Broad")
        // A later row for the same campaign wins, as a newer export would.
        #expect(enriched.campaignName == "US Search - Meditation")
    }

    /// The UI's `--` for an id it has not, and the totals line some exports end with, are
    /// read as `import spend` reads them: an empty cell, and no row.
    @Test func aKeywordReportImportReadsTheUIsEmptyCellsAndSkipsItsTotalsLine() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let csv = """
            Campaign Name,Campaign ID,Ad Group Name,Ad Group ID,Keyword,Match Type,Keyword ID,Spend,Currency
            US Search,542370539,Broad,--,calm,Broad,87675436,1.00,USD
            Total,,,,,,,1.00,USD

            """
        let file = env.directory.appendingPathComponent("keywords.csv").path
        try csv.write(toFile: file, atomically: true, encoding: .utf8)
        let result = try await CommandLineTests().run(["keywords", "import", "--config", config, file])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("1 keywords, 0 ad groups, 1 campaigns; 0 rows rejected"), "\(result.stdout)")
    }

    /// A record of `keyword` in `adGroup` as the enricher names it from imported names
    /// alone: nothing listens on port 9, so Apple is never asked.
    func enrichedFromImport(keyword: Int64, adGroup: Int64, env: TestEnvironment) async throws -> AttributionRecord {
        var options = options(port: 9)
        options.wait = .milliseconds(50)
        let enricher = try await makeEnricher(options, env: env)
        var imported = record(keyword: keyword)
        imported.adGroupID = adGroup
        return try #require(await enricher.enrich([imported]).first)
    }

    /// Not only a comma-separated UTF-8 file with its header on line 1 is read: a report
    /// opening with its title and dates, one a spreadsheet saved with `;` (a locale whose
    /// decimal mark is the comma) or as "Unicode text" (UTF-16, tabs), or in Windows-1252
    /// (Excel's "CSV" on Windows) is read too.
    @Test(arguments: ["utf16-tabs", "utf16-no-bom-tabs", "utf16be-no-bom-tabs", "cp1252-semicolons", "utf8-bom-titles"])
    func aKeywordReportAsSpreadsheetsSaveItIsRead(_ form: String) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = try env.writeConfig()
        let separator = form.hasSuffix("tabs") ? "\t" : form.hasSuffix("semicolons") ? ";" : ","
        let lines = [
            "Keywords Report", "Date Range: 2026-11-01 - 2026-11-26", "",
            ["Campaign Name", "Campaign ID", "Ad Group Name", "Ad Group ID", "Keyword", "Match Type", "Keyword ID"]
                .joined(separator: separator),
            ["Été US", "542370539", "Exact", "542317095", "méditation", "Exact", "87675432"].joined(
                separator: separator),
        ]
        let text = lines.joined(separator: "\r\n") + "\r\n"
        let data: Data =
            switch form {
            case "utf16-tabs": Data([0xFF, 0xFE]) + text.data(using: .utf16LittleEndian)!
            // A title that begins with a character whose low byte is zero (Ā, U+0100).
            case "utf16-no-bom-tabs": ("Ā" + text).data(using: .utf16LittleEndian)!
            case "utf16be-no-bom-tabs": text.data(using: .utf16BigEndian)!
            case "cp1252-semicolons":
                // é is 0xE9 in Windows-1252, as in Latin-1.
                Data(text.unicodeScalars.map { UInt8($0.value) })
            default: Data([0xEF, 0xBB, 0xBF]) + Data(text.utf8)
            }
        let file = env.directory.appendingPathComponent("keywords.csv").path
        try data.write(to: URL(fileURLWithPath: file))
        let result = try await CommandLineTests().run(["keywords", "import", "--config", config, file])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("1 keywords, 1 ad groups, 1 campaigns; 0 rows rejected"), "\(result.stdout)")

        let enriched = try await enrichedFromImport(keyword: 87_675_432, adGroup: 542_317_095, env: env)
        #expect(enriched.keyword == "méditation")
        #expect(enriched.campaignName == "Été US")
    }
}
