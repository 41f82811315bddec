import GatewayConfig
import GatewayCore
import HTTPTypes
import NIOCore

/// The address a request comes from, seen through the gateway's trusted proxies.
///
/// Behind a load balancer every peer is the balancer, and one per-IP bucket would limit
/// all clients together. A trusted proxy appends the address it got the request from to
/// `X-Forwarded-For`; reading that list from the right, the first address that is not a
/// trusted proxy is the client. Everything left of it was written by the client and is
/// never believed, so that nobody can pick their own bucket.
enum ClientAddress {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// The client of a request from `peer` carrying `headers`.
    static func resolve(peer: IPAddress, headers: HTTPFields, trusted: [IPNetwork]) -> IPAddress {
        guard !trusted.isEmpty, isTrusted(peer, trusted) else { return peer }
        // Several header lines are one list, in order (RFC 9110 §5.3).
        let hops = headers[values: forwardedFor].flatMap { $0.split(separator: ",") }
        var client = peer
        for hop in hops.reversed() {
            // A hop that is not an address (`unknown`, a name, garbage) ends the walk at
            // the last trusted proxy, which is the nearest address anyone vouched for.
            guard let address = parse(hop) else { break }
            client = address
            if !isTrusted(address, trusted) { break }
        }
        return client
    }

    /// The peer of a connection as an address, nil for a Unix socket.
    static func peer(_ address: SocketAddress?) -> IPAddress? {
        switch address {
        case .v4(let v4)?:
            return withUnsafeBytes(of: v4.address.sin_addr) { IPAddress(bytes: IPAddress.mapped(Array($0))) }
        case .v6(let v6)?:
            return withUnsafeBytes(of: v6.address.sin6_addr) { IPAddress(bytes: Array($0)) }
        default:
            return nil
        }
    }

    /// One hop as proxies write it: `192.0.2.7`, `192.0.2.7:5120`, `2001:db8::1`,
    /// `[2001:db8::1]` or `[2001:db8::1]:5120`.
    static func parse(_ hop: Substring) -> IPAddress? {
        var text = Substring(hop.trimmingWhitespace())
        if text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 { text = text.dropFirst().dropLast() }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().isASCIIDigits) else { return nil }
            return IPAddress(text[text.index(after: text.startIndex)..<close])
        }
        // One colon is an IPv4 address and its port; more is IPv6.
        if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            guard text[text.index(after: colon)...].isASCIIDigits else { return nil }
            return IPAddress(text[..<colon])
        }
        return IPAddress(text)
    }

    static func isTrusted(_ address: IPAddress, _ trusted: [IPNetwork]) -> Bool {
        trusted.contains { $0.contains(address) }
    }
}
