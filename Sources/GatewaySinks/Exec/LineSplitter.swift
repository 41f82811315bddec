import Foundation

/// A plugin's pipe cut into lines as its chunks come, in time linear in the bytes: each
/// chunk is scanned once, and a line not ended yet is held up to `maxLineBytes` only, so
/// that a plugin printing without a line break can neither grow the gateway without bound
/// nor have its whole output scanned again at each chunk, and one printing many short
/// lines to stderr does not copy the rest of its chunk at each line.
struct LineSplitter {
    /// The most of a line not ended yet that is held.
    let maxLineBytes: Int
    /// The line not ended yet.
    private(set) var partial = Data()

    init(maxLineBytes: Int) {
        self.maxLineBytes = maxLineBytes
    }

    /// What one chunk held.
    struct Split {
        /// The lines it ended, without their line breaks.
        var lines: [Data] = []
        /// A line that passed `maxLineBytes` without ending, as far as it was read: no
        /// longer held, and what follows it until its line break is the next `partial`.
        var overlong: Data?
        /// Some line passed `maxLineBytes`, ended in this chunk or not.
        var tooLong = false
    }

    mutating func split(_ chunk: Data) -> Split {
        var split = Split()
        var start = chunk.startIndex
        while let newline = chunk[start...].firstIndex(of: UInt8(ascii: "\n")) {
            if partial.isEmpty {
                split.lines.append(chunk[start..<newline])
            } else {
                partial.append(chunk[start..<newline])
                split.lines.append(partial)
                partial = Data()
            }
            split.tooLong = split.tooLong || split.lines[split.lines.count - 1].count > maxLineBytes
            start = chunk.index(after: newline)
        }
        partial.append(chunk[start...])
        if partial.count > maxLineBytes {
            split.overlong = partial
            split.tooLong = true
            partial = Data()
        }
        return split
    }

    /// The line not ended yet, given up: the pipe's end makes it the last line.
    mutating func takePartial() -> Data? {
        guard !partial.isEmpty else { return nil }
        defer { partial = Data() }
        return partial
    }
}
