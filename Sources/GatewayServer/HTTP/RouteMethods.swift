import HTTPTypes
import Hummingbird
import Synchronization

/// The methods each route path answers, so that a request with a path the gateway serves
/// but another method gets `405` with `Allow` rather than a `404` that says the path is wrong.
final class RouteMethods: Sendable {
    private let methods = Mutex<[String: [HTTPRequest.Method]]>([:])

    /// Takes the router's routes once they are all added. Paths with captures or wildcards
    /// are left out: none of the gateway's has one, and a `404` stays right for them.
    func learn<Context>(_ router: Router<Context>) {
        var table: [String: [HTTPRequest.Method]] = [:]
        for route in router.routes {
            let path = route.path.description
            guard !path.contains(":"), !path.contains("*"), !path.contains("{") else { continue }
            let key = Self.key(path)
            if !(table[key] ?? []).contains(route.method) { table[key, default: []].append(route.method) }
        }
        methods.withLock { $0 = table }
    }

    /// The methods `path` answers, in the order they were added; empty for an unknown path.
    func allowed(for path: String) -> [HTTPRequest.Method] {
        let key = Self.key(path)
        return methods.withLock { $0[key] ?? [] }
    }

    /// The router's trie ignores empty segments: `/v1/iad/` is `/v1/iad`.
    private static func key(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }
}
