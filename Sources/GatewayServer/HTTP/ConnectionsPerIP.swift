import GatewayConfig
import GatewayCore
import Hummingbird
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Open connections per client address, shared by every connection's handler.
final class ConnectionCounts: Sendable {
    let limit: Int
    private let counts = Mutex<[String: Int]>([:])
    let logger: Logger
    /// One warning a minute: a proxy not listed as trusted has every connection refused
    /// past the limit, and a metric alone did not tell the operator why.
    private let refusals = OncePerInterval(.seconds(60))

    init(limit: Int, logger: Logger) {
        self.limit = limit
        self.logger = logger
    }

    /// Logs a refusal, at most once a minute with how many it stands for; never the
    /// address, which is the client's.
    func refused() {
        guard let held = refusals.pass() else { return }
        logger.warning(
            "a client address holds server.max_connections_per_ip connections; further ones are refused",
            metadata: [
                "limit": "\(limit)", "refused": "\(held + 1)",
                "hint": "behind a proxy or load balancer, list it in server.trusted_proxies",
            ])
    }

    /// Counts a new connection of `key`; false when it already holds `limit`.
    func admit(_ key: String) -> Bool {
        counts.withLock { counts in
            let open = counts[key, default: 0]
            guard open < limit else { return false }
            counts[key] = open + 1
            return true
        }
    }

    func release(_ key: String) {
        counts.withLock { counts in
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }
}

/// `server.max_connections_per_ip`: a client holding that many connections gets `429
/// rate_limited` on its next one, at its first request, and the connection is closed.
/// `max_connections` alone let one address take every slot with idle keep-alives, and
/// every other client waited. A trusted proxy's connections are not counted (they carry
/// everyone's requests); IPv6 clients count by their /64, as the per-IP rate limit does.
/// A probe or a scrape (the operator routes, never limited) is answered on such a
/// connection all the same, which then closes: a health check sharing an address with
/// busy clients must not take the instance out.
final class ConnectionsPerIP: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    let counts: ConnectionCounts
    let trusted: [IPNetwork]
    let metrics: GatewayMetrics
    /// The address this connection counts under, once admitted.
    private var counted: String?
    private var checked = false
    private var refused = false
    private var answered = false
    /// Refused, but its one request is an operator route's: served, then closed.
    private var serving = false
    private var probeRead = false

    init(counts: ConnectionCounts, trusted: [IPNetwork], metrics: GatewayMetrics) {
        self.counts = counts
        self.trusted = trusted
        self.metrics = metrics
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { check(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        check(context)
        context.fireChannelActive()
    }

    private func check(_ context: ChannelHandlerContext) {
        guard !checked else { return }
        checked = true
        guard let peer = ClientAddress.peer(context.channel.remoteAddress), !ClientAddress.isTrusted(peer, trusted)
        else {
            return
        }
        let key = RateLimitMiddleware.ipCaller(peer)
        if counts.admit(key) {
            counted = key
        } else {
            refused = true
            counts.refused()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard refused else {
            context.fireChannelRead(data)
            return
        }
        if serving {
            // The rest of the probe; nothing after it is read.
            guard !probeRead else { return }
            if case .end = unwrapInboundIn(data) { probeRead = true }
            context.fireChannelRead(data)
            return
        }
        guard case .head(let head) = unwrapInboundIn(data), !answered else { return }
        answered = true
        if [.get, .head].contains(head.method), let path = head.path?.split(separator: "?").first,
            RateLimitMiddleware.exempt.contains(String(path))
        {
            serving = true
            context.fireChannelRead(data)
            return
        }
        metrics.rateLimited(limit: "connections_per_ip")
        let error = GatewayError(.rateLimited, "too many connections from this address; close one, or retry after 1 s")
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        ChannelErrorAnswer.write(error, requestID: RequestID().description, retryAfter: 1, to: context).whenComplete {
            _ in
            bound.value.close(promise: nil)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard serving else {
            context.write(data, promise: promise)
            return
        }
        switch unwrapOutboundIn(data) {
        case .head(var head):
            head.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(head)), promise: promise)
        case .body:
            context.write(data, promise: promise)
        case .end:
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(data).whenComplete { result in
                promise?.completeWith(result)
                bound.value.close(promise: nil)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if let counted { counts.release(counted) }
        counted = nil
        context.fireChannelInactive()
    }
}
