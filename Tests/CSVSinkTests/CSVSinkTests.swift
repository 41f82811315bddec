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
        defer {
            try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: path).deletingLastPathComponent().path)
        }
        let columns = ["app_user_id", "campaign_id", "keyword", "attributed", "received_at"]
        let first = record("u1", keyword: #"meditation, "calm" app"#)
        let second = record("u2", keyword: nil)

        do {
            let sink = try CSVSink(path: path, columns: columns)
            #expect(try await sink.deliver([first, second]) == [.delivered, .delivered])
            #expect(try await sink.deliver([first]) == [.delivered])
        }

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

    func temporaryFile() -> (path: String, folder: URL) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("csv-\(UUID())")
        return (folder.appendingPathComponent("out.csv").path, folder)
    }

    /// A file the sink cannot read as its own (another encoding, a byte cut mid-character
    /// inside the rows) was replaced by an empty one at the next start, every row lost.
    @Test func aFileItCannotReadIsRefusedAndLeftAsItIs() throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // "Café" as Windows-1252 writes it, on a complete row.
        let bytes = Data("record_id,keyword\r\nr1,Caf".utf8) + Data([0xE9]) + Data("\r\n".utf8)
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { try CSVSink(path: path, columns: ["keyword"]) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes)
    }

    /// A row cut short (a crash mid-write, a full disk) was left in the file: the retry
    /// glued the next row onto it, and the torn row's id counted as written.
    /// (Cut in the middle of a character, the whole file was started again, every row lost.)
    @Test(arguments: [10, 18]) func aRowCutShortIsRemovedAndItsRecordWrittenWhole(bytesCut: Int) async throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let kept = record("u1", keyword: "calm")
        let torn = record("u2", keyword: "東京 sleep")
        do {
            let sink = try CSVSink(path: path, columns: ["app_user_id", "keyword"])
            #expect(try await sink.deliver([kept, torn]) == [.delivered, .delivered])
        }
        // The second row cut in the middle of `京`, or in its user id (a cell short).
        let data = try Data(contentsOf: URL(fileURLWithPath: path)).dropLast(bytesCut)
        try data.write(to: URL(fileURLWithPath: path))

        // The torn record comes again, as it was never acknowledged; the first does not.
        let reopened = try CSVSink(path: path, columns: ["app_user_id", "keyword"])
        #expect(try await reopened.deliver([torn]) == [.delivered])
        let rows = CSV.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(
            rows == [
                ["record_id", "app_user_id", "keyword"], [kept.recordID, "u1", "calm"],
                [torn.recordID, "u2", "東京 sleep"],
            ])
    }

    /// A last row whole but for its line break (an editor's save, an export) was taken as
    /// cut short and deleted: its record, acknowledged long before, never came again.
    @Test func aLastRowWithoutItsLineBreakIsKept() async throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = record("u1", keyword: "calm")
        do {
            let sink = try CSVSink(path: path, columns: ["app_user_id", "keyword"])
            _ = try await sink.deliver([first])
        }
        try Data(try Data(contentsOf: URL(fileURLWithPath: path)).dropLast(2)).write(to: URL(fileURLWithPath: path))
        let reopened = try CSVSink(path: path, columns: ["app_user_id", "keyword"])
        _ = try await reopened.deliver([record("u2", keyword: nil)])
        let rows = CSV.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(rows.map { $0[1] } == ["app_user_id", "u1", "u2"])
    }

    /// Emptied in place by logrotate's `copytruncate`, the file got rows without their
    /// header, and the next start refused it, and the gateway with it.
    @Test func aFileEmptiedInPlaceGetsItsHeaderBack() async throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let sink = try CSVSink(path: path, columns: ["app_user_id"])
        _ = try await sink.deliver([record("u1", keyword: nil)])
        try FileHandle(forWritingTo: URL(fileURLWithPath: path)).truncate(atOffset: 0)
        _ = try await sink.deliver([record("u2", keyword: nil)])
        #expect(CSV.parse(try String(contentsOfFile: path, encoding: .utf8)).map { $0[1] } == ["app_user_id", "u2"])
    }

    /// With `record_id` listed after other columns, the ids read back were another
    /// column's, and every record offered again after a restart was written again.
    @Test func recordIDAnywhereInTheColumnsStillKeepsEachRecordOnce() async throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let columns = ["app_user_id", "record_id", "keyword"]
        let first = record("u1", keyword: "calm")
        do {
            let sink = try CSVSink(path: path, columns: columns)
            _ = try await sink.deliver([first])
        }
        let reopened = try CSVSink(path: path, columns: columns)
        _ = try await reopened.deliver([first, record("u2", keyword: nil)])
        let rows = CSV.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(rows.dropFirst().map { $0[0] } == ["u1", "u2"])
    }

    /// Two sinks on one file each wrote every record, and their appends raced.
    @Test func twoSinksCannotWriteOneFile() throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try CSVSink(path: path, columns: ["keyword"])
        #expect(throws: (any Error).self) {
            try CSVSink(path: folder.appendingPathComponent("./out.csv").path, columns: ["keyword"])
        }
        withExtendedLifetime(first) {}
    }

    /// Rows hold user ids and payloads: the file and a folder it creates are the
    /// gateway user's only, as the store is, whatever the umask.
    @Test func theFileAndItsNewFolderAreTheGatewayUsersOnly() throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try CSVSink(path: path, columns: ["keyword"])
        let mode = { (path: String) in
            (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        }
        #expect(try mode(path) == 0o600)
        #expect(try mode(folder.path) == 0o700)
    }

    /// A file moved away (rotated) made every batch fail until a restart.
    @Test func aFileMovedAwayIsStartedAgainWithItsHeader() async throws {
        let (path, folder) = temporaryFile()
        defer { try? FileManager.default.removeItem(at: folder) }
        let sink = try CSVSink(path: path, columns: ["app_user_id"])
        let first = record("u1", keyword: nil)
        _ = try await sink.deliver([first])
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        #expect(try await sink.deliver([first, record("u2", keyword: nil)]) == [.delivered, .delivered])
        let rows = CSV.parse(try String(contentsOfFile: path, encoding: .utf8))
        #expect(rows.map { $0[1] } == ["app_user_id", "u2"])
    }
}
