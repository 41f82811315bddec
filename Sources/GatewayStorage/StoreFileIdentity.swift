import Foundation

/// The store file a server opened, known by its device and inode, so that a commit can
/// tell the path still names it. A store deleted or replaced under a running server (an
/// `rm`, a restore copied over the path) goes on taking commits into a file no path
/// names any more: every record acknowledged meanwhile vanished at the next start, which
/// created an empty store.
struct StoreFileIdentity: Sendable {
    let path: String
    private let device: UInt64
    private let inode: UInt64

    /// Nil when the path cannot be read now (the store is in memory, or not there yet).
    init?(path: String) {
        guard let (device, inode) = Self.identity(path) else { return nil }
        self.path = path
        self.device = device
        self.inode = inode
    }

    /// Thrown by a commit after the path stopped naming the store: the commit went into
    /// the file still open, which no path names, and is not acknowledged.
    struct Gone: Error, CustomStringConvertible {
        let path: String
        var description: String {
            "the store file \(path) was deleted or replaced while the gateway served it: stop the gateway, put the file "
                + "back (or restore a backup) and start it again; nothing stored since is acknowledged"
        }
    }

    /// Throws ``Gone`` unless the path still names the file opened.
    func check() throws {
        guard let (device, inode) = Self.identity(path), device == self.device, inode == self.inode else {
            throw Gone(path: path)
        }
    }

    private static func identity(_ path: String) -> (UInt64, UInt64)? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return (UInt64(info.st_dev), UInt64(info.st_ino))
    }
}
