import Hummingbird

/// Gives every request an id that its log lines carry and its answer echoes in
/// `X-Request-Id`: the caller's own id when it sends a sane one (so a backend can follow
/// its call into our logs), Hummingbird's otherwise.
struct RequestIDMiddleware<Context: RequestContext>: RouterMiddleware {
    static var header: HTTPFields.Element.Name { HTTPFields.Element.Name("X-Request-Id")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        if let given = Self.callersID(in: request.headers) {
            context.logger[metadataKey: "hb.request.id"] = .string(given)
        }
        let id = context.logger[metadataKey: "hb.request.id"]?.description ?? ""
        var response = try await next(request, context)
        response.headers[Self.header] = id
        return response
    }

    /// The caller's own `X-Request-Id`, when it is sane.
    static func callersID(in headers: HTTPFields) -> String? {
        headers[header].flatMap { isSane($0) ? $0 : nil }
    }

    /// Up to 128 letters, digits, `-`, `_`, `.` or `:`: nothing that could forge a log line.
    static func isSane(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.utf8.allSatisfy { c in
                (c >= 48 && c <= 58) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 95 || c == 46
            }
    }
}
