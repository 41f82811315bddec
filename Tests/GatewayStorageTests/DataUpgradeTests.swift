import Foundation
@testable import GatewaySinks
@testable import GatewayStorage
import GRDB
import Testing

/// The `data:` upgrades: rows stored by older releases brought to what this one would
/// store. Rows stored by older releases may keep in `raw` an IDFA sent without ATT consent
/// (iAd) and an imported AdServices answer's IDFA and token: upgrading the store, and
/// starting the SQLite sink on its table, removes them and nothing else. S2S purchases
/// stored under their event id are keyed by their transaction.
@Suite struct DataUpgradeTests {
    func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("cleanup-\(UUID()).sqlite").path
    }

    func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-serve.lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    }

    /// Raw payloads as the releases before the fix kept them, by record: the record's own
    /// `idfa` is there only with consent.
    let rows: [(id: String, provider: String, dedupeKey: String, idfa: String?, raw: String)] = [
        (
            "iad-no-consent", "iad", "iad:1", nil,
            #"{"app_id":"1","att_status":2,"idfa":"AAAA-1","Version3.1":{"iad-attribution":"true"}}"#
        ),
        ("iad-consent", "iad", "iad:2", "BBBB-2", #"{"app_id":"1","att_status":3,"idfa":"BBBB-2"}"#),
        (
            "answer", "adservices", "adservices:answer:ab12", nil,
            #"{"apple":{"status":200,"body":{"attribution":true,"campaignId":1.50,"token":"TOKEN-TEXT","idfa":"CCCC-3","app_user_id":"u"}}}"#
        ),
        (
            "answer-consent", "adservices", "adservices:answer:cd34", "DDDD-4",
            #"{"apple":{"status":200,"body":{"attribution":true,"token":"TOKEN-2","idfa":"DDDD-4"}}}"#
        ),
        // A live record keeps Apple's answer apart from the app's fields; nothing to remove.
        (
            "live", "adservices", "adservices:ef56", nil,
            #"{"apple":{"status":200,"body":{"attribution":true}},"request":{"token_sha256":"ff"}}"#
        ),
    ]

    /// What each row's `raw` holds once cleaned.
    let cleaned: [String: String] = [
        "iad-no-consent": #"{"app_id":"1","att_status":2,"Version3.1":{"iad-attribution":"true"}}"#,
        "iad-consent": #"{"app_id":"1","att_status":3,"idfa":"BBBB-2"}"#,
        "answer": #"{"apple":{"status":200,"body":{"attribution":true,"campaignId":1.50,"app_user_id":"u"}}}"#,
        "answer-consent": #"{"apple":{"status":200,"body":{"attribution":true,"idfa":"DDDD-4"}}}"#,
        "live": #"{"apple":{"status":200,"body":{"attribution":true}},"request":{"token_sha256":"ff"}}"#,
    ]

    func body(_ row: (id: String, provider: String, dedupeKey: String, idfa: String?, raw: String)) -> String {
        let idfa = row.idfa.map { #","idfa":"\#($0)""# } ?? ""
        return #"{"record_id":"\#(row.id)","provider":"\#(row.provider)"\#(idfa),"raw":\#(row.raw)}"#
    }

    @Test func upgradingAStoreRemovesWhatRawHeldWithoutConsent() async throws {
        let path = temporaryPath()
        defer { remove(path) }
        let migrator = SQLiteStoreSchema.migrator
        try migrator.migrate(try DatabaseQueue(path: path), upTo: "store-v7-pending-claims")
        try await DatabaseQueue(path: path).write { db in
            for row in rows {
                try db.execute(
                    sql:
                        "INSERT INTO records (record_id, dedupe_key, provider, received_at, body) VALUES (?, ?, ?, 0, ?)",
                    arguments: [row.id, row.dedupeKey, row.provider, body(row)])
            }
        }
        _ = try SQLiteStore(path: path, upgrade: .unlessServed)
        let bodies = try await DatabaseQueue(path: path).read { db in
            try Dictionary(
                uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT record_id, body FROM records").map {
                    ($0["record_id"] as String, $0["body"] as String)
                })
        }
        for row in rows {
            var expected = row
            expected.raw = cleaned[row.id]!
            #expect(bodies[row.id] == body(expected), "\(row.id)")
        }
    }

    @Test func startingTheSQLiteSinkOnAnOlderTableRemovesThemOnce() async throws {
        let path = temporaryPath()
        defer { remove(path) }
        _ = try SQLiteSink(path: path)
        // Rows an older release wrote, before this one's steps.
        try await DatabaseQueue(path: path).write { db in
            try db.execute(sql: "DROP TABLE attribution_records_steps")
            for row in rows {
                try db.execute(
                    sql:
                        "INSERT INTO attribution_records (record_id, provider, dedupe_key, idfa, raw) VALUES (?, ?, ?, ?, ?)",
                    arguments: [row.id, row.provider, row.dedupeKey, row.idfa, row.raw])
            }
        }
        _ = try SQLiteSink(path: path)
        let raws = { () async throws -> [String: String] in
            try await DatabaseQueue(path: path).read { db in
                try Dictionary(
                    uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT record_id, raw FROM attribution_records").map {
                        ($0["record_id"] as String, $0["raw"] as String)
                    })
            }
        }
        #expect(try await raws() == cleaned)

        // Once: a row an older release writes afterwards (a rollback) is not scanned again
        // at every start; the step is named as done.
        try await DatabaseQueue(path: path).write { db in
            try db.execute(
                sql: "UPDATE attribution_records SET raw = ? WHERE record_id = 'iad-no-consent'",
                arguments: [rows[0].raw])
        }
        _ = try SQLiteSink(path: path)
        #expect(try await raws()["iad-no-consent"] == rows[0].raw)
        let steps = try await DatabaseQueue(path: path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM attribution_records_steps")
        }
        #expect(steps == ["raw-without-unconsented-ids"])
    }

    @Test func upgradingAStoreKeysItsS2SPurchasesByTransactionAsResendsNowAre() async throws {
        let path = temporaryPath()
        defer { remove(path) }
        try SQLiteStoreSchema.migrator.migrate(try DatabaseQueue(path: path), upTo: "data:raw-without-unconsented-ids")
        let purchase = { (id: String, event: String, transaction: String) in
            #"{"record_id":"\#(id)","provider":"s2s","kind":"purchase","app_id":"1234567890","transaction_ref":"\#(transaction)","event_name":"purchase"}"#
        }
        let rows: [(id: String, key: String, body: String)] = [
            ("p1", "s2s:1234567890:id:evt-1", purchase("p1", "evt-1", "2000000999")),
            // The old rule's second record of one transaction keeps its key.
            ("p2", "s2s:1234567890:id:evt-2", purchase("p2", "evt-2", "2000000999")),
            ("p3", "s2s:1234567890:id:evt-3", purchase("p3", "evt-3", "tx:with%colon")),
            // Not purchases: left alone.
            (
                "e1", "s2s:1234567890:id:evt-4",
                #"{"record_id":"e1","provider":"s2s","kind":"event","app_id":"1234567890"}"#
            ),
        ]
        try await DatabaseQueue(path: path).write { db in
            for row in rows {
                try db.execute(
                    sql:
                        "INSERT INTO records (record_id, dedupe_key, provider, received_at, body) VALUES (?, ?, 's2s', 0, ?)",
                    arguments: [row.id, row.key, row.body])
            }
        }
        _ = try SQLiteStore(path: path, upgrade: .unlessServed)
        let keys = try await DatabaseQueue(path: path).read { db in
            try Dictionary(
                uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT record_id, dedupe_key FROM records").map {
                    ($0["record_id"] as String, $0["dedupe_key"] as String)
                })
        }
        #expect(
            keys == [
                "p1": "s2s:1234567890:purchase:2000000999", "p2": "s2s:1234567890:id:evt-2",
                "p3": "s2s:1234567890:purchase:tx%3Awith%25colon", "e1": "s2s:1234567890:id:evt-4",
            ])
    }
}
