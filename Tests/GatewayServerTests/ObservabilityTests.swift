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

/// Request ids, JSON log lines and readiness as operators rely on them.
@Suite struct ObservabilityTests {
    @Test func everyAnswerCarriesARequestIDAndASaneCallerIDIsKept() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func id(_ sent: String?) async throws -> String? {
                var headers = HTTPFields()
                if let sent { headers[HTTPFields.Element.Name("X-Request-Id")!] = sent }
                let response = try await client.execute(uri: "/healthz", method: .get, headers: headers)
                return response.headers.first { $0.name.canonicalName == "x-request-id" }?.value
            }
            #expect(try await id("backend-call-42") == "backend-call-42")
            let generated = try await id(nil)
            #expect(generated?.isEmpty == false)
            // An id that could forge log lines is replaced.
            let forged = try await id("x\"}{\"level\":\"critical")
            #expect(forged != nil && forged?.contains("\"") == false)
            // Errors carry it too.
            var headers = HTTPFields()
            headers[HTTPFields.Element.Name("X-Request-Id")!] = "trace-7"
            let missing = try await client.execute(uri: "/nowhere", method: .get, headers: headers)
            #expect(missing.headers.first { $0.name.canonicalName == "x-request-id" }?.value == "trace-7")
        }
    }

    @Test func logLinesAreJSONObjectsWithTheRequestID() throws {
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        var logger = Logger(label: "gateway", factory: { _ in handler })
        logger[metadataKey: "hb.request.id"] = "req-1"
        logger.info("stored", metadata: ["provider": "iad", "count": .stringConvertible(2)])
        logger.debug("not at this level")
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let line = try #require(written.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["message"] as? String == "stored")
        #expect(object["level"] as? String == "info")
        #expect(object["request_id"] as? String == "req-1")
        #expect(object["provider"] as? String == "iad" && object["count"] as? String == "2")
        #expect((object["time"] as? String)?.hasSuffix("Z") == true)
    }

    /// In `log_format: json` too, a line separator or a C1 control a vendor's answer quoted
    /// is escaped: a reader splitting on it, or a terminal, would see a line of its own.
    @Test func jsonLogLinesEscapeLineSeparatorsAndC1Controls() throws {
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let logger = Logger(label: "gateway", factory: { _ in handler })
        let quoted = "bad\u{2028}{\"level\":\"critical\"}\u{2029}\u{9B}2J\u{85}"
        logger.error("delivery failed", metadata: ["error": "\(quoted)"])
        let line = try #require(lines.withLock { $0 }.first)
        #expect(!line.unicodeScalars.contains { [0x2028, 0x2029, 0x9B, 0x85].contains($0.value) }, "\(line)")
        #expect(line.contains("\\u2028") && line.contains("\\u009B"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["error"] as? String == quoted)
    }

    /// A client's text quoted into a message or metadata (an event name a vendor refused)
    /// cannot start a line of its own in `log_format: text`, nor hide one with a carriage
    /// return or a terminal's escape sequence.
    @Test func textLogLinesEscapeControlCharactersAClientSent() throws {
        let lines = Mutex<[String]>([])
        let handler = TextLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        var logger = Logger(label: "gateway", factory: { _ in handler })
        logger[metadataKey: "hb.request.id"] = "req-1"
        let forged = "purchase\n2026-01-01T00:00:00Z critical gateway : [Admin] keys rotated\r\u{1B}[2K\u{2028}x"
        logger.warning(
            "Adjust refused event \(forged)", metadata: ["event": "\(forged)", "names": .array([.string("a\nb")])])
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let line = try #require(written.first)
        #expect(!line.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x2028 }, "\(line)")
        let escaped = #"purchase\n2026-01-01T00:00:00Z critical gateway : [Admin] keys rotated\r\u{1B}[2K\u{2028}x"#
        #expect(line.hasSuffix(" [GatewayServerTests] Adjust refused event " + escaped), "\(line)")
        #expect(line.contains(" warning gateway : event=\(escaped) hb.request.id=req-1 names=[a\\nb] "), "\(line)")
        // Text without control characters is written as it came.
        logger.info("café ✓ \\n")
        #expect(lines.withLock { $0.last }?.hasSuffix("] café ✓ \\n") == true)
    }

    @Test func theAccessLogHasALinePerAnswerWithTheCallersIDAndNoQuery() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration(paused: true)
        configuration.server.accessLog = true
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let gateway = try await Gateway.build(
            configuration: configuration, logger: Logger(label: "gateway", factory: { _ in handler }))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let response = try await client.execute(
                uri: "/v1/s2s/nobody/callbacks?secret=hunter2-hunter2", method: .post,
                headers: [HTTPFields.Element.Name("X-Request-Id")!: "trace-123"], body: ByteBuffer(string: "{}"))
            #expect(response.status == .notFound)
        }
        let requests = accessLogLines(lines.withLock { $0 })
        #expect(requests.count == 1)
        let line = try #require(requests.first)
        #expect(line["request_id"] as? String == "trace-123")
        #expect(line["status"] as? String == "404" && line["method"] as? String == "POST")
        #expect(line["path"] as? String == "/v1/s2s/nobody/callbacks")
        #expect(!lines.withLock { $0 }.joined().contains("hunter2"))
    }

    /// The store refusing a write is answered 503, and the log says why (SQLite's code and
    /// message), not only "unavailable"; the payload's values stay out of it.
    @Test func aStorageFailureIsAnswered503AndLoggedWithItsCause() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let gateway = try await Gateway.build(
            configuration: try env.configuration(), logger: Logger(label: "gateway", factory: { _ in handler }))
        // As a full disk would: every insert of a record fails.
        try await DatabaseQueue(path: env.databasePath).write { db in
            try db.execute(
                sql: "CREATE TRIGGER refuse BEFORE INSERT ON records BEGIN SELECT RAISE(ABORT, 'no room'); END")
        }
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let response = try await client.execute(
                uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: "secret-user-77")))
            #expect(response.status == .serviceUnavailable)
            #expect(String(buffer: response.body).contains(#""code":"storage_unavailable""#))
            #expect(!String(buffer: response.body).contains("no room"))
            // Send it again, not at once: every caller would during an outage.
            #expect(response.headers[.retryAfter] == "5")
        }
        let failure = try #require(lines.withLock { $0 }.first { $0.contains("request failed") })
        #expect(failure.contains("SQLite error 19: no room"), "\(failure)")
        #expect(!lines.withLock { $0 }.joined().contains("secret-user-77"))
    }

    /// A full disk leaves reads working: readiness follows the commits, so a load balancer
    /// stops sending requests that can only be answered 503, and takes the instance back
    /// once commits go through again.
    @Test func readinessFailsWhileCommitsFailAndRecoversWithTheNextCommit() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let gateway = try await Gateway.build(configuration: try env.configuration())
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            func post(_ user: String) async throws -> HTTPResponse.Status {
                try await client.execute(
                    uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: user))
                ).status
            }
            #expect(try await post("before") == .accepted)
            // As a full disk: SQLite may not grow the file by another page (SQLITE_FULL).
            try await gateway.sqlite!.pool.writeWithoutTransaction { db in
                let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
                try db.execute(sql: "PRAGMA max_page_count = \(pages)")
            }
            var failedInARow = 0
            for user in 0..<200 where failedInARow < 3 {
                failedInARow = try await post("full-\(user)") == .serviceUnavailable ? failedInARow + 1 : 0
            }
            #expect(failedInARow == 3)
            let ready = try await client.execute(uri: "/readyz", method: .get)
            #expect(ready.status == .serviceUnavailable)
            #expect(String(buffer: ready.body).contains("the store cannot commit (3 failed in a row: SQLite error 13"))
            // A resent payload commits nothing new, and proves nothing about the disk.
            let resent = try await client.execute(
                uri: "/v1/iad", method: .post, body: ByteBuffer(string: IAdPayloads.attributed(user: "before")))
            #expect(resent.status == .ok)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .serviceUnavailable)

            try await gateway.sqlite!.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA max_page_count = 1073741823")
            }
            #expect(try await post("after") == .accepted)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
        }
    }

    @Test func anAttachedErrorIsLoggedByItsTypeNotItsText() throws {
        struct LeakyError: Error, CustomStringConvertible {
            var description: String { "GET /v1/s2s/adjust/callbacks?secret=hunter2-callback-secret failed" }
        }
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        let logger = Logger(label: "gateway", factory: { _ in handler })
        logger.error("request failed", error: LeakyError())
        let line = try #require(lines.withLock { $0.first })
        #expect(!line.contains("hunter2"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["error_type"] as? String == "LeakyError")
    }

    @Test(arguments: [false, true])
    func readinessFailsWhileASinkHoldsRecordsOlderThanTheBound(paused: Bool) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // A receiver that is down (nothing listens on port 9), or the same sink paused by
        // its operator for maintenance, which readiness leaves alone.
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: warning, ready_max_outbox_age_s: 600 }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: {} }
            sinks:
              local: { type: webhook, url: "http://127.0.0.1:9/hook", secret: webhook-secret-0001, paused: \(paused), backoff_initial_ms: 60000 }
            """
        let configuration = try ConfigLoader.parse(yaml: yaml, file: "ready.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            #expect(try await env.eventually { gateway.health.stoppedSinks.isEmpty })
            // A record from last year, just imported, has waited for its sink no time at all…
            var imported = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "iad:1:imported",
                receivedAt: Date().addingTimeInterval(-365 * 86400))
            imported.appID = "1"
            _ = try await gateway.pipeline.ingest([imported])
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            // …nor one queued a minute ago…
            var stale = imported
            stale.recordID = AttributionRecord.newRecordID()
            stale.dedupeKey = "iad:1:stale"
            stale.receivedAt = Date()
            _ = try await gateway.pipeline.ingest([stale])
            let staleID = stale.recordID
            let queuedAgo = { (seconds: Double) in
                try await gateway.sqlite!.pool.write { db in
                    try db.execute(
                        sql: "UPDATE outbox SET created_at = ? WHERE record_id = ?",
                        arguments: [Date().timeIntervalSince1970 - seconds, staleID])
                }
            }
            try await queuedAgo(60)
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            // …but one waiting for an hour is: the sink has stopped delivering.
            try await queuedAgo(3600)
            // The outbox is read at most once a second, however many probes ask.
            try await Task.sleep(for: .milliseconds(1100))
            let ready = try await client.execute(uri: "/readyz", method: .get)
            if paused {
                #expect(ready.status == .ok)
            } else {
                #expect(ready.status == .serviceUnavailable)
                #expect(String(buffer: ready.body).contains("sink 'local' has undelivered records older than 600 s"))
            }
        }
    }

    @Test func anImportedRecordOfLastYearCountsItsDeliveryLatencyFromItsCommit() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // `inline` writes its rows with the records; `ordered` (in device order) is a worker's.
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: {} }
            sinks:
              inline: { type: sqlite }
              ordered: { type: sqlite, path: \(env.directory.appendingPathComponent("ordered.sqlite").path), in_device_order: true }
            """
        let configuration = try ConfigLoader.parse(
            yaml: yaml, file: "latency.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            var imported = AttributionRecord(
                provider: "iad", kind: .install, dedupeKey: "iad:1:last-year",
                receivedAt: Date().addingTimeInterval(-365 * 86400))
            imported.appID = "1"
            imported.appUserID = "u1"
            _ = try await gateway.pipeline.ingest([imported])
            for sink in ["inline", "ordered"] {
                let delivered = #"gateway_delivery_latency_seconds_count{sink="\#(sink)"} 1"#
                var metrics = ""
                #expect(
                    try await env.eventually {
                        metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                        return metrics.contains(delivered)
                    }, "\(sink)")
                // Under an hour, not a year: the sink had it for no longer than that.
                #expect(
                    metrics.contains(#"gateway_delivery_latency_seconds_bucket{sink="\#(sink)",le="3600.0"} 1"#),
                    "\(metrics.split(separator: "\n").filter { $0.contains("latency") && $0.contains(sink) })")
            }
        }
    }

    @Test func rowsOfASinkNoLongerConfiguredShowInMetricsButDoNotFailReadiness() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration(paused: true)
        configuration.server.readyMaxOutboxAge = 600
        // A record queued an hour ago for a sink since taken out of config.yaml.
        let before = try await Gateway.build(configuration: configuration)
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:old", receivedAt: Date().addingTimeInterval(-3600))
        record.appID = "1"
        _ = try await before.pipeline.ingest([record])
        try await before.sqlite!.pool.write { db in
            try db.execute(
                sql: "UPDATE outbox SET sink = 'retired', created_at = created_at - 3600 WHERE sink = 'local'")
        }

        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            #expect(try await env.eventually { gateway.health.stoppedSinks.isEmpty })
            #expect(try await client.execute(uri: "/readyz", method: .get).status == .ok)
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_outbox_depth{sink="retired"} 1"#))
            #expect(metrics.contains(#"gateway_outbox_depth{sink="local"} 0"#))
            // Its rows dropped: it reads 0, not the depth it last had.
            try await gateway.sqlite!.pool.write { db in
                try db.execute(sql: "DELETE FROM outbox WHERE sink = 'retired'")
            }
            try await Task.sleep(for: .milliseconds(1100))
            let after = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(after.contains(#"gateway_outbox_depth{sink="retired"} 0"#), "\(after)")
        }
    }

    /// Tokens left waiting when `adservices` is turned off are resolved by nothing, and
    /// Apple forgets them in a day: their depth shows, so that the backlog alert can fire.
    @Test func tokensWaitingForADisabledProviderShowInMetrics() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let configuration = try env.configuration(paused: true)
        let before = try await Gateway.build(configuration: configuration)
        _ = try await before.store.addPending(
            PendingWork(
                provider: "adservices", dedupeKey: "adservices:t", appID: "1", receivedAt: Date(), state: Data()),
            now: Date())
        let gateway = try await Gateway.build(configuration: configuration)
        #expect(gateway.resolvers["adservices"] == nil)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            #expect(metrics.contains(#"gateway_pending_depth{provider="adservices"} 1"#), "\(metrics)")
        }
    }
}
