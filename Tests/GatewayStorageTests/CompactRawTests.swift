import Foundation
import GRDB
import GatewayCompactRaw
import GatewayCore
import GatewayStorage
import Testing

/// A record's raw payload is stored apart from its body, compressed, and comes back as it
/// was; rows written before that (the payload inside the body) are still read, and lose
/// their payload to retention as the new ones do.
@Suite struct CompactRawTests {
    static let iadPayload = #"""
        {"Version3.1":{"iad-adgroup-id":"542317100","iad-adgroup-name":"Exact","iad-attribution":"true",\#
        "iad-campaign-id":"542370541","iad-campaign-name":"US Search","iad-click-date":"2025-01-01T00:40:00Z",\#
        "iad-conversion-date":"2025-01-01T00:40:00Z","iad-conversion-type":"Download",\#
        "iad-country-or-region":"US","iad-keyword":"keyword 48","iad-keyword-id":"87000048",\#
        "iad-keyword-matchtype":"Exact","iad-org-id":"40669820","iad-org-name":"Mindful Apps Inc."},\#
        "app_id":"1234567890","app_user_id":"e2a214e8-bbe9-4675-9d52-490575ffc53d"}
        """#

    /// The body an iAd install with ``iadPayload`` is stored with.
    static let iadBody = Array(
        #"""
        {"ad_group_id":542317100,"ad_group_name":"Exact","app_user_id":"e2a214e8-bbe9-4675-9d52-490575ffc53d",\#
        "attributed":true,"campaign_id":542370541,"campaign_name":"US Search","click_date":"2025-01-01T00:40:00Z",\#
        "conversion_date":"2025-01-01T00:40:00Z","conversion_type":"Download","country_or_region":"US",\#
        "is_test":false,"keyword":"keyword 48","keyword_id":87000048,"keyword_match_type":"EXACT","kind":"install",\#
        "org_id":40669820,"org_name":"Mindful Apps Inc.","received_at":"2025-01-01T00:40:00Z","resolution":"resolved"}
        """#.utf8)

    @Test func aPayloadComesBackAsItWasAndSmaller() throws {
        for text in [Self.iadPayload, "{}", #"{"a":"\#(String(repeating: "é\u{0}x", count: 50_000))"}"#] {
            for body in [Self.iadBody, [], Array(String(repeating: "b", count: 20_000).utf8)] {
                let packed = CompactRaw.pack(Array(text.utf8), beside: body)
                #expect(try CompactRaw.unpackText(packed, beside: body) == Array(text.utf8))
            }
        }
        // The keys every iAd payload repeats are in the dictionary, and the body holds its values.
        let payload = Array(Self.iadPayload.utf8)
        let alone = CompactRaw.pack(payload, beside: [UInt8]())
        let besideBody = CompactRaw.pack(payload, beside: Self.iadBody)
        #expect(alone.count * 3 < payload.count)
        #expect(besideBody.count * 3 < alone.count * 2)
    }

    @Test func aValueThisVersionCannotReadIsAnErrorNotACrash() throws {
        let body = Self.iadBody
        let packed = CompactRaw.pack(Array(Self.iadPayload.utf8), beside: body)
        #expect(throws: CompactRaw.Unreadable.self) { try CompactRaw.unpackText([UInt8](), beside: body) }
        #expect(throws: CompactRaw.Unreadable.self) {
            try CompactRaw.unpackText([9] + packed.dropFirst(), beside: body)
        }
        #expect(throws: CompactRaw.Unreadable.self) {
            try CompactRaw.unpackText(packed.prefix(packed.count / 2), beside: body)
        }
        // A body changed by hand in the database no longer unpacks its payload into wrong bytes.
        let changed = Array(String(decoding: body, as: UTF8.self).replacing("542370541", with: "542370999").utf8)
        #expect(changed != body)
        #expect(throws: CompactRaw.Unreadable.self) { try CompactRaw.unpackText(packed, beside: changed) }
    }

    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("compact-\(UUID()).sqlite").path
    }

    /// The body leaves out the fields kept in columns, whatever they hold, and the reader
    /// puts them back from those columns.
    @Test func theBodyLeavesOutWhatTheColumnsHold() throws {
        var record = try install(at: 1_800_000_000)
        record.dedupeKey = #"iad:1:a "quoted", é\ and \#u{1}"#
        let stored = record.encoded().stored
        // `app_id`, first, takes the comma after it; the others the comma before them.
        #expect(
            stored.body
                == #"{"app_user_id":"u1","attributed":true,"is_test":false,"keyword":"meditation","kind":"install","#
                + #""received_at":"2027-01-15T08:00:00Z","resolution":"resolved"}"#)
        #expect(try Self.read(stored, of: record) == record)
        // What a quarantined record counts against its cap: its JSON, the payload compressed.
        let json = record.encoded()
        #expect(
            stored.size
                == json.json.count - (json.jsonText(of: "raw")?.utf8.count ?? 0) + (stored.raw?.count ?? 0))
    }

    /// PostgreSQL's body, under codes: its payload packed beside that body comes back, and a
    /// quarantined record counts its fields' names as on SQLite (the payload as it packs).
    @Test func aCodedBodyKeepsItsPayloadAndItsSize() throws {
        let record = try install(at: 1_800_000_000)
        let coded = record.encoded(codedKeys: true).stored
        let named = record.encoded().stored
        #expect(coded.body.utf8.count < named.body.utf8.count)
        #expect(coded.size - (coded.raw?.count ?? 0) == named.size - (named.raw?.count ?? 0))
        #expect(try Self.read(coded, of: record) == record)
    }

    /// The record a store reads back from `stored` and the columns holding `record`'s
    /// kept-apart fields.
    static func read(_ stored: (body: String, raw: [UInt8]?, size: Int), of record: AttributionRecord) throws
        -> AttributionRecord
    {
        try AttributionRecord(
            body: Data(stored.body.utf8),
            keptApart: StoredColumns(
                recordID: record.recordID, dedupeKey: record.dedupeKey, provider: record.provider, appID: record.appID,
                receivedAt: record.receivedAt.timeIntervalSince1970),
            compactRaw: stored.raw)
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-serve.lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// An iAd install received at `seconds` with its payload.
    func install(at seconds: TimeInterval) throws -> AttributionRecord {
        var record = StoreConformanceTests.install("u1", at: Date(timeIntervalSince1970: seconds))
        record.raw = try JSONValue.parse(Data(Self.iadPayload.utf8))
        return record
    }

    @Test func theBodyHoldsTheFieldsAndTheRawColumnThePayload() async throws {
        let path = temporaryPath()
        defer { remove(path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let record = try install(at: 1_800_000_000)
        _ = try await store.ingest([RoutedRecord(record: record, sinks: ["a"])])

        let row = try #require(
            try DatabaseQueue(path: path).read { db in
                try Row.fetchOne(
                    db,
                    sql: """
                        SELECT json_extract(body, '$.raw') AS inside, json_extract(body, '$.keyword') AS keyword, raw,
                            json_type(body, '$.record_id') AS id, json_type(body, '$.dedupe_key') AS key
                        FROM records
                        """)
            })
        #expect(row["inside"] as String? == nil)
        // The id and the dedupe key have columns of their own, and are not in the body twice.
        #expect(row["id"] as String? == nil)
        #expect(row["key"] as String? == nil)
        #expect(row["keyword"] as String? == "meditation")
        #expect((row["raw"] as Data?).map { $0.count < Self.iadPayload.utf8.count / 3 } == true)
        #expect(try await store.record(id: record.recordID) == record)
        let due = try await store.dueEntries(sink: "a", now: .distantFuture, limit: 10)
        #expect(due.map(\.record) == [record])
    }

    @Test func aRowWithItsPayloadInsideTheBodyIsReadAndLosesItToRetention() async throws {
        let path = temporaryPath()
        defer { remove(path) }
        let store = try SQLiteStore(path: path, durability: .normal)
        let record = try install(at: 1_000)
        // As a store written before the payload moved out of the body holds it.
        try await DatabaseQueue(path: path).write { db in
            try db.execute(
                sql: """
                    INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body)
                    VALUES (?, ?, 'iad', '1', 1000, ?)
                    """,
                arguments: [record.recordID, record.dedupeKey, record.encoded().text])
        }
        #expect(try await store.record(id: record.recordID) == record)
        let dropped = try await store.dropRawPayloads(
            receivedBefore: Date(timeIntervalSince1970: 2_000), after: .start, limit: 10)
        #expect(dropped.dropped == 1)
        var expected = record
        expected.raw = nil
        #expect(try await store.record(id: record.recordID) == expected)
    }
}
