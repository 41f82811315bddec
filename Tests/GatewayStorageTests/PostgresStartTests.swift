import Foundation
import GatewayCore
import GatewayPostgres
import Testing

/// A store that cannot reach its server says so within `timeout_ms`, with the server's or
/// the system's own reason, not the pool's.
@Suite struct PostgresStartTests {
    @Test func anUnreachableServerIsNamedWithTheSystemsReason() async throws {
        // Nothing listens on port 1.
        var url = try PostgresURL("postgres://gw:a-password-0123@127.0.0.1:1/x")
        url.timeout = .seconds(2)
        await #expect {
            _ = try await PostgresStore(url: url, poolSize: 1)
        } throws: { error in
            let text = "\(error)"
            return error is StoreNotReady && text.contains("Connection refused") && !text.contains("a-password-0123")
        }
    }
}
