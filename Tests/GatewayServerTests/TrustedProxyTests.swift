import Foundation
import GatewayConfig
import GatewayCore
import Hummingbird
import HummingbirdTesting
import HTTPTypes
import NIOCore
import Testing

@testable import GatewayServer

/// Behind a load balancer the per-IP limit is the client's, read through the trusted
/// proxies in `X-Forwarded-For`, and nobody else can choose their own address.
@Suite struct TrustedProxyTests {
    static let proxies = ["10.0.0.0/8", "2001:db8:aa::/48"].compactMap(IPNetwork.init)

    func client(peer: String, forwardedFor: [String], trusted: [IPNetwork] = proxies) -> String? {
        var headers = HTTPFields()
        for line in forwardedFor { headers.append(HTTPField(name: ClientAddress.forwardedFor, value: line)) }
        let address = ClientAddress.resolve(peer: IPAddress(peer)!, headers: headers, trusted: trusted)
        return RateLimitMiddleware.ipCaller(address)
    }

    @Test func theClientIsTheNearestAddressThatIsNotATrustedProxy() {
        // The proxy appended the address it got the request from.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["203.0.113.9"]) == "ip:203.0.113.9")
        // The client wrote its own entry first: it is left of the proxy's and ignored.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["198.51.100.1, 203.0.113.9"]) == "ip:203.0.113.9")
        // Two proxies in a row, the header split over two lines.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["203.0.113.9", "10.4.0.2"]) == "ip:203.0.113.9")
        // Every hop trusted: the furthest one.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["10.9.9.9,10.4.0.2"]) == "ip:10.9.9.9")
        // No header: the proxy itself.
        #expect(client(peer: "10.0.0.1", forwardedFor: []) == "ip:10.0.0.1")
    }

    @Test func nobodyButATrustedProxyIsBelieved() {
        // A client straight on the internet names any address it likes: ignored.
        #expect(client(peer: "203.0.113.9", forwardedFor: ["198.51.100.1"]) == "ip:203.0.113.9")
        // With no trusted proxies configured the header means nothing.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["198.51.100.1"], trusted: []) == "ip:10.0.0.1")
        // A hop that is not an address stops the walk at the last proxy anyone vouched for.
        #expect(client(peer: "10.0.0.1", forwardedFor: ["198.51.100.1, unknown"]) == "ip:10.0.0.1")
        #expect(client(peer: "10.0.0.1", forwardedFor: ["198.51.100.1, 10.4.0.2, example.com"]) == "ip:10.0.0.1")
        #expect(client(peer: "10.0.0.1", forwardedFor: ["198.51.100.1, 10.4.0.2:80x"]) == "ip:10.0.0.1")
    }

    @Test func hopsAreReadWithPortsBracketsAndEitherFamily() {
        #expect(client(peer: "10.0.0.1", forwardedFor: ["203.0.113.9:5120"]) == "ip:203.0.113.9")
        #expect(
            client(peer: "10.0.0.1", forwardedFor: ["\"[2001:db8:1:2::7]:443\""])
                == client(peer: "2001:db8:1:2::1", forwardedFor: []))
        #expect(
            client(peer: "10.0.0.1", forwardedFor: ["[2001:db8:1:2::7]"])
                == client(peer: "2001:db8:1:2::1", forwardedFor: []))
        #expect(
            client(peer: "10.0.0.1", forwardedFor: ["2001:db8:1:2::7"])
                == client(peer: "2001:db8:1:2::1", forwardedFor: []))
        // An IPv6 proxy, and an IPv4 proxy seen through a dual-stack listener.
        #expect(client(peer: "2001:db8:aa:1::1", forwardedFor: ["203.0.113.9"]) == "ip:203.0.113.9")
        #expect(client(peer: "::ffff:10.0.0.1", forwardedFor: ["203.0.113.9"]) == "ip:203.0.113.9")
        #expect(client(peer: "2001:db8:ab::1", forwardedFor: ["203.0.113.9"]) != "ip:203.0.113.9")
    }

    @Test func rangesAreReadAsCIDRAndRefusedWhenTheyAreNot() throws {
        let network = try #require(IPNetwork("10.0.0.0/8"))
        #expect(network.contains(IPAddress("10.255.0.1")!))
        #expect(!network.contains(IPAddress("11.0.0.1")!))
        #expect(IPNetwork("192.0.2.7")!.contains(IPAddress("::ffff:192.0.2.7")!))
        #expect(!IPNetwork("192.0.2.7")!.contains(IPAddress("192.0.2.8")!))
        #expect(IPNetwork("2001:db8::/31")!.contains(IPAddress("2001:db9::1")!))
        #expect(!IPNetwork("2001:db8::/32")!.contains(IPAddress("2001:db9::1")!))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "10.0.0.0/-1", "10.0.0/8", "2001:db8::/129", "proxy.internal", ""] {
            #expect(IPNetwork(bad) == nil, "\(bad)")
        }

        // Public ranges of a whole cloud or carrier (`3.0.0.0/8` is Amazon's) hold clients.
        let wide = [
            "0.0.0.0/0", "::/0", "0.0.0.0/1", "10.0.0.0/7", "::/1", "::/80", "::ffff:0:0/96", "8000::/1", "3.0.0.0/8",
            "104.0.0.0/12", "172.0.0.0/11", "::ffff:3.0.0.0/104", "2600::/12", "2a06:98c0::/28", "64:ff9b::/96",
            "64:ff9b:1::/48",
        ]
        let yaml =
            "server: { trusted_proxies: [10.0.0.0/8, \"::1\", 10.0.0.0/33, "
            + wide.map { "\"\($0)\"" }.joined(separator: ", ") + "] }"
        let error = try #require(throws: ConfigError.self) {
            try ConfigLoader.parse(yaml: yaml, file: "proxies.yaml", environment: [:], registry: .builtIn)
        }
        let issues = error.issues.map(\.description).joined(separator: "\n")
        #expect(issues.contains("`10.0.0.0/33` is not an IP address or a CIDR range"))
        for range in wide {
            #expect(issues.contains("`\(range)` is wider than any proxy's network"), "\(range)")
        }
        // Private networks as wide as they are, and a provider's published ranges.
        let accepted = [
            "10.0.0.0/8", "::1", "fc00::/7", "::ffff:10.0.0.0/104", "172.16.0.0/12", "100.64.0.0/10", "104.16.0.0/13",
            "2a06:98c0::/29", "2400:cb00::/32",
        ]
        let good = try ConfigLoader.parse(
            yaml: "server: { trusted_proxies: [" + accepted.map { "\"\($0)\"" }.joined(separator: ", ") + "] }",
            file: "proxies.yaml", environment: [:], registry: .builtIn)
        #expect(good.server.trustedProxies.count == accepted.count)
    }

    /// Through the real server: each client behind the proxy has its own bucket, and a
    /// client cannot escape its own by writing the header.
    @Test func thePerIPLimitIsEachClientsBehindTheProxy() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        func statuses(trusting trusted: [IPNetwork], _ forwardedFor: [String]) async throws -> [Int] {
            var configuration = try env.configuration()
            configuration.server.rateLimits.perIP = .init(rate: 0.001, burst: 1)
            configuration.server.trustedProxies = trusted
            let gateway = try await Gateway.build(configuration: configuration)
            return try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
                var statuses: [Int] = []
                for hops in forwardedFor {
                    let body = ByteBuffer(string: IAdPayloads.attributed(user: "proxied-\(UUID())"))
                    let response = try await client.execute(
                        uri: "/v1/iad", method: .post, headers: [ClientAddress.forwardedFor: hops], body: body)
                    statuses.append(Int(response.status.code))
                }
                return statuses
            }
        }
        // The test's client is the proxy, on loopback.
        let loopback = [IPNetwork("127.0.0.1")!]
        #expect(
            try await statuses(trusting: loopback, ["203.0.113.1", "203.0.113.2", "203.0.113.1"]) == [202, 202, 429])
        // A client naming someone else left of the proxy's entry is still itself.
        #expect(try await statuses(trusting: loopback, ["203.0.113.3", "198.51.100.1, 203.0.113.3"]) == [202, 429])
        // Untrusted, the header is the caller's own words: one bucket, the peer's.
        #expect(try await statuses(trusting: [], ["203.0.113.4", "203.0.113.5"]) == [202, 429])
    }
}
