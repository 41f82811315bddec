import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import GatewayTestSupport
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Slow clients cannot hold the server: a body dripping in past `body_timeout_ms` gets
/// `408`, and a connection that goes quiet is closed after `idle_timeout_ms`; a request
/// that is not HTTP gets a JSON error too. A raw
/// socket plays the client, since an HTTP client library sends whole requests. The waits
/// are upper bounds, never speed claims.
@Suite struct SlowClientTests {
    /// A blocking TCP connection to the gateway, with a read timeout as a bound. Its reads
    /// run on a thread of their own: blocking one of Swift's few cooperative threads (two
    /// on these machines) could starve the gateway's own handlers, which run on them too.
    /// Not on Dispatch's: with the reads there, the suite's gateways could start their
    /// handlers late, which turned the 408 test's access line into a 400; on threads of
    /// their own, never. A program blocking Dispatch's workers with `usleep` did not delay
    /// tasks, so why is not pinned down.
    final class RawConnection: @unchecked Sendable {
        let fd: Int32

        /// `receiveBuffer`: a small one, so that unread answers back up sooner.
        init(port: Int, receiveBuffer: Int32? = nil) throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            if var size = receiveBuffer {
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            try #require(connected == 0)
            var bound = timeval(tv_sec: Self.readBound, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        }

        /// Seconds a read waits for the server: a minute, which a loaded machine's answer
        /// stays within, so that only a server that never answers or closes reaches it.
        static let readBound = 60

        deinit { close(fd) }

        /// Gives up on the request, as a client that closes the app does.
        func hangUp() {
            shutdown(fd, Int32(SHUT_RDWR))
        }

        /// False once the server has closed the connection.
        @discardableResult
        func send(_ text: String) -> Bool {
            text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) } >= 0
        }

        /// What the server sends until it closes the connection or the bound passes;
        /// `closed` tells which.
        func readAll() async -> (text: String, closed: Bool) {
            await onThread { self.readBlocking() }
        }

        /// One answer on a connection kept open: its head and a body of its
        /// `Content-Length` (or what came before the server closed or the bound passed).
        func readAnswer() async -> String {
            await onThread { self.readAnswerBlocking() }
        }

        private func readAnswerBlocking() -> String {
            var data = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            let blank: [UInt8] = [13, 10, 13, 10]
            while true {
                if let end = (0..<max(0, data.count - 3)).first(where: { Array(data[$0..<$0 + 4]) == blank }) {
                    let head = String(decoding: data[..<end], as: UTF8.self).lowercased()
                    let length =
                        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        ?? 0
                    if data.count - (end + 4) >= length { return String(decoding: data, as: UTF8.self) }
                }
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { return String(decoding: data, as: UTF8.self) }
                data += buffer[0..<count]
            }
        }

        private func readBlocking() -> (text: String, closed: Bool) {
            var data = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0 {
                    data += buffer[0..<count]
                    continue
                }
                return (String(decoding: data, as: UTF8.self), count == 0)
            }
        }
    }

    func withGateway(
        idleMs: Int, bodyMs: Int, server: String = "", logger: Logger? = nil,
        _ body: @escaping @Sendable (Int) async throws -> Void
    ) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: warning, idle_timeout_ms: \(idleMs), body_timeout_ms: \(bodyMs), access_log: true\(server) }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers: { iad: {} }
            sinks: { local: { type: sqlite } }
            """
        let config = try ConfigLoader.parse(yaml: yaml, file: "slow.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: config, logger: logger ?? Logger(label: "gateway"))
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            try await body(try #require(client.port))
        }
    }

    @Test(arguments: [
        "FOOBAR /v1/iad HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n",
    ])
    func aRequestTheParserCannotReadGetsAJSONErrorAndTheConnectionCloses(request: String) async throws {
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        try await withGateway(
            idleMs: 120_000, bodyMs: 5000, logger: Logger(label: "gateway", factory: { _ in handler })
        ) {
            port in
            let scrape = { () async throws -> String in
                let connection = try RawConnection(port: port)
                connection.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return await connection.readAll().text
            }
            #expect(try await scrape().contains("gateway_malformed_requests_total 0"))
            let connection = try RawConnection(port: port)
            connection.send(request)
            let answer = await connection.readAll()
            #expect(answer.closed)
            #expect(answer.text.hasPrefix("HTTP/1.1 400"), "\(answer.text.prefix(200))")
            #expect(answer.text.contains("application/json"))
            #expect(answer.text.contains(#""code":"malformed_http""#), "\(answer.text)")
            // No route saw it, yet the metrics and the access log do, under the id it was answered with.
            #expect(try await scrape().contains("gateway_malformed_requests_total 1"))
            let refused = accessLogLines(lines.withLock { $0 }).filter { $0["code"] as? String == "malformed_http" }
            #expect(refused.map { $0["status"] as? String } == ["400"], "\(lines.withLock { $0 })")
            let id = try #require(refused.first?["request_id"] as? String)
            #expect(answer.text.lowercased().contains("x-request-id: \(id)".lowercased()))
        }
    }

    @Test func unreadableBytesPipelinedBehindRequestsAreAnsweredWithAJSONErrorAfterThem() async throws {
        try await withGateway(idleMs: 120_000, bodyMs: 5000) { port in
            let connection = try RawConnection(port: port)
            // One write: the parser reads the junk while the first answers are still being made.
            connection.send(
                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: x\r\nBroken header line\r\n\r\n")
            let answer = await connection.readAll()
            #expect(answer.closed)
            let heads = answer.text.matches(of: #/HTTP\/1\.1 (\d{3}) /#).map { String($0.1) }
            #expect(heads == ["200", "200", "400"], "\(answer.text)")
            // Not Hummingbird's empty 400, which it sends after the answers in flight.
            let last = try #require(answer.text.components(separatedBy: "HTTP/1.1 400 ").last)
            #expect(last.contains(#""code":"malformed_http""#), "\(answer.text)")
            #expect(last.contains("application/json"))

            // Behind a request that asked to close, however it asked, a request is not read,
            // nor answered, nor counted as malformed, and the connection ends.
            for closingRequest in [
                "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n",
                "GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n",
            ] {
                let closing = try RawConnection(port: port)
                closing.send(closingRequest + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                let closed = await closing.readAll()
                #expect(closed.closed, "\(closingRequest)")
                #expect(
                    closed.text.matches(of: #/HTTP\/1\.[01] (\d{3}) /#).map { String($0.1) } == ["200"],
                    "\(closingRequest): \(closed.text)")
            }
            let metrics = try RawConnection(port: port)
            metrics.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(await metrics.readAll().text.contains("gateway_malformed_requests_total 1"))
        }
    }

    @Test(arguments: [
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: TE, close\r\nTE: trailers\r\n\r\n",
        "GET /healthz HTTP/1.0\r\nHost: x\r\n\r\n",
        "POST /v1/iad HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    ])
    func aRequestThatAsksToCloseIsAnsweredAndTheConnectionEnds(request: String) async throws {
        // An idle timeout far past the read's bound: only the request can end it.
        try await withGateway(idleMs: 120_000, bodyMs: 5000) { port in
            let connection = try RawConnection(port: port)
            connection.send(request)
            let answer = await connection.readAll()
            #expect(answer.closed, "\(request): still open after \(answer.text)")
            #expect(answer.text.hasPrefix("HTTP/1.1 "), "\(answer.text)")
            #expect(answer.text.lowercased().contains("connection: close\r\n"), "\(answer.text)")
        }
    }

    /// `Expect: 100-continue` is answered: unanswered, curl waits a second before each such
    /// body, and a client waiting for the `100` waits for good.
    @Test func aClientThatExpects100ContinueIsToldToSendItsBody() async throws {
        try await withGateway(idleMs: 120_000, bodyMs: 5000) { port in
            let body = IAdPayloads.attributed(user: "expect-1")
            let connection = try RawConnection(port: port)
            connection.send(
                "POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Expect: 100-continue\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
            let interim = await connection.readAnswer()
            #expect(interim.hasPrefix("HTTP/1.1 100 Continue\r\n"), "\(interim)")
            connection.send(body)
            let answer = await connection.readAnswer()
            #expect(answer.hasPrefix("HTTP/1.1 202 "), "\(answer)")
            // A body larger than any route takes is answered at once, not asked for.
            let large = try RawConnection(port: port)
            large.send(
                "POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + "Expect: 100-continue\r\nContent-Length: 50000000\r\n\r\n")
            let refused = await large.readAnswer()
            #expect(refused.hasPrefix("HTTP/1.1 413 "), "\(refused)")
        }
    }

    @Test func anHTTP10RequestWithKeepAliveKeepsItsConnection() async throws {
        try await withGateway(idleMs: 120_000, bodyMs: 5000) { port in
            let connection = try RawConnection(port: port)
            connection.send(
                "GET /healthz HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let answer = await connection.readAll()
            #expect(answer.closed)
            #expect(answer.text.matches(of: #/HTTP\/1\.1 200 /#).count == 2, "\(answer.text)")
        }
    }

    @Test func aBodyDrippingPastTheDeadlineIsAnswered408() async throws {
        // An idle timeout far above the drip interval and the wait below, so a busy
        // machine cannot turn this into the idle case.
        try await withGateway(idleMs: 120_000, bodyMs: 300) { port in
            let connection = try RawConnection(port: port)
            connection.send(
                "POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"app_id\":"
            )
            // Within the idle timeout each time, past the body deadline in all.
            for _ in 0..<4 {
                try await Task.sleep(for: .milliseconds(150))
                connection.send(" ")
            }
            // Keep dripping (each byte would reset the idle timer): the server hangs up
            // anyway, a second after the body deadline, long before the idle timeout.
            var refused = false
            let deadline = ContinuousClock.now + .seconds(60)
            while !refused && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                refused = !connection.send(" ")
            }
            #expect(refused)
            let answer = await connection.readAll()
            #expect(answer.text.hasPrefix("HTTP/1.1 408"), "\(answer.text.prefix(200))")
            #expect(answer.text.contains(#""code":"request_timeout""#))
        }
    }

    /// With the caller's request id or without: the answer's id is the one its log line has.
    @Test(arguments: ["slow-1", nil] as [String?])
    func aBodyThatStopsArrivingIsAnswered408BeforeTheConnectionCloses(callersID: String?) async throws {
        // No chunk after the deadline reaches the body reader, so the connection's own
        // deadline (a second later, far before the idle timeout) answers for it.
        // The idle timeout is above the client's read bound: only the deadline closes.
        let lines = Mutex<[String]>([])
        let answeredID = Mutex<String?>(nil)
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        try await withGateway(idleMs: 120_000, bodyMs: 200, logger: Logger(label: "gateway", factory: { _ in handler }))
        { port in
            let connection = try RawConnection(port: port)
            let idHeader = callersID.map { "X-Request-Id: \($0)\r\n" } ?? ""
            connection.send(
                "POST /v1/iad?secret=x HTTP/1.1\r\nHost: x\r\n\(idHeader)Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"app_id\":"
            )
            let answer = await connection.readAll()
            #expect(answer.closed)
            #expect(answer.text.hasPrefix("HTTP/1.1 408"), "\(answer.text.prefix(200))")
            #expect(answer.text.lowercased().contains("connection: close"))
            let answered = answer.text.components(separatedBy: "\r\n")
                .first { $0.lowercased().hasPrefix("x-request-id: ") }.map {
                    String($0.dropFirst("x-request-id: ".count))
                }
            answeredID.withLock { $0 = answered }
            let body = try #require(answer.text.components(separatedBy: "\r\n\r\n").last)
            let json = try JSONValue.parse(Data(body.utf8))
            #expect(json["error"]?["code"] == .string("request_timeout"))
        }
        // The access log has the answer the client got, once.
        let requests = accessLogLines(lines.withLock { $0 })
        #expect(requests.map { $0["status"] as? String } == ["408"], "\(lines.withLock { $0 })")
        let logged = try #require(requests.first?["request_id"] as? String)
        #expect(logged == callersID ?? logged)
        #expect(answeredID.withLock { $0 } == logged)
        #expect(requests.first?["path"] as? String == "/v1/iad")
    }

    @Test func aClientThatHangsUpMidBodyIsLoggedAndCountedAsItsOwnDoing() async throws {
        let lines = Mutex<[String]>([])
        let handler = JSONLogHandler(label: "gateway", level: .info) { line in lines.withLock { $0.append(line) } }
        try await withGateway(
            idleMs: 30_000, bodyMs: 10_000, logger: Logger(label: "gateway", factory: { _ in handler })
        ) { port in
            let connection = try RawConnection(port: port)
            connection.send(
                "POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{\"app_id\":"
            )
            try await Task.sleep(for: .milliseconds(100))
            connection.hangUp()
            func accessLines() -> [[String: Any]] { accessLogLines(lines.withLock { $0 }) }
            let deadline = Date().addingTimeInterval(60)
            while accessLines().isEmpty && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(accessLines().map { $0["status"] as? String } == ["400"], "\(lines.withLock { $0 })")
            // Not an internal error: nothing logged at error level.
            #expect(!lines.withLock { $0 }.contains { $0.contains(#""level":"error""#) })
            let scrape = try RawConnection(port: port)
            scrape.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let text = await scrape.readAll().text
            #expect(text.contains(#"gateway_records_rejected_total{provider="iad",code="incomplete_body"} 1"#))
            #expect(text.contains(#"gateway_records_rejected_total{provider="iad",code="internal_error"} 0"#))
        }
    }

    @Test func aConnectionThatGoesQuietIsClosed() async throws {
        try await withGateway(idleMs: 300, bodyMs: 10_000) { port in
            let connection = try RawConnection(port: port)
            connection.send("POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{")
            let answer = await connection.readAll()
            // Closed by the server well before the read's bound.
            #expect(answer.closed)
        }
    }

    /// A client holding thousands of connections that never send a request kept every
    /// other client out for the idle timeout, each reopened as it expired: a connection
    /// gets `request_head_timeout_ms` to send its first head, silent or half-sent.
    @Test(arguments: ["", "POST /v1/iad HTTP/1.1\r\nHost: x\r\n"])
    func aConnectionThatSendsNoRequestHeadIsClosedLongBeforeTheIdleTimeout(sent: String) async throws {
        try await withGateway(idleMs: 600_000, bodyMs: 10_000, server: ", request_head_timeout_ms: 200") { port in
            let connection = try RawConnection(port: port)
            if !sent.isEmpty { connection.send(sent) }
            let answer = await connection.readAll()
            // Closed by the server, without an answer, well before the read's bound.
            #expect(answer.closed && answer.text.isEmpty, "\(answer)")
        }
    }

    /// The first-head clock is for a connection's first request only: between requests a
    /// kept-alive connection waits as long as the idle timeout allows.
    @Test func aKeptAliveConnectionIsNotTimedByTheFirstHeadDeadline() async throws {
        try await withGateway(idleMs: 600_000, bodyMs: 10_000, server: ", request_head_timeout_ms: 200") { port in
            let connection = try RawConnection(port: port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await connection.readAnswer().hasPrefix("HTTP/1.1 200"))
            try await Task.sleep(for: .seconds(1))
            #expect(connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
            #expect(await connection.readAll().text.hasPrefix("HTTP/1.1 200"))
        }
    }

    /// A client that pipelines requests and reads none of the answers: Hummingbird's idle
    /// timer waits while a request is being answered, so such a connection would be held
    /// for ever, and enough of them would take every descriptor the gateway has.
    @Test func aClientThatReadsNoAnswersIsDisconnected() async throws {
        try await withGateway(idleMs: 300, bodyMs: 10_000) { port in
            let connection = try RawConnection(port: port, receiveBuffer: 4096)
            let fd = connection.fd
            var bound = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
            // Requests until the server stops taking them (its answers, the whole API
            // document each, fill both buffers).
            let requests = Array(String(repeating: "GET /openapi.yaml HTTP/1.1\r\nHost: x\r\n\r\n", count: 100).utf8)
            for _ in 0..<200 {
                let sent = requests.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent < requests.count { break }
            }
            // Closed by the server (a reset, its unread requests dropped), with nothing read here.
            let peerHungUp: Int16 = 0x2000  // POLLRDHUP, which Glibc's module leaves out
            var closed = false
            for _ in 0..<600 where !closed {
                var poll = pollfd(fd: fd, events: peerHungUp, revents: 0)
                _ = Glibc.poll(&poll, 1, 100)
                closed = poll.revents & (peerHungUp | Int16(POLLHUP) | Int16(POLLERR)) != 0
            }
            #expect(closed)
        }
    }

    /// Idle connections from one client took every descriptor the gateway had; past
    /// `max_connections`, a new one waits to be accepted until another closes. Through the
    /// real binary: Hummingbird's test server drops the limit from the configuration. (The
    /// per-address limit, a quarter of these two by default, is off to let one client reach it.)
    /// Held connections never time out here: only a close makes room.
    @Test func connectionsPastTheLimitWaitForOneToClose() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("limited.yaml").path
        try env.yaml(logLevel: "info").replacingOccurrences(
            of: "max_body_bytes: 65536",
            with: "max_body_bytes: 65536, max_connections: 2, max_connections_per_ip: 0, idle_timeout_ms: 3600000"
        )
        .write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("gateway.log"))
        try await gateway.start()
        defer { gateway.kill(SIGKILL) }
        let held = [try RawConnection(port: gateway.port), try RawConnection(port: gateway.port)]
        // Both accepted and answered (each answer read before the next connection comes,
        // as the server takes every connection already waiting in one go).
        for connection in held {
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await connection.readAnswer().hasPrefix("HTTP/1.1 200"))
        }
        let waiting = try RawConnection(port: gateway.port)
        var bound = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(waiting.fd, SOL_SOCKET, SO_RCVTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        waiting.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let early = await waiting.readAll()
        #expect(early.text.isEmpty && !early.closed, "\(early)")
        held[0].hangUp()
        bound = timeval(tv_sec: RawConnection.readBound, tv_usec: 0)
        setsockopt(waiting.fd, SOL_SOCKET, SO_RCVTIMEO, &bound, socklen_t(MemoryLayout<timeval>.size))
        let answer = await waiting.readAll()
        #expect(answer.text.hasPrefix("HTTP/1.1 200"), "\(answer)")
    }

    /// `max_connections` alone let one address take every slot with idle keep-alives, and
    /// every other client waited. Past `max_connections_per_ip`, its next connection is
    /// answered `429` and closed; once one of its connections closes, it may open another.
    @Test func oneAddressHoldsNoMoreConnectionsThanItsShare() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        // The real binary, and raw connections only: Hummingbird's test client connects
        // at once from the same address, and took one of the two places now and then.
        let config = env.directory.appendingPathComponent("per-ip.yaml").path
        try env.yaml(logLevel: "info")
            .replacingOccurrences(
                of: "max_body_bytes: 65536",
                with: "max_body_bytes: 65536, max_connections_per_ip: 2, idle_timeout_ms: 3600000"
            )
            .write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("gateway.log"))
        try await gateway.start()
        defer { gateway.kill(SIGKILL) }
        do {
            let port = gateway.port
            func answer(_ connection: RawConnection) async -> String {
                connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                return await connection.readAnswer()
            }
            let held = [try RawConnection(port: port), try RawConnection(port: port)]
            for connection in held {
                let text = await answer(connection)
                #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
            }
            // A probe or a scrape from that address is answered all the same, and closed:
            // a health check sharing an address with busy clients must not fail.
            for path in ["/healthz", "/metrics"] {
                let probe = try RawConnection(port: port)
                probe.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                let answered = await probe.readAll()
                #expect(answered.text.hasPrefix("HTTP/1.1 200") && answered.closed, "\(answered)")
                #expect(answered.text.lowercased().contains("connection: close"), "\(answered)")
            }
            let third = try RawConnection(port: port)
            third.send("POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            let refused = await third.readAll()
            #expect(
                refused.text.hasPrefix("HTTP/1.1 429") && refused.text.contains(#""code":"rate_limited""#), "\(refused)"
            )
            #expect(refused.text.lowercased().contains("retry-after: 1") && refused.closed, "\(refused)")
            // Said in the log with what to do behind a proxy, never with the client's address.
            let log = try String(contentsOf: gateway.logURL, encoding: .utf8)
            let warning = try #require(
                log.split(separator: "\n").first { $0.contains("further ones are refused") }, "\(log)")
            #expect(warning.contains("server.trusted_proxies") && !warning.contains("127.0.0.1"), "\(warning)")
            held[0].hangUp()
            #expect(
                try await env.eventually {
                    await answer(try RawConnection(port: port)).hasPrefix("HTTP/1.1 200")
                })
            // Room for one more once the server has seen the others close.
            held[1].hangUp()
            var text = ""
            #expect(
                try await env.eventually {
                    let metrics = try RawConnection(port: port)
                    metrics.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    text = await metrics.readAll().text
                    return text.hasPrefix("HTTP/1.1 200")
                })
            // Counted (the third connection, and any the wait above tried before the close).
            #expect(text.contains(#"gateway_rate_limited_total{limit="connections_per_ip"} "#), "\(text)")
            #expect(!text.contains(#"gateway_rate_limited_total{limit="connections_per_ip"} 0"#), "\(text)")
        }
    }

    /// The per-address limit is on without `max_connections_per_ip` (here a quarter of
    /// `max_connections`), so that one client cannot hold every connection by default;
    /// `max_connections_per_ip: 0` turns it off.
    @Test(arguments: [nil, 0] as [Int?])
    func oneAddressHasAConnectionLimitByDefaultUnlessItIsTurnedOff(perIP: Int?) async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let config = env.directory.appendingPathComponent("default-per-ip.yaml").path
        try env.yaml(logLevel: "info")
            .replacingOccurrences(
                of: "max_body_bytes: 65536",
                // An idle timeout no loaded machine reaches: a held connection closed for
                // idleness would make room for the one the limit refuses.
                with: "max_body_bytes: 65536, max_connections: 40, idle_timeout_ms: 3600000"
                    + (perIP.map { ", max_connections_per_ip: \($0)" } ?? "")
            )
            .write(toFile: config, atomically: true, encoding: .utf8)
        let gateway = try GatewayProcess(config: config, logURL: env.directory.appendingPathComponent("gateway.log"))
        try await gateway.start()
        defer { gateway.kill(SIGKILL) }
        var held: [RawConnection] = []
        for _ in 0..<10 {
            let connection = try RawConnection(port: gateway.port)
            connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let text = await connection.readAnswer()
            #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
            held.append(connection)
        }
        let next = try RawConnection(port: gateway.port)
        next.send("POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        let answer = await next.readAll()
        if perIP == nil {
            #expect(answer.text.hasPrefix("HTTP/1.1 429") && answer.closed, "\(answer)")
        } else {
            // Past the place the default would have refused it: read and answered by the route.
            #expect(answer.text.hasPrefix("HTTP/1.1 4") && !answer.text.hasPrefix("HTTP/1.1 429"), "\(answer)")
        }
        withExtendedLifetime(held) {}
    }

    /// A trusted proxy carries everyone's requests: its connections are not counted.
    @Test func aTrustedProxyHoldsAsManyConnectionsAsItNeeds() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        var configuration = try env.configuration()
        configuration.server.maxConnectionsPerIP = 1
        configuration.server.trustedProxies = [try #require(IPNetwork("127.0.0.1"))]
        // The connections are opened first and wait their turn: an idle timeout no loaded
        // machine reaches, so that only the limit could close one.
        configuration.server.idleTimeoutMs = 3_600_000
        let gateway = try await Gateway.build(configuration: configuration)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let port = try #require(client.port)
            let connections = try (0..<3).map { _ in try RawConnection(port: port) }
            for connection in connections {
                connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                let answer = await connection.readAnswer()
                #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
            }
        }
    }

    @Test func aPipelinedRequestIsNotTimedWhileItWaitsForTheAnswerBeforeIt() async throws {
        // The first request's answer waits for Apple, which holds it until the test has sent
        // everything; the second, pipelined behind it, would have been closed at 1.1 s had
        // its clock started at its head.
        let env = try TestEnvironment()
        defer { env.remove() }
        let apple = FakeAppleAdServices(fallback: .organic)
        let token = "UElQRUxJTkVE"
        apple.held.withLock { $0 = [token] }
        try await Application(router: apple.router(), configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { appleClient in
                let yaml = """
                    server: { host: 127.0.0.1, port: 0, log_level: warning, idle_timeout_ms: 10000, body_timeout_ms: 100 }
                    storage: { sqlite: { path: \(env.databasePath), durability: normal } }
                    providers:
                      iad: {}
                      adservices: { endpoint: "http://127.0.0.1:\(try #require(appleClient.port))/api/v1/", answer_wait_ms: 30000, timeout_ms: 60000 }
                    sinks: { local: { type: sqlite } }
                    """
                let config = try ConfigLoader.parse(
                    yaml: yaml, file: "pipelined.yaml", environment: [:], registry: .builtIn)
                let gateway = try await Gateway.build(configuration: config)
                try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                    let connection = try RawConnection(port: try #require(client.port))
                    let first = #"{"token":"\#(token)","app_id":"1","app_user_id":"p1"}"#
                    let second = IAdPayloads.attributed(user: "p2").replacingOccurrences(of: "\n", with: "")
                    let half = second.utf8.count / 2
                    connection.send(
                        "POST /v1/adservices HTTP/1.1\r\nHost: x\r\nContent-Length: \(first.utf8.count)\r\n\r\n\(first)"
                            + "POST /v1/iad HTTP/1.1\r\nHost: x\r\nContent-Length: \(second.utf8.count)\r\n\r\n"
                            + String(second.prefix(half)))
                    // The rest of the second body arrives while the first is still being answered.
                    try await Task.sleep(for: .milliseconds(1500))
                    #expect(connection.send(String(second.dropFirst(half))))
                    try await Task.sleep(for: .milliseconds(1500))
                    connection.send("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    apple.held.withLock { $0 = [] }
                    let answer = await connection.readAll()
                    let statuses = answer.text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { $0.prefix(3) }
                    #expect(statuses == ["202", "202", "200"], "\(answer.text.prefix(300))")
                }
            }
    }
}
