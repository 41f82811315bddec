import Testing

@testable import GatewayCore

/// A string field may hold `PayloadFields.maxStringLength` characters, counted as a
/// person counts them (grapheme clusters), however many bytes they take.
@Suite struct FieldLengthTests {
    func read(_ text: String) throws -> String? {
        try PayloadFields(["name": .string(text)], path: "event").string("name")
    }

    @Test func aStringAtTheLimitIsReadAndOnePastItIsRefusedByName() throws {
        let limit = PayloadFields.maxStringLength
        #expect(try read(String(repeating: "a", count: limit))?.count == limit)
        #expect {
            try read(String(repeating: "a", count: limit + 1))
        } throws: { error in
            (error as? GatewayError)?.field == "event.name"
                && (error as? GatewayError)?.message == "longer than \(limit) characters"
        }
    }

    @Test func aNulCharacterIsRefusedByName() throws {
        #expect {
            try read("a\u{0}b")
        } throws: { error in
            (error as? GatewayError)?.field == "event.name"
        }
    }

    @Test func charactersAreCountedNotBytes() throws {
        let limit = PayloadFields.maxStringLength
        // Two bytes each, and a letter with a combining accent: one character, three bytes.
        #expect(try read(String(repeating: "é", count: limit)) != nil)
        #expect(try read(String(repeating: "e\u{301}", count: limit)) != nil)
        #expect(throws: GatewayError.self) { try read(String(repeating: "é", count: limit + 1)) }
        #expect(throws: GatewayError.self) { try read(String(repeating: "e\u{301}", count: limit + 1)) }
    }

    @Test func theLimitHoldsForEventPropertiesToo() {
        let limit = PayloadFields.maxStringLength
        #expect(PayloadFields.fitsLengthLimit(String(repeating: "🙂", count: limit)))
        #expect(!PayloadFields.fitsLengthLimit(String(repeating: "🙂", count: limit + 1)))
        #expect(!PayloadFields.fitsLengthLimit(String(repeating: "a", count: limit + 1)))
    }
}
