import GatewayCore
import GatewayStorage
import HTTPTypes
import Hummingbird
import Logging
import Synchronization

/// Turns every error into the gateway's JSON error shape. Unexpected errors are logged
/// with the request id and answered `500 internal_error` without details, which might
/// carry secrets or internals.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    /// During an outage (a full disk) every request fails alike: one line a second per
    /// error code says so, with how many of that code it held back since its last line.
    var failureLines = FailureLines()
    /// The methods each path answers, for `405` and its `Allow`.
    let routeMethods: RouteMethods
    /// The shapes of the routes that answer errors in one of their own.
    var errorAnswers = RouteErrorAnswers()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            switch error {
            case let error as GatewayError where error.code.httpStatus >= 500:
                if let held = failureLines.pass(error.code.name) {
                    var metadata: Logger.Metadata = ["error": "\(error)"]
                    if let cause = error.cause { metadata["cause"] = "\(CommitHealth.describe(cause))" }
                    if held > 0 { metadata["similar_failures_not_logged"] = "\(held)" }
                    context.logger.error("request failed", metadata: metadata)
                }
            case is GatewayError, is HTTPError:
                break
            default:
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            }
            var allowed: [HTTPRequest.Method] = []
            if let error = error as? HTTPError, error.status == .notFound {
                allowed = routeMethods.allowed(for: request.uri.path)
            }
            let answer =
                allowed.isEmpty
                ? Self.answer(to: error, for: request)
                : GatewayError(.methodNotAllowed, "\(request.method) is not allowed on \(request.uri.path)")
            var response = try errorAnswers.response(to: answer, for: request, context: context)
            if !allowed.isEmpty { response.headers[.allow] = allowed.map(\.rawValue).joined(separator: ", ") }
            // Nothing was recorded and the caller must send it again: not at once, as every
            // caller would during an outage (a full disk).
            if answer.code == .storageUnavailable { response.headers[.retryAfter] = String(Self.storageRetryAfter) }
            return response
        }
    }

    /// Seconds a caller is asked to wait after `storage_unavailable`.
    static var storageRetryAfter: Int { 5 }

    /// What any error a route throws is answered as: the gateway's own as they are,
    /// Hummingbird's mapped to the gateway's codes, anything else `500` with no details.
    static func answer(to error: any Error, for request: Request) -> GatewayError {
        switch error {
        case let error as GatewayError: error
        case let error as HTTPError: answer(to: error, for: request)
        default: GatewayError(.internalError, "internal error; see the gateway's log")
        }
    }

    /// What Hummingbird's own errors are answered as.
    static func answer(to error: HTTPError, for request: Request) -> GatewayError {
        switch error.status {
        case .notFound:
            GatewayError(.notFound, "no route for \(request.method) \(request.uri.path)")
        case .methodNotAllowed:
            GatewayError(.methodNotAllowed, "\(request.method) is not allowed on \(request.uri.path)")
        case .contentTooLarge:
            GatewayError(.payloadTooLarge, "the body is too large")
        default:
            GatewayError(
                GatewayError.Code("http_\(error.status.code)", httpStatus: error.status.code),
                error.body ?? error.status.reasonPhrase)
        }
    }
}

/// One ``OncePerInterval`` per error code, so that one failure does not hide another kind.
final class FailureLines: Sendable {
    private let gates = Mutex<[String: OncePerInterval]>([:])

    func pass(_ code: String) -> Int? {
        let gate = gates.withLock { gates in
            if let gate = gates[code] { return gate }
            let gate = OncePerInterval(.seconds(1))
            gates[code] = gate
            return gate
        }
        return gate.pass()
    }
}
