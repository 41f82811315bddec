import GatewayCore
import Hummingbird

/// Turns every error into the gateway's JSON error shape. Unexpected errors are logged
/// with the request id and answered `500 internal_error` without details, which might
/// carry secrets or internals.
struct ErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as GatewayError {
            if error.code.httpStatus >= 500 {
                context.logger.error("request failed", metadata: ["error": "\(error)"])
            }
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.answer(to: error, for: request).response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            return try GatewayError(.internalError, "internal error; see the gateway's log")
                .response(from: request, context: context)
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
