import Foundation
import Testing

@testable import GatewaySinks

/// A plugin's pipe cut into lines: across chunks, and never holding more than a line's
/// limit of a line without end.
@Suite struct LineSplitterTests {
    func text(_ lines: [Data]) -> [String] { lines.map { String(decoding: $0, as: UTF8.self) } }

    @Test func linesAreCutWhereverTheChunksEnd() {
        var splitter = LineSplitter(maxLineBytes: 100)
        #expect(text(splitter.split(Data("one\ntw".utf8)).lines) == ["one"])
        #expect(text(splitter.split(Data("o\n\nthr".utf8)).lines) == ["two", ""])
        #expect(text(splitter.split(Data("ee".utf8)).lines).isEmpty)
        #expect(splitter.takePartial().map { String(decoding: $0, as: UTF8.self) } == "three")
        #expect(splitter.takePartial() == nil)
    }

    /// A plugin printing without a line break is not held whole.
    @Test func aLineWithoutEndIsHeldNoFurtherThanItsLimit() {
        var splitter = LineSplitter(maxLineBytes: 10)
        var split = splitter.split(Data("ok\n12345".utf8))
        #expect(text(split.lines) == ["ok"] && split.overlong == nil)
        split = splitter.split(Data("678901234".utf8))
        #expect(split.overlong.map { String(decoding: $0, as: UTF8.self) } == "12345678901234")
        #expect(splitter.partial.isEmpty)
        // What follows, up to its line break, is a line of its own.
        #expect(text(splitter.split(Data("5\nnext\n".utf8)).lines) == ["5", "next"])
    }

    /// A line ended in the chunk that completes it is measured too, so that lines of up to
    /// a chunk past the limit do not go through.
    @Test func aLineEndedPastItsLimitIsTooLongToo() {
        var splitter = LineSplitter(maxLineBytes: 10)
        #expect(!splitter.split(Data("1234567".utf8)).tooLong)
        let split = splitter.split(Data("89012\nok\n".utf8))
        #expect(split.tooLong)
        #expect(text(split.lines) == ["123456789012", "ok"])
        #expect(!splitter.split(Data("1234567890\n".utf8)).tooLong, "ten bytes is the limit, not past it")
    }
}
