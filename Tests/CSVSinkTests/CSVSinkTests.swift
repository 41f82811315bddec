import Foundation
import GatewayCore
import Testing

@testable import CSVSink

@Suite struct CSVSinkTests {
    func record(_ user: String, keyword: String?) -> AttributionRecord {
        var record = AttributionRecord(
            provider: "iad", kind: .install, dedupeKey: "iad:1:\(user)",
            receivedAt: Date(timeIntervalSince1970: 1_600_000_000), attributed: true)
        record.appUserID = user
        record.keyword = keyword
        record.campaignID = 42
        return record
    }

    @Test func writesQuotedRowsOnceEvenWhenARecordIsOfferedAgain() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("csv-\(UUID())/out.csv").path
        defer { try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path) }
        let columns = ["app_user_id", "campaign_id", "keyword", "attributed", "received_at"]
        let first = record("u1", keyword: #"meditation, "calm" app"#)
        let second = record("u2", keyword: nil)

        let sink = try CSVSink(path: path, columns: columns)
        #expect(try await sink.deliver([first, second]) == [.delivered, .delivered])
        #expect(try await sink.deliver([first]) == [.delivered])

        // A new process (a restart) reads back what is in the file and still skips repeats.
        let reopened = try CSVSink(path: path, columns: columns)
        #expect(try await reopened.deliver([second, record("u3", keyword: "sleep")]) == [.delivered, .delivered])

        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.hasPrefix("record_id,app_user_id,campaign_id,keyword,attributed,received_at\r\n"))
        #expect(text.contains(#"\#(first.recordID),u1,42,"meditation, ""calm"" app",true,2020-09-13T12:26:40Z"#))
        let rows = CSV.parse(text)
        #expect(rows.count == 4)
        #expect(rows.dropFirst().map { $0[1] } == ["u1", "u2", "u3"])
        #expect(rows[1][3] == #"meditation, "calm" app"#)
        #expect(rows[2][3] == "")
    }

    @Test func refusesAFileWithOtherColumns() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("csv-\(UUID()).csv").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        _ = try CSVSink(path: path, columns: ["keyword"])
        #expect(throws: (any Error).self) { try CSVSink(path: path, columns: ["campaign_id"]) }
    }
}
