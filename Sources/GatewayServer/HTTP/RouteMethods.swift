import HTTPTypes
import Hummingbird
import Synchronization

/// The methods each route path answers, so that a request with a path the gateway serves
/// but another method gets `405` with `Allow` rather than a `404` that says the path is wrong.
final class RouteMethods: Sendable {
    private let methods = Mutex<[String: [HTTPRequest.Method]]>([:])
    /// Paths with a capture (`/v1/users/forget/{request_id}`), by their segments; a capture
    /// matches any one segment. Wildcards are left out: none of the gateway's paths has one.
    private let patterns = Mutex<[(segments: [Substring?], methods: [HTTPRequest.Method])]>([])

    /// Takes the router's routes once they are all added.
    func learn<Context>(_ router: Router<Context>) {
        var table: [String: [HTTPRequest.Method]] = [:]
        var captured: [(segments: [Substring?], methods: [HTTPRequest.Method])] = []
        for route in router.routes {
            let path = route.path.description
            guard !path.contains("*") else { continue }
            let segments = Self.segments(path)
            if segments.contains(where: Self.isCapture) {
                let pattern = segments.map { Self.isCapture($0) ? nil : $0 }
                if let index = captured.firstIndex(where: { $0.segments == pattern }) {
                    if !captured[index].methods.contains(route.method) { captured[index].methods.append(route.method) }
                } else {
                    captured.append((pattern, [route.method]))
                }
                continue
            }
            let key = segments.joined(separator: "/")
            if !(table[key] ?? []).contains(route.method) { table[key, default: []].append(route.method) }
        }
        methods.withLock { $0 = table }
        patterns.withLock { $0 = captured }
    }

    /// The methods `path` answers, in the order they were added; empty for an unknown path.
    func allowed(for path: String) -> [HTTPRequest.Method] {
        let segments = Self.segments(path)
        if let exact = methods.withLock({ $0[segments.joined(separator: "/")] }) { return exact }
        return patterns.withLock { patterns in
            patterns.first { pattern in
                pattern.segments.count == segments.count
                    && zip(pattern.segments, segments).allSatisfy { expected, segment in
                        expected.map { $0 == segment } ?? true
                    }
            }?.methods ?? []
        }
    }

    /// The router's trie ignores empty segments: `/v1/iad/` is `/v1/iad`.
    private static func segments(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }

    private static func isCapture(_ segment: Substring) -> Bool {
        segment.hasPrefix(":") || segment.hasPrefix("{")
    }
}
