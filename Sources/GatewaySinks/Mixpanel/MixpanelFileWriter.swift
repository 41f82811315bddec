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
            // Every line holds the project token: readable by the gateway's user alone.
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
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
        let end = try handle.seekToEnd()
        do {
            try handle.write(contentsOf: data)
            // Delivered means on disk, as for every other sink.
            try handle.synchronize()
        } catch {
            // A write that failed part way (a full disk) left part of a line, which the
            // retry's lines would follow on the same line: a loader reading line by line
            // would lose both. The file goes back to where it ended.
            try? handle.truncate(atOffset: end)
            throw error
        }
    }
}
