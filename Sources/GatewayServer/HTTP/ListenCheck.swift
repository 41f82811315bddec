import Foundation

/// Whether `serve` can listen where the config says, asked before the store opens and the
/// workers start: a port already taken ended the process only after all of that, with
/// NIO's `bind(descriptor:ptr:bytes:): Address already in use) (errno: 98)`, naming
/// neither the address nor the setting.
public enum ListenCheck {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Binds and closes a socket on the first address `host` names that a socket can be
    /// made for, as the server binds it (with `SO_REUSEADDR`, so a port left in
    /// `TIME_WAIT` by a stopped gateway passes); port 0 is any free port, and always passes.
    public static func check(host: String, port: Int) throws {
        guard port != 0 else { return }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        // A name the resolver cannot read is left to the server, which says so itself.
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else { return }
        defer { freeaddrinfo(first) }
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let address = next {
            next = address.pointee.ai_next
            let socket = Glibc.socket(
                address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
            guard socket >= 0 else { continue }
            defer { close(socket) }
            var on: Int32 = 1
            setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            if bind(socket, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 {
                let reason = String(cString: strerror(errno))
                throw Failure(
                    description: "cannot listen on \(host):\(port) (server.host, server.port): \(reason)"
                        + (errno == EADDRINUSE ? "; another process (a gateway still running?) has that port" : ""))
            }
            return
        }
    }
}
