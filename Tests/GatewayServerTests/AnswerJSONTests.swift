import Foundation
import Testing

@testable import GatewayCore
@testable import GatewayServer

/// The answers written on every request without Codable must be the very text that
/// JSONEncoder (sorted keys, `/` unescaped) wrote before: clients compare and parse it.
@Suite struct AnswerJSONTests {
    // Bytes, not Strings: String equality would take canonically equivalent text as equal.
    func encoded(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    func written(_ value: JSONValue) -> [UInt8] {
        value.compactUTF8
    }

    static let awkward = [
        "", "plain", "quote \" and backslash \\", "a/b/c", "line\nbreak\ttab\r\u{08}\u{0C}",
        "\u{0}\u{01}\u{1F}\u{7F}", "\u{2028}\u{2029}\u{85}", "e\u{301} :\u{301}", "Über ñ 日本 🙂", "</script>",
    ]

    @Test(arguments: awkward)
    func ingestAnswersMatchJSONEncoder(text: String) throws {
        var record = AttributionRecord(
            provider: "iad/\(text)", kind: .install, dedupeKey: "k", receivedAt: Date(), attributed: true)
        record.recordID = "id-\(text)"
        var withConversionValue = IngestAnswer(
            IngestOutcome(recordID: record.recordID, duplicateOf: nil, record: record, sinks: []), original: nil)
        withConversionValue.add(
            EventConversionValue(fineValue: 40, coarseValue: "high", lockWindow: true, window: 0, source: text))
        let answers = [
            withConversionValue,
            IngestAnswer(
                IngestOutcome(recordID: record.recordID, duplicateOf: nil, record: record, sinks: []), original: nil),
            IngestAnswer(
                IngestOutcome(recordID: "orig", duplicateOf: "orig-\(text)", record: record, sinks: []),
                original: record),
            IngestAnswer(PendingResolver.Answer(recordID: text, isDuplicate: false, record: nil), provider: text),
            IngestAnswer(
                PendingResolver.Answer(recordID: text, isDuplicate: true, record: record), provider: "adservices"),
        ]
        for answer in answers {
            #expect(written(answer.json) == (try encoded(answer)))
        }
        let batch = BatchAnswer(results: answers)
        #expect(written(batch.json) == (try encoded(batch)))
    }

    @Test(arguments: awkward)
    func errorBodiesMatchJSONEncoder(text: String) throws {
        for error in [
            GatewayError(.invalidField, text, field: "Version3.1.\(text)"),
            GatewayError(.payloadTooLarge, text),
        ] {
            let body = ErrorBody(error)
            #expect(written(body.json) == (try encoded(body)))
        }
    }

    /// Every error has the three members; `field` is null for an error about no one field.
    @Test func anErrorAboutNoFieldSaysFieldNull() {
        let body = ErrorBody(GatewayError(.payloadTooLarge, "too big"))
        #expect(
            written(body.json)
                == Array(#"{"error":{"code":"payload_too_large","field":null,"message":"too big"}}"#.utf8))
    }
}
