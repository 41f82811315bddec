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
        var rows: [[String]] = []
        var row: [String] = []
        var cell = ""
        var quoted = false
        var iterator = Array(text).makeIterator()
        func handle(_ c: Character) {
            switch c {
            case "\"": quoted = true
            case ",": row.append(cell); cell = ""
            case "\r\n", "\n", "\r": row.append(cell); rows.append(row); row = []; cell = ""
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
                } else { cell.append(c) }
            } else {
                handle(c)
            }
        }
        if !cell.isEmpty || !row.isEmpty { row.append(cell); rows.append(row) }
        return rows
    }
}
