import Foundation
import GatewayCore

/// The `file` mode: the same JSON the API would get, as newline-delimited files that a
/// team loads in batch (`engage-YYYY-MM-DD.ndjson`, `events-YYYY-MM-DD.ndjson`, by UTC
/// day of delivery). A batch re-offered after a crash may append lines again; profile
/// updates are idempotent and Mixpanel drops repeated events by `$insert_id`.
struct MixpanelFileWriter: Sendable {
    let directory: String

    func append(_ kind: String, _ objects: [JSONValue], now: Date) throws {
        guard !objects.isEmpty else { return }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let day = String(ISO8601.format(now).prefix(10))
        let path = (directory as NSString).appendingPathComponent("\(kind)-\(day).ndjson")
        if !FileManager.default.fileExists(atPath: path) {
            // A file that cannot be made shows as the open below throwing, with its reason.
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = Data()
        for object in objects {
            data.append(try encoder.encode(object))
            data.append(UInt8(ascii: "\n"))
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
        // Delivered means on disk, as for every other sink.
        try handle.synchronize()
    }
}
