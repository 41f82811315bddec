import Foundation

/// A progress bar on stderr: redrawn in place on a terminal, a line per 10% elsewhere.
struct ProgressBar {
    enum Unit {
        case items
        /// Shown in MB: a file's bytes read.
        case bytes
    }

    let total: Int
    let label: String
    let unit: Unit
    private var shownPercent = -1
    private let interactive = isatty(STDERR_FILENO) == 1

    init(total: Int, label: String, unit: Unit = .items) {
        self.total = max(total, 1)
        self.label = label
        self.unit = unit
    }

    mutating func advance(to done: Int) {
        // Never past the ends: a total that was only an estimate must not stop the work.
        let done = min(max(done, 0), total)
        let percent = done * 100 / total
        let step = interactive ? 1 : 10
        guard percent / step != shownPercent / step || shownPercent < 0 else { return }
        shownPercent = percent
        let width = 30
        let filled = width * percent / 100
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let count =
            switch unit {
            case .items: "\(done)/\(total)"
            case .bytes: String(format: "%.1f/%.1f MB", Double(done) / 1e6, Double(total) / 1e6)
            }
        let text = "\(label) [\(bar)] \(percent)% \(count)"
        FileHandle.standardError.write(Data((interactive ? "\r\(text)" : "\(text)\n").utf8))
    }

    func finish() {
        if interactive { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}
