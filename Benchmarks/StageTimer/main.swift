import Foundation
import GatewayCore
import GatewayProviders
import GatewaySinks
import GatewayStorage
import GRDB

// Times each stage an iAd request goes through, in-process, so that the HTTP benchmark's
// CPU per request can be split by stage: parse and normalise, encode the stored body,
// read it back (what a sink worker does for every record), encode the answer, store the
// record alone (wall time: one request at a time, 32 at once sharing commits; then 500 to
// a commit), the SQLite sink through its outbox, and its row written with the record
// (arguments, then the upsert alone). User ids are scattered, as in Benchmarks/run.
//
//   swift run -c release --scratch-path .build-bench StageTimer [count]
let count = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1]) ?? 20_000 : 20_000
let clock = ContinuousClock()

/// Eight hex digits that a counter does not put in order (a bijection modulo 2^32).
func scattered(_ index: Int) -> String {
    let value = UInt32(truncatingIfNeeded: index &* 2_654_435_761)
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: 8 - hex.count) + hex
}

func body(_ index: Int) -> Data {
    Data(
        """
        {"app_id":"1234567890","app_user_id":"\(scattered(index))-stage-\(index)","Version3.1":{"iad-attribution":"true",\
        "iad-org-id":"40669820","iad-org-name":"Mindful Apps Inc.","iad-campaign-id":"542370539",\
        "iad-campaign-name":"US Search - Meditation","iad-adgroup-id":"542317095","iad-adgroup-name":"Exact - Core",\
        "iad-keyword-id":"87675432","iad-keyword":"meditation app","iad-keyword-matchtype":"Exact",\
        "iad-ad-id":"542317136","iad-country-or-region":"US","iad-conversion-type":"Download",\
        "iad-click-date":"2020-08-04T17:18:07Z","iad-conversion-date":"2020-08-04T17:19:41Z"}}
        """.utf8)
}

func report(_ stage: String, _ elapsed: Duration, per items: Int) {
    let micros = Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12
    print(stage.padding(toLength: 40, withPad: " ", startingAt: 0) + String(format: "%8.1f µs", micros / Double(items)))
}

let payloads = (0..<count).map { IngestPayload(body: body($0), receivedAt: Date(), path: "/v1/iad") }
let provider = IAdProvider()
report(
    "parse JSON alone", try clock.measure { for payload in payloads { _ = try JSONValue.parse(payload.body) } },
    per: count)
var records: [AttributionRecord] = []
report("parse + normalise", try clock.measure { records = try payloads.flatMap(provider.normalize) }, per: count)
var bodies: [Data] = []
report("encode stored body", clock.measure { bodies = records.map { $0.jsonData() } }, per: count)
report("read stored body", try clock.measure { _ = try bodies.map(AttributionRecord.init(jsonData:)) }, per: count)
report(
    "encode answer",
    clock.measure {
        // Nearly as the ingest routes write it: a JSONValue through the record's own
        // writer (the routes also leave absent members out first).
        for record in records {
            _ =
                JSONValue.object([
                    "attributed": .bool(record.attributed), "provider": .string(record.provider),
                    "record_id": .string(record.recordID), "resolution": .string(record.resolution.rawValue),
                    "status": .string("accepted"),
                ]).compactUTF8
        }
    }, per: count)

/// A store on a scratch file, removed afterwards; the body gets the file's path too.
func withScratchStore<T>(
    durability: SQLiteDatabase.Durability = .full, _ body: (String, SQLiteStore) async throws -> T
) async throws -> T {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("stages-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("g.sqlite").path
    return try await body(path, try SQLiteStore(path: path, durability: durability))
}

extension Array {
    /// Consecutive slices of at most `size` elements: the batches a sink or a commit takes.
    func chunks(of size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

// The store, the record alone (no sink: as with Benchmarks/run's SQLite sink written
// inline, which has stages of its own below): wall time per request, one request at a
// time (a commit and its fsync each) and 32 at once (sharing commits), then records
// already batched 500 to a commit (CPU, the body's encoding included).
for durability in SQLiteDatabase.Durability.allCases {
    try await withScratchStore(durability: durability) { _, store in
        let alone = records[..<min(count / 2, 2_000)].map { [RoutedRecord(record: $0, sinks: [])] }
        report(
            "store, one at a time, no sink (\(durability))",
            try await clock.measure { for batch in alone { _ = try await store.ingest(batch) } }, per: alone.count)
        let together = records[(count / 2)...].map { [RoutedRecord(record: $0, sinks: [])] }
        report(
            "store, 32 at once, no sink (\(durability))",
            try await clock.measure {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    var next = together.makeIterator()
                    for _ in 0..<32 {
                        if let batch = next.next() { group.addTask { _ = try await store.ingest(batch) } }
                    }
                    while try await group.next() != nil {
                        if let batch = next.next() { group.addTask { _ = try await store.ingest(batch) } }
                    }
                }
            }, per: together.count)
    }
}
try await withScratchStore { _, store in
    let routed = records.map { RoutedRecord(record: $0, sinks: []) }
    report(
        "store, 500 to a commit, no sink (full)",
        try await clock.measure { for chunk in routed.chunks(of: 500) { _ = try await store.ingest(Array(chunk)) } },
        per: routed.count)
}

// Delivery to the SQLite sink, per record: what its worker does for each stored record
// (due rows read back with their bodies, the sink's upsert, the outbox rows resolved).
try await withScratchStore { path, store in
    let sink = try SQLiteSink(path: path)
    let routed = records.map { RoutedRecord(record: $0, sinks: ["local"]) }
    for chunk in routed.chunks(of: 500) { _ = try await store.ingest(Array(chunk)) }
    var due: [OutboxEntry] = []
    report(
        "sink: read due rows back",
        try await clock.measure {
            due = try await store.dueEntries(sink: "local", now: Date(), limit: routed.count, laneOrdered: false)
        }, per: routed.count)
    let batches = due.chunks(of: 500)
    report(
        "sink: SQLite sink upsert, 500 a batch",
        try await clock.measure { for batch in batches { _ = try await sink.deliver(batch.map(\.record)) } },
        per: routed.count)
    report(
        "sink: resolve delivered, 500 a batch",
        try await clock.measure {
            for batch in batches {
                try await store.resolve(sink: "local", batch.map { .delivered(id: $0.id) }, now: Date())
            }
        }, per: routed.count)
}

// The SQLite sink's row when it is written with its record (its default): the statement's
// arguments, made on the request's task, then the upsert alone, 500 to a transaction.
try await withScratchStore { path, store in
    let sink = try SQLiteSink(path: path)
    guard let inline = sink.inlineDelivery(sinkName: "local", into: store) else { fatalError("the sink is not inline") }
    var rows: [StatementArguments] = []
    // The stored body is encoded first in any case (the stage above); the row takes its
    // embedded JSON from it.
    let encodings = records.map { $0.encoded() }
    report(
        "inline sink row: arguments",
        try clock.measure { rows = try zip(records, encodings).map { try inline.arguments($0, $1) } }, per: count)
    let made = rows
    report(
        "inline sink row: upsert, 500 a commit",
        try await clock.measure {
            for chunk in made.chunks(of: 500) {
                try await store.pool.write { db in
                    let statement = try db.cachedStatement(sql: inline.sql)
                    for row in chunk { try statement.execute(arguments: row) }
                }
            }
        }, per: count)
}
