import Testing

@testable import GatewayCore

/// Dedupe keys are stored: ordinary ids must keep the text they always had, and no two
/// different payloads may share a key.
@Suite struct DedupeKeyTests {
    @Test func ordinaryPartsAreJoinedUnchanged() {
        #expect(DedupeKey.make("iad", "1234567890", "user-42") == "iad:1234567890:user-42")
        #expect(Array(DedupeKey.make("s2s", "Über", "日本🙂").utf8) == Array("s2s:Über:日本🙂".utf8))
    }

    @Test func colonsAndPercentSignsInsideAPartAreEscaped() {
        #expect(DedupeKey.make("iad", "1:2", "3") == "iad:1%3A2:3")
        #expect(DedupeKey.make("iad", "1", "2:3") == "iad:1:2%3A3")
        #expect(DedupeKey.make("iad", "50%", "%3A") == "iad:50%25:%253A")
        #expect(Array(DedupeKey.make("iad", "é:ü", "x").utf8) == Array("iad:é%3Aü:x".utf8))
    }

    @Test func aColonBeforeACombiningMarkIsEscapedToo() {
        // ":\u{301}" is one Character. Escaped by characters, these two parts of one and
        // these three parts of the other both became `iad:1:\u{301}2:3`.
        let joined = DedupeKey.make("iad", "1:\u{301}2", "3")
        #expect(Array(joined.utf8) == Array("iad:1%3A\u{301}2:3".utf8))
        #expect(Array(joined.utf8) != Array(DedupeKey.make("iad", "1", "\u{301}2", "3").utf8))
    }
}
