import GatewayCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IP address as 16 bytes, IPv4 written as IPv4-mapped IPv6 (`::ffff:a.b.c.d`), so
/// that one comparison serves a listener's IPv4 peers, its dual-stack peers and ranges
/// written either way.
public struct IPAddress: Sendable, Hashable {
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Parses `192.0.2.7` or `2001:db8::1`; nil for anything else (ports, brackets,
    /// zone ids and names included).
    public init?(_ text: some StringProtocol) {
        let text = String(text)
        guard !text.isEmpty, text.utf8.count <= 45 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.bytes = Self.mapped(withUnsafeBytes(of: v4) { Array($0) })
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        self.bytes = withUnsafeBytes(of: v6) { Array($0) }
    }

    /// The IPv4-mapped form of four bytes.
    public static func mapped(_ v4: [UInt8]) -> [UInt8] {
        [UInt8](repeating: 0, count: 10) + [0xff, 0xff] + v4
    }

    /// Whether the address is IPv4 (or IPv4-mapped IPv6).
    public var isIPv4: Bool {
        bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
    }
}

/// A range of addresses in CIDR notation (`10.0.0.0/8`, `2001:db8::/32`), or one address.
public struct IPNetwork: Sendable, Hashable {
    public let address: IPAddress
    /// Leading bits that must match, out of 128 (an IPv4 prefix counts 96 more).
    public let prefixBits: Int

    /// Parses `address` or `address/prefix`; nil when either part is not one.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let width = address.isIPv4 && !parts[0].contains(":") ? 32 : 128
        var prefix = width
        if parts.count == 2 {
            guard parts[1].utf8.count <= 3, parts[1].isASCIIDigits,
                let bits = Int(parts[1]), bits <= width
            else { return nil }
            prefix = bits
        }
        self.address = address
        prefixBits = prefix + (128 - width)
    }

    /// An IPv4 range wider than a /8, an IPv6 one wider than a /7, one holding every IPv4
    /// address, or a public range wider than a proxy provider's published ones (IPv4 /13,
    /// IPv6 /29: Cloudflare's widest, `104.16.0.0/13` and `2a06:98c0::/29`). Private
    /// networks (`10.0.0.0/8`, `fc00::/7`) may be as wide as they are.
    public var isWiderThanAnyProxyNetwork: Bool {
        if address.isIPv4 && prefixBits >= 96 {
            return prefixBits < 96 + 8 || (prefixBits < 96 + 13 && !isPrivate)
        }
        let everyIPv4 = prefixBits <= 96 && contains(IPAddress(bytes: IPAddress.mapped([0, 0, 0, 0]))!)
        // NAT64 prefixes hold every IPv4 address too, translated: clients behind them.
        let translated = Self.nat64.contains { $0.prefixBits >= prefixBits && contains($0.address) }
        return prefixBits < 7 || everyIPv4 || translated || (prefixBits < 29 && !isPrivate)
    }

    /// The well-known NAT64 prefix (RFC 6052) and the local-use one (RFC 8215).
    static let nat64 = ["64:ff9b::/96", "64:ff9b:1::/48"].compactMap(IPNetwork.init)

    /// Networks no public client is in: the private, shared (carrier NAT), loopback and
    /// link-local ones.
    static let privateNetworks = [
        "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "fc00::/7", "fe80::/10", "::1",
    ].compactMap(IPNetwork.init)

    /// Whether the whole range lies in a private network.
    var isPrivate: Bool {
        Self.privateNetworks.contains { $0.prefixBits <= prefixBits && $0.contains(address) }
    }

    public func contains(_ other: IPAddress) -> Bool {
        var bits = prefixBits
        for index in 0..<16 where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
            if address.bytes[index] & mask != other.bytes[index] & mask { return false }
            bits -= 8
        }
        return true
    }
}
