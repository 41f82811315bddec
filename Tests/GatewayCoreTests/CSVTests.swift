import GatewayCore
import Testing

/// CSV that a spreadsheet opens as data, whatever names the payloads carried.
@Suite struct CSVTests {
    @Test func cellsAreQuotedAndFormulasAreNotRun() {
        #expect(CSV.row(["plain", "a,b", "say \"hi\"", "two\nlines"]) == #"plain,"a,b","say ""hi""","two\#nlines""#)
        // A name an app or a tracking link chose must not run when the report is opened.
        #expect(CSV.row(["=HYPERLINK(\"http://evil.example\")"]) == #""'=HYPERLINK(""http://evil.example"")""#)
        #expect(CSV.row(["+cmd", "-x", "@SUM(A1)", "\tTab", "\rx"]) == "'+cmd,'-x,'@SUM(A1),'\tTab,\"'\rx\"")
        // Numbers stay numbers.
        #expect(CSV.row(["-3.5", "+2", "0.1", "-", ""]) == "-3.5,+2,0.1,'-,")
        // What Double reads but a spreadsheet may not take for a number.
        #expect(
            CSV.row(["-inf", "-nan(HYPERLINK)", "+0x1p4", "-1e5", "-3."]) == "'-inf,'-nan(HYPERLINK),'+0x1p4,'-1e5,'-3."
        )
        // Read back, the cell is what was written, with its mark.
        #expect(CSV.parse(CSV.row(["=1+1", "x"]) + "\n") == [["'=1+1", "x"]])
    }

    /// A quote opens a quoted cell only at its start: inside one that is not quoted (an
    /// export's `12" tablet`), it is text, and the rows after it are rows.
    @Test func aQuoteInsideAnUnquotedCellIsText() {
        let rows = CSV.numberedRows("984,12\" tablet\n983,next\n982,\"a, b\"\n")
        #expect(rows.map(\.line) == [1, 2, 3])
        #expect(rows.map(\.cells) == [["984", "12\" tablet"], ["983", "next"], ["982", "a, b"]])
        // Spaces before the opening quote are not the cell's, as a spreadsheet writes `a, "b"`.
        #expect(CSV.numberedRows(#"8201, "tablet, cheap", x"#).map(\.cells) == [["8201", "tablet, cheap", " x"]])
        // A line-by-line reader knows which lines continue a quoted cell.
        #expect(CSV.endsInsideQuotes(#"1,"two"#) && !CSV.endsInsideQuotes(#"1,12" tablet"#))
    }
}
