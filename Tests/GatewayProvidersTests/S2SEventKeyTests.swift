import Foundation
import GatewayCore
import GatewayProviders
import Testing

/// How `/v1/events` tells a resend from a second event alike.
@Suite struct S2SEventKeyTests {
    static let body = Data(#"{"type":"event","name":"ad_watched","app_id":"1234567890","app_user_id":"u1"}"#.utf8)

    /// Two `ad_watched` events posted at once, with no `event_id` or timestamp, may arrive
    /// in one millisecond: the second must not be answered `duplicate` and lost.
    @Test func twoEventsAlikeWithNoTimeOfTheirOwnArrivingInOneMillisecondAreTwo() throws {
        let now = Date()
        let provider = S2SProvider()
        let first = try #require(try provider.normalize(IngestPayload(body: Self.body, receivedAt: now)).first)
        let second = try #require(try provider.normalize(IngestPayload(body: Self.body, receivedAt: now)).first)
        #expect(first.dedupeKey != second.dedupeKey)
        // With a time of its own, the same event sent twice is a resend.
        let timed = Data(
            #"{"type":"event","name":"ad_watched","app_id":"1234567890","app_user_id":"u1","timestamp":1700000000}"#
                .utf8)
        let sent = try provider.normalize(IngestPayload(body: timed, receivedAt: now))
        let resent = try provider.normalize(IngestPayload(body: timed, receivedAt: now.addingTimeInterval(5)))
        #expect(sent.map(\.dedupeKey) == resent.map(\.dedupeKey))
    }

    /// An import envelope's `received_at` is the event's fixed arrival: the same line
    /// imported again is the same record.
    @Test func anImportedEventWithAFixedArrivalKeepsOneKey() throws {
        let line = Data(
            #"{"received_at":"2025-03-01T00:00:00Z","payload":{"type":"event","name":"ad_watched","app_id":"1234567890","app_user_id":"u1"}}"#
                .utf8)
        let provider = S2SProvider()
        let first = try provider.normalize(HistoricalLine(line, now: Date()).payload)
        let again = try provider.normalize(HistoricalLine(line, now: Date()).payload)
        #expect(first.map(\.dedupeKey) == again.map(\.dedupeKey))
    }
}
