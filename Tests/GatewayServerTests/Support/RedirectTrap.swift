import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// Two local servers for checking that a sink never follows a redirect: the destination
/// answers every `POST` with the next of `statuses` (a `3xx`) and a `Location` naming
/// the other server, which records every call it gets. A sink that followed the
/// redirect would show up there, with the headers it carried.
final class RedirectTrap: Sendable {
    struct Call: Sendable {
        let method: String
        let headers: [String: String]
        let body: Data
    }

    private let statuses: Mutex<[Int]>
    private let redirected = Mutex(0)
    private let stolen = Mutex<[Call]>([])

    init(statuses: [Int]) {
        self.statuses = Mutex(statuses)
    }

    /// Requests the destination answered with a redirect.
    var redirects: Int { redirected.withLock { $0 } }
    /// Requests that reached the other server.
    var calls: [Call] { stolen.withLock { $0 } }

    /// Runs both servers; `body` gets their base URLs (`http://127.0.0.1:PORT`). The
    /// destination answers on `paths`.
    func run(
        paths: [String], _ body: @escaping @Sendable (_ destination: String, _ elsewhere: String) async throws -> Void
    ) async throws {
        let other = Router()
        for method in [HTTPRequest.Method.get, .post, .put] {
            other.on("/stolen", method: method) { request, _ -> Response in
                let received = try await request.body.collect(upTo: 10 << 20)
                var headers: [String: String] = [:]
                for field in request.headers { headers[field.name.canonicalName] = field.value }
                let body = Data(received.readableBytesView)
                self.stolen.withLock { $0.append(Call(method: request.method.rawValue, headers: headers, body: body)) }
                return Response(status: .ok)
            }
        }
        try await Application(router: other, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
            .test(.live) { otherClient in
                let elsewhere = "http://127.0.0.1:\(try #require(otherClient.port))"
                let destination = Router()
                for path in paths {
                    destination.post(RouterPath(path)) { _, _ -> Response in
                        let status = self.statuses.withLock { $0.isEmpty ? 302 : $0.removeFirst() }
                        self.redirected.withLock { $0 += 1 }
                        return Response(status: .init(code: status), headers: [.location: elsewhere + "/stolen"])
                    }
                }
                let address = ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0))
                try await Application(router: destination, configuration: address)
                    .test(.live) { client in
                        try await body("http://127.0.0.1:\(try #require(client.port))", elsewhere)
                    }
            }
    }
}
