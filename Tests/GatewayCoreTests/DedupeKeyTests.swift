import Testing

@testable import GatewayCore

/// Dedupe keys are stored: ordinary ids must keep the text they always had, and no two
/// different payloads may share a key.
@Suite struct DedupeKeyTests {
    @Test func ordinaryPartsAreJoinedUnchanged() {
        #expect(DedupeKey.make("iad", "1234567890", "user-42") == "iad:1234567890:user-42")
        #expect(DedupeKey.make("s2s", "Über", "日本🙂") == "s2s:Über:日本🙂")
    }

    @Test func colonsAndPercentSignsInsideAPartAreEscaped() {
        #expect(DedupeKey.make("iad", "1:2", "3") == "iad:1%3A2:3")
        #expect(DedupeKey.make("iad", "1", "2:3") == "iad:1:2%3A3")
        #expect(DedupeKey.make("iad", "50%", "%3A") == "iad:50%25:%253A")
        #expect(DedupeKey.make("iad", "é:ü", "x") == "iad:é%3Aü:x")
    }

    @Test func aColonBeforeACombiningMarkIsEscapedToo() {
        // ":\u{301}" is one Character; a key built from it must still not collide.
        let joined = DedupeKey.make("iad", "1:\u{301}2", "3")
        #expect(joined == "iad:1%3A\u{301}2:3")
        #expect(joined != DedupeKey.make("iad", "1", "\u{301}2:3"))
    }
}
