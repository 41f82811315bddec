import Hummingbird
import NIOCore

/// The request context of the gateway's routes: Hummingbird's basics plus the peer's
/// address, which per-IP rate limits need.
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
