import Foundation
import Logging
import ServiceLifecycle

/// Stores what a ``LateEnricher`` completed after routing, and queues it again for the
/// sinks the router chooses, so that names that came late reach the sinks anyway.
public final class LateRecordWriter: Service, Sendable {
    let enricher: any LateEnricher
    let pipeline: IngestPipeline
    let logger: Logger

    public init(enricher: any LateEnricher, pipeline: IngestPipeline, logger: Logger) {
        self.enricher = enricher
        self.pipeline = pipeline
        self.logger = logger
    }

    public func run() async throws {
        await withGracefulShutdownHandler {
            for await records in enricher.lateRecords.cancelOnGracefulShutdown() {
                var merged: [AttributionRecord] = []
                for record in records {
                    // Late versions can overtake each other; a name once stored is kept.
                    let stored = try? await pipeline.store.record(id: record.recordID)
                    merged.append(stored.map { Self.keepNames(of: $0, in: record) } ?? record)
                }
                let routed = merged.map { RoutedRecord(record: $0, sinks: pipeline.router.sinks(for: $0)) }
                do {
                    let replaced = try await pipeline.store.replaceRecords(routed, now: Date())
                    if replaced > 0 { pipeline.onQueued(Set(routed.flatMap(\.sinks))) }
                } catch {
                    logger.error("cannot store late enrichment", metadata: ["error": "\(error)"])
                }
            }
        } onGracefulShutdown: {}
    }

    static func keepNames(of stored: AttributionRecord, in late: AttributionRecord) -> AttributionRecord {
        var record = late
        record.keyword = late.keyword ?? stored.keyword
        record.keywordMatchType = late.keywordMatchType ?? stored.keywordMatchType
        record.adGroupName = late.adGroupName ?? stored.adGroupName
        record.campaignName = late.campaignName ?? stored.campaignName
        record.orgName = late.orgName ?? stored.orgName
        return record
    }
}
