import Foundation
import GatewayCore

/// The lines of a file, read a chunk at a time: an import of any size holds one chunk and
/// one line, not the file.
struct LineReader {
    /// A line longer than this is skipped (reported by its number), not held in memory.
    static let maxLineBytes = 16 << 20
    static let chunkBytes = 1 << 20

    enum Line {
        case text(Data)
        case tooLong
    }

    private let handle: FileHandle
    private var buffer = Data()
    private var start = 0
    private var skipping = false
    private var atEnd = false
    /// Bytes of the file read into lines so far, for progress.
    private(set) var consumed = 0

    init(path: String) throws {
        // A folder opens like a file and fails only at its first read, as a Foundation error.
        if FileManager.default.isFolder(atPath: path) { throw CocoaError(.fileReadUnknown) }
        handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
    }

    /// Where the next `\n` at or after `offset` is: memchr, many times faster than a
    /// collection's search of `Data`, which a file of gigabytes would feel.
    private func newline(from offset: Int) -> Int? {
        buffer.withUnsafeBytes { bytes -> Int? in
            guard offset < bytes.count, let base = bytes.baseAddress else { return nil }
            guard let found = memchr(base + offset, Int32(UInt8(ascii: "\n")), bytes.count - offset) else {
                return nil
            }
            return base.distance(to: UnsafeRawPointer(found))
        }
    }

    /// The next line without its `\n`, or nil at the end of the file.
    mutating func next() throws -> Line? {
        while true {
            if let newline = newline(from: start) {
                let line = buffer[start..<newline]
                consumed += newline + 1 - start
                start = newline + 1
                if skipping {
                    skipping = false
                    continue
                }
                return .text(Data(line))
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                let line = buffer[start...]
                consumed += buffer.count - start
                start = buffer.count
                return skipping ? nil : .text(Data(line))
            }
            // What is left of the buffer is the start of a line: keep it, drop the rest.
            buffer.removeSubrange(0..<start)
            start = 0
            if buffer.count > Self.maxLineBytes {
                consumed += buffer.count
                buffer.removeAll(keepingCapacity: true)
                if !skipping {
                    skipping = true
                    return .tooLong
                }
            }
            let chunk = try handle.read(upToCount: Self.chunkBytes) ?? Data()
            if chunk.isEmpty { atEnd = true } else { buffer.append(chunk) }
        }
    }
}
