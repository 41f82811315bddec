import Hummingbird
import Synchronization

/// The HTTP routes as they stand: made from the enabled providers at the start, and again
/// after each reload. A request is answered by the routes of the moment it arrived, and
/// the next one by the new routes; what the routes keep between requests (caches, the
/// operator-key throttle) lives in ``RouteState`` and outlives a rebuild.
final class LiveRouter: HTTPResponder, Sendable {
    typealias Context = GatewayRequestContext
    private let make: @Sendable () -> RouterResponder<Context>
    private let current: Mutex<RouterResponder<Context>>

    init(make: @escaping @Sendable () -> RouterResponder<Context>) {
        self.make = make
        current = Mutex(make())
    }

    /// Makes the routes again, from the providers as they stand now.
    func rebuild() {
        let routes = make()
        current.withLock { $0 = routes }
    }

    func respond(to request: Request, context: Context) async throws -> Response {
        let routes = current.withLock { $0 }
        return try await routes.respond(to: request, context: context)
    }
}
