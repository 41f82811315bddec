import Foundation
import Logging
import ServiceLifecycle

/// Stores what a ``LateEnricher`` completed after routing, and queues it again for the
/// sinks the router chooses, so that names that came late reach the sinks anyway.
///
/// A late version can arrive before its record is committed: the enricher hands it back
/// as soon as the name comes, and the ingest that gave up waiting for it may still be
/// on its way to the disk. Such versions are tried again after each of `retryDelays`;
/// one whose record never appears (a duplicate, stored under another id) is let go.
public final class LateRecordWriter: Service, Sendable {
    let enricher: any LateEnricher
    let pipeline: IngestPipeline
    let logger: Logger
    let retryDelays: [Duration]
    /// How often the records owed a name are read again from the store: not only at the
    /// start, since another process (`import`) leaves its own there when it exits, and
    /// records past the enricher's in-memory limit wait there too.
    let rescanEvery: Duration

    public init(
        enricher: any LateEnricher, pipeline: IngestPipeline, logger: Logger,
        retryDelays: [Duration] = [.milliseconds(200), .seconds(1), .seconds(5), .seconds(30)],
        rescanEvery: Duration = .seconds(300)
    ) {
        self.enricher = enricher
        self.pipeline = pipeline
        self.logger = logger
        self.retryDelays = retryDelays
        self.rescanEvery = rescanEvery
    }

    /// Late versions, and how many times they were tried already.
    typealias Batch = (records: [AttributionRecord], tries: Int)

    public func run() async throws {
        // One loop writes everything, new versions and retried ones alike, one batch at a
        // time: two versions of a record merged at once against the same stored one
        // would each keep their own names and the later write would drop the other's.
        let (batches, queue) = AsyncStream.makeStream(of: Batch.self)
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { tasks in
                tasks.addTask {
                    await self.resumeLeftWaiting(forgettingUnstored: true)
                    while (try? await Task.sleep(for: self.rescanEvery)) != nil, !Task.isShuttingDownGracefully {
                        await self.resumeLeftWaiting(forgettingUnstored: false)
                    }
                }
                tasks.addTask {
                    for await records in self.enricher.lateRecords.cancelOnGracefulShutdown() {
                        queue.yield((records, 0))
                    }
                    // Shutting down: versions still waiting for their records are not
                    // kept, as none of the ones buffered in the stream are.
                    queue.finish()
                }
                for await batch in batches {
                    await handle(batch) { retry, delay in
                        tasks.addTask {
                            guard (try? await Task.sleep(for: delay)) != nil else { return }
                            queue.yield(retry)
                        }
                    }
                }
                tasks.cancelAll()
            }
        } onGracefulShutdown: {
        }
    }

    /// Writes what of `batch` can be written, and hands the rest to `later` with the delay
    /// it must wait, until the delays run out.
    func handle(_ batch: Batch, later: (Batch, Duration) -> Void) async {
        let unstored = await write(batch.records)
        guard !unstored.isEmpty else { return }
        guard batch.tries < retryDelays.count else {
            logger.debug("late names for records that were never stored", metadata: ["count": "\(unstored.count)"])
            await enricher.forget(unstored.map(\.recordID))
            return
        }
        later((unstored, batch.tries + 1), retryDelays[batch.tries])
    }

    /// Writes the versions whose records are stored; returns the others.
    func write(_ records: [AttributionRecord]) async -> [AttributionRecord] {
        var merged: [AttributionRecord] = []
        var unchanged: [AttributionRecord] = []
        var unstored: [AttributionRecord] = []
        for record in records {
            // Late versions can overtake each other; a name once stored is kept.
            switch await Self.stored(record.recordID, in: pipeline.store) {
            case .some(let stored):
                let version = Self.keepNames(of: stored, in: record)
                // Nothing new (an earlier version brought these names): not sent again.
                if version == stored { unchanged.append(stored) } else { merged.append(version) }
            case .none: unstored.append(record)
            }
        }
        if !unchanged.isEmpty { await enricher.stored(unchanged) }
        guard !merged.isEmpty else { return unstored }
        let routed = merged.map { RoutedRecord(record: $0, sinks: pipeline.router.sinksForLateVersion(of: $0)) }
        do {
            _ = try await pipeline.commitNewVersions(routed)
            await enricher.stored(merged)
        } catch {
            // Still owed: the enricher keeps the ids, and the next start asks again.
            logger.error("cannot store late enrichment", metadata: ["error": "\(error)"])
        }
        return unstored
    }

    /// The records left waiting for late answers that the enricher is not waiting on
    /// itself (a stopped gateway's, an import's), read back and handed to the enricher, a
    /// thousand at a time. Ids with no record are let go at the start only: while serving,
    /// an id is owed before its record's commit ends, and let go then, it was lost to the
    /// next start (those never stored go after the enricher's week).
    func resumeLeftWaiting(forgettingUnstored: Bool) async {
        let ids = await enricher.recordsLeftWaiting()
        guard !ids.isEmpty else { return }
        logger.info("resuming records left waiting for late enrichment", metadata: ["records": "\(ids.count)"])
        for start in stride(from: 0, to: ids.count, by: 1000) {
            guard !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
            var records: [AttributionRecord] = []
            var missing: [String] = []
            for id in ids[start..<min(start + 1000, ids.count)] {
                do {
                    if let record = try await pipeline.store.record(id: id) {
                        records.append(record)
                    } else {
                        missing.append(id)
                    }
                } catch {
                    // Kept for the next start.
                    logger.warning(
                        "cannot read a record left waiting for late enrichment", metadata: ["error": "\(error)"])
                }
            }
            if forgettingUnstored, !missing.isEmpty { await enricher.forget(missing) }
            if !records.isEmpty { await enricher.resume(records) }
        }
    }

    /// The stored record, nil when there is none (yet); a store that cannot answer is
    /// treated as having none, and the version waits for the next try.
    static func stored(_ id: String, in store: any RecordStore) async -> AttributionRecord? {
        (try? await store.record(id: id)) ?? nil
    }

    /// The stored record with the late version's names: its other fields are the record
    /// as it was routed, and the stored one may be newer since (a purchase credited, a
    /// token's answer); written back, they undid that.
    static func keepNames(of stored: AttributionRecord, in late: AttributionRecord) -> AttributionRecord {
        var record = stored
        record.keyword = late.keyword ?? stored.keyword
        record.keywordMatchType = late.keywordMatchType ?? stored.keywordMatchType
        record.adGroupName = late.adGroupName ?? stored.adGroupName
        record.campaignName = late.campaignName ?? stored.campaignName
        record.orgName = late.orgName ?? stored.orgName
        if record != stored { record.enrichedAt = late.enrichedAt ?? stored.enrichedAt }
        return record
    }
}
