import Foundation
import GatewayCore
import GatewayPostgres
import GatewayTestSupport
import PostgresNIO
import Testing

/// PostgreSQL keeps a body under one-character codes (`StoredKey`). What SQL reads out of it
/// must be what the record holds: the functions the schema spells the codes in, and the
/// fields the store's own queries read.
@Suite struct PostgresCodedBodyTests {
    static func record(idfv: String?, appUserID: String?) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:\(UUID())",
            receivedAt: Date(timeIntervalSince1970: 1_700_000_000.25), attributed: true)
        record.appID = "1234567890"
        record.appUserID = appUserID
        record.idfv = idfv
        record.idfa = "idfa-1"
        record.campaignID = 542_370_541
        record.keyword = "meditation \"calm\""
        record.clickDate = Date(timeIntervalSince1970: 1_699_999_000)
        record.revenue = Decimal(string: "9.99")
        record.events = ["session", "purchase"]
        record.vendorIDs = ["adid": "a1"]
        record.raw = .object(["iad-keyword": .string("meditation")])
        return record
    }

    /// The schema spells every code out for `gateway_record`: each must name its field.
    @Test(.enabled(if: TestPostgres.expected))
    func gatewayRecordNamesEveryCodedField() async throws {
        let url = try await TestPostgres.newDatabase()
        _ = try await PostgresStore(url: url, poolSize: 2)
        var body: [String: JSONValue] = [:]
        for (index, field) in StoredKey.all.enumerated() { body[field.code] = .integer(Int64(index)) }
        let text = String(decoding: try JSONEncoder().encode(JSONValue.object(body)), as: UTF8.self)
        let named = try await TestPostgres.withClient(url) { client in
            _ = try await client.query(
                """
                INSERT INTO records (record_id, dedupe_key, provider, app_id, received_at, body)
                VALUES ('r-1', 'k-1', 'iad', NULL, 1700000000.0456, \(text))
                """)
            var named: [String] = []
            for try await row in try await client.query("SELECT gateway_record(r)::text FROM records r").decode(
                String.self)
            {
                named.append(row)
            }
            return named
        }
        // A body's own value of a field kept in a column is the one read, as the record's
        // reader does: here every field is the body's.
        var expected: [String: JSONValue] = [:]
        for (index, field) in StoredKey.all.enumerated() { expected[field.name] = .integer(Int64(index)) }
        #expect(try named.map { try JSONValue.parse(Data($0.utf8)) } == [.object(expected)])
        #expect(Set(StoredKey.all.map(\.name)) == Set(AttributionRecord.fieldNames))
    }

    @Test(.enabled(if: TestPostgres.expected))
    func sqlReadsACodedBodyAsTheRecordsFields() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2)
        var tester = Self.record(idfv: "idfv-4", appUserID: "u4")
        tester.isTest = true
        tester.resolution = .pending
        let records = [
            Self.record(idfv: "idfv-1", appUserID: "u1"), Self.record(idfv: nil, appUserID: "u2"),
            Self.record(idfv: nil, appUserID: nil), tester,
        ]
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        let rows = try await TestPostgres.withClient(url) { client in
            var rows: [(id: String, body: String, named: String, lane: String?)] = []
            let query = try await client.query(
                "SELECT record_id, body, gateway_record(r)::text, gateway_lane(app_id, body) FROM records r ORDER BY seq"
            )
            for try await row in query.decode((String, String, String, String?).self) { rows.append(row) }
            return rows
        }
        #expect(rows.count == records.count)
        for (record, row) in zip(records, rows) {
            #expect(row.id == record.recordID)
            let keys = try #require(try JSONSerialization.jsonObject(with: Data(row.body.utf8)) as? [String: Any]).keys
            #expect(keys.allSatisfy { $0.count == 1 }, "\(row.body)")
            // The body leaves out what has a column of its own: `received_at` too; and the
            // usual values, which a tester's pending record does not have.
            #expect(!keys.contains(StoredKey.code(of: "received_at")), "\(row.body)")
            let usual = ["is_test", "resolution"].map { StoredKey.code(of: $0) }
            #expect(usual.allSatisfy(keys.contains) == record.isTest, "\(row.body)")
            #expect(usual.contains(where: keys.contains) == record.isTest, "\(row.body)")
            let read = try #require(try await store.record(id: record.recordID))
            #expect(read.isTest == record.isTest && read.resolution == record.resolution)
            // `gateway_record` names every field as the record's JSON does; the payload is
            // kept apart, packed.
            guard case .object(var fields) = try JSONValue.parse(record.jsonData()) else { return }
            fields["raw"] = nil
            #expect(try JSONValue.parse(Data(row.named.utf8)) == .object(fields))
            #expect(row.lane == record.deliveryLane)
        }
        // The store's own reads by field: a user's records found by each of their ids.
        for (record, field, value) in [
            (records[0], "idfv", "idfv-1"), (records[1], "app_user_id", "u2"), (records[2], "idfa", "idfa-1"),
        ] {
            let found = try await TestPostgres.withClient(url) { client in
                var ids: [String] = []
                let query = try await client.query(
                    PostgresQuery(
                        unsafeSQL:
                            "SELECT record_id FROM records WHERE \(BodyField.text(field)) = '\(value)' ORDER BY seq"))
                for try await id in query.decode(String.self) { ids.append(id) }
                return ids
            }
            #expect(found == (field == "idfa" ? records.map(\.recordID) : [record.recordID]))
        }
    }

    /// `received_at` lives in its column, to the microsecond; a record read back has it to
    /// the millisecond, as its JSON text had it, on every path the store reads by.
    @Test(.enabled(if: TestPostgres.expected))
    func receivedAtReadsBackAsTheRecordsTextHasIt() async throws {
        let url = try await TestPostgres.newDatabase()
        let store = try await PostgresStore(url: url, poolSize: 2)
        var records: [AttributionRecord] = []
        for seconds in [1_700_000_000.123_456, 1_700_000_000.999_7, 1_700_000_000.000_4] {
            var record = Self.record(idfv: nil, appUserID: "u\(records.count)")
            record.receivedAt = Date(timeIntervalSince1970: seconds)
            records.append(record)
        }
        _ = try await store.ingest(records.map { RoutedRecord(record: $0, sinks: []) })
        let page = try await store.reportRecords(appID: nil, kinds: [.install], after: 0, limit: 10)
        for record in records {
            let expected = try #require(ISO8601.parse(ISO8601.format(record.receivedAt)))
            #expect(try await store.record(id: record.recordID)?.receivedAt == expected)
            #expect(page.records.first { $0.recordID == record.recordID }?.receivedAt == expected)
        }
        let named = try await TestPostgres.withClient(url) { client in
            var named: [String] = []
            for try await text in try await client.query(
                "SELECT gateway_record(r) ->> 'received_at' FROM records r ORDER BY seq"
            ).decode(String.self) { named.append(text) }
            return named
        }
        #expect(named == records.map { ISO8601.format($0.receivedAt) })
        #expect(named == ["2023-11-14T22:13:20.123Z", "2023-11-14T22:13:21Z", "2023-11-14T22:13:20Z"])
    }
}
