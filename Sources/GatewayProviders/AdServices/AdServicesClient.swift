import AsyncHTTPClient
import Foundation
import GatewayCore
import NIOCore

/// Posts attribution tokens to Apple's AdServices API.
struct AdServicesClient: Sendable {
    /// What Apple answered, reduced to what decides the next step.
    enum Reply: Sendable, Equatable {
        case answer(Data)
        case badToken
        case notFound
        /// A `5xx`, a `429` or another status worth retrying; `retryAfter` when Apple gave one.
        case unavailable(status: Int, retryAfter: Duration?)
        /// Timeouts and connection errors.
        case transport(String)
    }

    let endpoint: String
    let timeout: Duration
    let client: HTTPClient

    /// The largest answer read; Apple's are a few hundred bytes.
    static let maxAnswerBytes = 64 * 1024

    func post(token: String) async -> Reply {
        var request = HTTPClientRequest(url: endpoint)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "text/plain")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(ByteBuffer(string: token))
        do {
            let exchange = try await client.exchange(request, timeout: timeout, bodyLimit: Self.maxAnswerBytes)
            let response = exchange.response
            switch response.status.code {
            case 200:
                switch exchange.body {
                case .success(let body): return .answer(Data(body.readableBytesView))
                // Not Apple's answer (a portal's page, a proxy's dump): an unreadable one,
                // kept as such after its retries, not retried as an outage for a day.
                case .failure(is NIOTooManyBytesError):
                    return .answer(Data("(an answer of more than \(Self.maxAnswerBytes) bytes, not kept)".utf8))
                case .failure(let error): throw error
                }
            case 400: return .badToken
            case 404: return .notFound
            default:
                let retryAfter = response.headers.first(name: "Retry-After").flatMap { RetryAfter.parse($0) }
                return .unavailable(status: Int(response.status.code), retryAfter: retryAfter)
            }
        } catch {
            // The error's text names the host and the failure, never the token.
            return .transport(String(describing: error))
        }
    }
}
