import Foundation
import GatewayConfig

/// `serve --watch-config`: reloads as `SIGHUP` does whenever config.yaml changes. It looks
/// at the path once a second (modification time, size and a digest of the contents, so a
/// change within one second of the same size is still seen) rather than holding the file
/// open: editors and deploy tools replace the file by renaming a new one over it.
struct ConfigWatcher {
    let reloader: ConfigReloader
    var interval: Duration = .seconds(1)

    /// What identifies one version of the file; nil while it is missing or unreadable.
    struct Version: Equatable {
        var modified: Date?
        var size: Int?
        var digest: [UInt8]
    }

    static func version(of path: String) -> Version? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let data = FileManager.default.contents(atPath: path)
        else { return nil }
        return Version(
            modified: attributes[.modificationDate] as? Date, size: (attributes[.size] as? NSNumber)?.intValue,
            digest: SHA256Hex.digest(String(decoding: data, as: UTF8.self)))
    }

    /// Runs until cancelled. A file that goes missing (mid-rename) is no change; the
    /// version that appears next is.
    func run() async {
        let path = reloader.file
        var seen = Self.version(of: path)
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            guard let now = Self.version(of: path), now != seen else { continue }
            // A file still being written is read once it has stopped changing.
            await GatewayHTTP.waitUntilSettled(path)
            seen = Self.version(of: path) ?? now
            await reloader.reload()
        }
    }
}
