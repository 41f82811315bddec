import Foundation
import GatewayCore
import Testing

/// Trimming without Foundation trims what Foundation's `.whitespacesAndNewlines` trims.
@Suite struct WhitespaceTrimmingTests {
    static let cases = [
        "token", "  token", "token\n", "\t\r\n token \r\n", "\u{00A0}token\u{3000}", "\u{2028}to ken\u{2029}",
        "\u{0085}x\u{000B}\u{000C}", "", "   ", "\n\u{00A0}\t", "tö ken 日本 🎉", " \u{301}accent", "a\u{200B}",
    ]

    @Test(arguments: cases)
    func trimsWhatFoundationTrims(text: String) {
        #expect(
            text.trimmingWhitespace().unicodeScalars.elementsEqual(
                text.trimmingCharacters(in: .whitespacesAndNewlines).unicodeScalars))
    }

    @Test func everyScalarIsWhiteSpaceExactlyWhenFoundationSaysSo() {
        var differing: [UInt32] = []
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let trimmed = String(scalar).trimmingWhitespace().isEmpty
            if trimmed != CharacterSet.whitespacesAndNewlines.contains(scalar) { differing.append(value) }
        }
        #expect(differing.isEmpty)
    }

    @Test func aSubstringTrimsToo() {
        let header = "Bearer  key-123 "
        #expect(header.dropFirst(7).trimmingWhitespace() == "key-123")
    }
}
