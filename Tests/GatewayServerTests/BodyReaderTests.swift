import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import Synchronization
import Testing

@testable import GatewayServer

/// The body reader's own clock: a chunk that arrives past `body_timeout_ms` is refused
/// with `408` there and then (the connection's deadline, a second later, is only the
/// fallback for a body that stops arriving), and a body within its limits is collected.
@Suite struct BodyReaderTests {
    func reader(limit: Int = 1_000, timeoutMs: Int) -> BodyReader {
        var settings = ServerSettings()
        settings.maxBodyBytes = limit
        settings.bodyTimeoutMs = timeoutMs
        return BodyReader(settings)
    }

    /// A request whose body yields `chunks`, each after its delay (measured from the
    /// previous one), so that no delay depends on when the reader starts.
    func request(_ chunks: [(delay: Duration, text: String)]) -> Request {
        let next = Mutex(0)
        let body = AsyncStream<ByteBuffer> {
            let index = next.withLock { index in
                defer { index += 1 }
                return index
            }
            guard index < chunks.count else { return nil }
            try? await Task.sleep(for: chunks[index].delay)
            return ByteBuffer(string: chunks[index].text)
        }
        return Request(
            head: HTTPRequest(method: .post, scheme: "http", authority: "gateway", path: "/v1/iad"),
            body: RequestBody(asyncSequence: body))
    }

    @Test func aChunkArrivingPastTheDeadlineIsRefused408() async throws {
        // The second chunk comes at least 300 ms after the first, past a 50 ms deadline
        // however fast or slow the machine.
        let request = request([(.zero, "{\"app_id\":"), (.milliseconds(300), "\"1\"}")])
        do {
            _ = try await reader(timeoutMs: 50).collect(request)
            Issue.record("a body past its deadline was collected")
        } catch let error as GatewayError {
            #expect(error.code.name == "request_timeout")
            #expect(error.code.httpStatus == 408)
        }
    }

    @Test func aBodyWithinItsDeadlineAndLimitIsCollected() async throws {
        let request = request([(.zero, "{\"app_id\":"), (.zero, "\"1\"}")])
        let body = try await reader(timeoutMs: 60_000).collect(request)
        #expect(String(decoding: body, as: UTF8.self) == #"{"app_id":"1"}"#)
    }

    @Test func aBodyPastTheLimitIsRefused413WhileItArrives() async throws {
        let request = request([
            (.zero, String(repeating: "x", count: 600)), (.zero, String(repeating: "x", count: 600)),
        ])
        do {
            _ = try await reader(limit: 1_000, timeoutMs: 60_000).collect(request)
            Issue.record("a body past the limit was collected")
        } catch let error as GatewayError {
            #expect(error.code.httpStatus == 413)
        }
    }
}
