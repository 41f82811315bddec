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

    /// A cell of an Apple Ads export as a value: trimmed, and nil when empty or `--` (the
    /// UI's "none", as in a Search Match row's keyword).
    public static func exportValue(_ cell: String) -> String? {
        let value = cell.trimmingCharacters(in: .whitespaces)
        return value.isEmpty || value == "--" ? nil : value
    }

    /// Whether an export's row is its totals line (a cell starting `Total`), which some
    /// exports end with: no entity's row.
    public static func isTotalsRow(_ cells: [String]) -> Bool {
        cells.contains { $0.trimmingCharacters(in: .whitespaces).lowercased().hasPrefix("total") }
    }

    static func startsFormula(_ cell: String) -> Bool {
        guard let first = cell.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return false }
        return !isPlainNumber(cell)
    }

    /// A signed decimal such as `-12.50`, which a spreadsheet reads as a number and nothing
    /// else. Anything `Double` reads was let through before: `-nan(…)`, `+0x1p4`, `-inf`.
    static func isPlainNumber(_ cell: String) -> Bool {
        var digits = cell.utf8.dropFirst()
        guard cell.utf8.first == UInt8(ascii: "-") || cell.utf8.first == UInt8(ascii: "+") else { return false }
        var seenDigit = false
        var seenPoint = false
        while let byte = digits.popFirst() {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): seenDigit = true
            case UInt8(ascii: ".") where !seenPoint && seenDigit: seenPoint = true
            default: return false
            }
        }
        return seenDigit && cell.utf8.last != UInt8(ascii: ".")
    }

    /// The text of a file a spreadsheet or a browser saved: UTF-8 with or without a byte
    /// order mark, UTF-16 with one (Excel's "Unicode text") or without (zero bytes in its
    /// first 4 KiB, which UTF-8 text never holds, are the high bytes of its ASCII: the side
    /// of each byte pair they fall on gives the order), else Windows-1252 (Excel's "CSV"
    /// on Windows), which any bytes decode as.
    /// Read as UTF-8 only, such a file was "cannot read", or began its first header with
    /// an invisible U+FEFF.
    public static func text(of data: Data) -> String {
        let bytes = [UInt8](data.prefix(3))
        if bytes.starts(with: [0xFF, 0xFE]), let text = String(data: data.dropFirst(2), encoding: .utf16LittleEndian) {
            return text
        }
        if bytes.starts(with: [0xFE, 0xFF]), let text = String(data: data.dropFirst(2), encoding: .utf16BigEndian) {
            return text
        }
        var zeros = (even: 0, odd: 0)
        for (offset, byte) in data.prefix(4096).enumerated() where byte == 0 {
            if offset.isMultiple(of: 2) { zeros.even += 1 } else { zeros.odd += 1 }
        }
        if zeros.odd > zeros.even, let text = String(data: data, encoding: .utf16LittleEndian) { return text }
        if zeros.even > zeros.odd, let text = String(data: data, encoding: .utf16BigEndian) { return text }
        let body = bytes == [0xEF, 0xBB, 0xBF] ? data.dropFirst(3) : data
        return String(data: body, encoding: .utf8) ?? String(decoding: body.map(windows1252), as: UTF16.self)
    }

    /// A Windows-1252 byte as its UTF-16 unit: Latin-1 but for 0x80–0x9F, where it has
    /// typographic marks (the five it leaves undefined are kept as Latin-1's controls).
    static func windows1252(_ byte: UInt8) -> UInt16 {
        guard (0x80...0x9F).contains(byte) else { return UInt16(byte) }
        let table: [UInt16] = [
            0x20AC, 0x81, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160, 0x2039, 0x0152, 0x8D,
            0x017D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A,
            0x0153, 0x9D, 0x017E, 0x0178,
        ]
        return table[Int(byte) - 0x80]
    }

    /// Rows of cells; quoted cells may hold commas, quotes and line breaks.
    public static func parse(_ text: String) -> [[String]] {
        numberedRows(text).map(\.cells)
    }

    /// Rows of cells with the 1-based line each starts on: a quoted cell's line breaks
    /// move the rows after it down, so a row's position is not its line. `separator` is
    /// `,` but for files a spreadsheet saved in a locale whose decimal mark is the comma
    /// (`;`), or as "Unicode text" (a tab).
    public static func numberedRows(_ text: String, separator: Character = ",") -> [(line: Int, cells: [String])] {
        scan(text, separator: separator).rows
    }

    /// Whether `text` ends inside a quoted cell, as ``numberedRows(_:separator:)`` reads it:
    /// a reader taking a file line by line joins the next line to it.
    public static func endsInsideQuotes(_ text: String, separator: Character = ",") -> Bool {
        scan(text, separator: separator).quoted
    }

    private static func scan(_ text: String, separator: Character) -> (
        rows: [(line: Int, cells: [String])], quoted: Bool
    ) {
        var rows: [(line: Int, cells: [String])] = []
        var row: [String] = []
        var cell = ""
        var quoted = false
        var line = 1, rowStart = 1
        var iterator = Array(text).makeIterator()
        func isBreak(_ c: Character) -> Bool { c == "\r\n" || c == "\n" || c == "\r" }
        func handle(_ c: Character) {
            switch c {
            // Only a cell's first character opens quotes, as RFC 4180 has it (spaces before
            // it, as in `a, "b, c"`, are dropped): a `"` inside an unquoted cell (`12" tablet`)
            // is text, and took the rest of the file with it.
            case "\"" where cell.allSatisfy(\.isWhitespace):
                cell = ""
                quoted = true
            case separator: row.append(cell); cell = ""
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
                        if next == "\"" {
                            cell.append("\"")
                        } else {
                            quoted = false
                            handle(next)
                        }
                    } else {
                        quoted = false
                    }
                } else {
                    if isBreak(c) { line += 1 }
                    cell.append(c)
                }
            } else {
                handle(c)
            }
        }
        let open = quoted
        if !cell.isEmpty || !row.isEmpty { row.append(cell); rows.append((rowStart, row)) }
        return (rows, open)
    }
}
