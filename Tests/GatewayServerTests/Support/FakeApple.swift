import Foundation
import Hummingbird
import Synchronization

/// A local stand-in for Apple's AdServices attribution endpoint that checks requests as
/// Apple would (`POST`, `Content-Type: text/plain`, the bare token as the body) and
/// answers from a script per token.
final class FakeAppleAdServices: Sendable {
    /// One scripted answer: a status and body, optionally after a delay.
    struct Reply: Sendable {
        var status: Int
        var body: String
        var delay: Duration = .zero

        static func attributed(keywordID: Int64 = 87_675_432, conversion: String = "Download") -> Reply {
            Reply(
                status: 200,
                body: """
                    {"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"\(conversion)",
                    "claimType":"Click","adGroupId":542317095,"countryOrRegion":"US","keywordId":\(keywordID),
                    "adId":542317136,"clickDate":"2024-10-08T17:17Z","supplyPlacement":"APPSTORE_SEARCH_RESULTS"}
                    """)
        }
        static let organic = Reply(status: 200, body: #"{"attribution":false}"#)
        static let notFound = Reply(status: 404, body: "")
        static let badToken = Reply(status: 400, body: "")
        static let serverError = Reply(status: 500, body: "")
    }

    private let scripts = Mutex<[String: [Reply]]>([:])
    private let calls = Mutex<[String: Int]>([:])
    private let refusals = Mutex<[String]>([])
    /// Answered to every token whose script is used up.
    let fallback: Mutex<Reply>
    /// Tokens whose answer waits until the test lets it go (at most a minute): work that
    /// stays pending exactly as long as a test needs, whatever the machine's speed.
    let held = Mutex<Set<String>>([])

    init(fallback: Reply = .attributed()) {
        self.fallback = Mutex(fallback)
    }

    func script(_ token: String, _ replies: [Reply]) {
        scripts.withLock { $0[token] = replies }
    }

    func calls(_ token: String) -> Int { calls.withLock { $0[token] ?? 0 } }
    var totalCalls: Int { calls.withLock { $0.values.reduce(0, +) } }
    /// Requests that Apple would have refused as malformed.
    var refused: [String] { refusals.withLock { $0 } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("/api/v1/") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 64 * 1024)
            let token = String(buffer: body)
            guard request.headers[.contentType] == "text/plain", !token.isEmpty, !token.contains("{") else {
                self.refusals.withLock { $0.append("content-type \(request.headers[.contentType] ?? "none")") }
                return Response(status: .badRequest)
            }
            self.calls.withLock { $0[token, default: 0] += 1 }
            let reply =
                self.scripts.withLock { scripts -> Reply? in
                    guard var list = scripts[token], !list.isEmpty else { return nil }
                    let next = list.removeFirst()
                    scripts[token] = list
                    return next
                } ?? self.fallback.withLock { $0 }
            if reply.delay > .zero { try await Task.sleep(for: reply.delay) }
            for _ in 0..<3000 where self.held.withLock({ $0.contains(token) }) {
                try await Task.sleep(for: .milliseconds(20))
            }
            return Response(
                status: .init(code: reply.status), headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: reply.body)))
        }
        return router
    }
}
