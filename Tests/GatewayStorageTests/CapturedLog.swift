import Logging
import Synchronization

/// Keeps what a component logs, message and metadata, for a test to read.
final class CapturedLog: Sendable {
    let entries = Mutex<[(message: String, metadata: Logger.Metadata)]>([])

    var messages: [String] { entries.withLock { $0.map(\.message) } }

    var logger: Logger { Logger(label: "test") { _ in Handler(log: self) } }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            log.entries.withLock {
                $0.append((event.message.description, metadata.merging(event.metadata ?? [:]) { $1 }))
            }
        }
    }
}
