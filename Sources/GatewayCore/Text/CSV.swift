import Foundation

/// CSV as RFC 4180 writes it: cells with commas, quotes or line breaks are quoted, and
/// quotes inside are doubled. Shared by the CSV sink, the report and the keyword import.
public enum CSV {
    /// One line (without its line break). A text cell that a spreadsheet would run as a
    /// formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a `'`
    /// in front, as OWASP advises: keyword and campaign names come from payloads anyone
    /// with an app's key, or a tracking link, can write. Numbers are left as they are.
    public static func row(_ cells: [String]) -> String {
        cells.map { cell in
            let cell = startsFormula(cell) ? "'" + cell : cell
            return cell.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" })
                ? "\"" + cell.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : cell
        }.joined(separator: ",")
    }

    static func startsFormula(_ cell: String) -> Bool {
        guard let first = cell.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return false }
        return Double(cell) == nil
    }

    /// Rows of cells; quoted cells may hold commas, quotes and line breaks.
    public static func parse(_ text: String) -> [[String]] {
        numberedRows(text).map(\.cells)
    }

    /// Rows of cells with the 1-based line each starts on: a quoted cell's line breaks
    /// move the rows after it down, so a row's position is not its line.
    public static func numberedRows(_ text: String) -> [(line: Int, cells: [String])] {
        var rows: [(line: Int, cells: [String])] = []
        var row: [String] = []
        var cell = ""
        var quoted = false
        var line = 1, rowStart = 1
        var iterator = Array(text).makeIterator()
        func isBreak(_ c: Character) -> Bool { c == "\r\n" || c == "\n" || c == "\r" }
        func handle(_ c: Character) {
            switch c {
            case "\"": quoted = true
            case ",": row.append(cell); cell = ""
            case _ where isBreak(c):
                row.append(cell)
                rows.append((rowStart, row))
                row = []
                cell = ""
                line += 1
                rowStart = line
            default: cell.append(c)
            }
        }
        while let c = iterator.next() {
            if quoted {
                if c == "\"" {
                    if let next = iterator.next() {
                        if next == "\"" { cell.append("\"") } else {
                            quoted = false
                            handle(next)
                        }
                    } else { quoted = false }
                } else {
                    if isBreak(c) { line += 1 }
                    cell.append(c)
                }
            } else {
                handle(c)
            }
        }
        if !cell.isEmpty || !row.isEmpty { row.append(cell); rows.append((rowStart, row)) }
        return rows
    }
}
