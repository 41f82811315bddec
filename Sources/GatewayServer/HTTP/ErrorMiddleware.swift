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
            let mapped: GatewayError
            switch error.status {
            case .notFound:
                mapped = GatewayError(.notFound, "no route for \(request.method) \(request.uri.path)")
            case .methodNotAllowed:
                mapped = GatewayError(.methodNotAllowed, "\(request.method) is not allowed on \(request.uri.path)")
            case .contentTooLarge:
                mapped = GatewayError(.payloadTooLarge, "the body is too large")
            default:
                mapped = GatewayError(
                    GatewayError.Code("http_\(error.status.code)", httpStatus: error.status.code),
                    error.body ?? error.status.reasonPhrase)
            }
            return try mapped.response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: type(of: error)))"])
            return try GatewayError(.internalError, "internal error; see the gateway's log")
                .response(from: request, context: context)
        }
    }
}
