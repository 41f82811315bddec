import Foundation
import GatewayCore
import GatewayTestSupport
import Testing

@testable import GatewayEnrichers

/// `import spend`: the Apple Ads UI's keyword report export, read line by line.
@Suite struct SpendImportTests {
    func read(_ text: String) -> SpendCSVReader {
        var reader = SpendCSVReader()
        // At each line break, as the command reads a file (`\r\n` is one character to Swift).
        let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        for (offset, line) in lines.enumerated() {
            reader.feed(String(line), line: offset + 1)
        }
        reader.finish()
        return reader
    }

    @Test func anExportWithTitleRowsQuotedNamesAndATotalsLineIsRead() {
        // As the UI writes one: the report's name and range above the header, names quoted
        // (one with a comma, one across two lines), amounts with thousands separators, a
        // keyword's day split by country, and a totals line at the end.
        let reader = read(
            """
            \u{FEFF}"Keyword Report"
            "Date Range: 2026-03-01 - 2026-03-02"

            Day,Campaign Name,Campaign ID,Ad Group Name,Ad Group ID,Keyword,Keyword ID,Country or Region,Impressions,Taps,Spend,Currency\r
            2026-03-01,"US Search, Core",542370539,Exact - Core,542317095,meditation app,87675432,US,1000,40,"1,234.50",USD\r
            2026-03-01,"US Search, Core",542370539,Exact - Core,542317095,meditation app,87675432,CA,10,1,0.50,USD\r
            2026-03-02,"US Search, Core",542370539,"Exact
            Core",542317095,meditation app,87675432,US,900,30,$12.00,USD\r
            03/02/2026,"US Search, Core",542370539,Exact - Core,542317095,sleep,87675433,US,0,0,0.00,usd\r
            Total,,,,,,,,1910,71,"1,247.00",USD\r
            """)
        #expect(reader.badRows.isEmpty, "\(reader.badRows)")
        #expect(
            reader.spend == [
                SpendEntry(
                    campaignID: 542_370_539, adGroupID: 542_317_095, keywordID: 87_675_432, day: "2026-03-01",
                    currency: "USD", amount: Decimal(string: "1235")!),
                SpendEntry(
                    campaignID: 542_370_539, adGroupID: 542_317_095, keywordID: 87_675_432, day: "2026-03-02",
                    currency: "USD", amount: 12),
                SpendEntry(
                    campaignID: 542_370_539, adGroupID: 542_317_095, keywordID: 87_675_433, day: "2026-03-02",
                    currency: "USD", amount: 0),
            ])
    }

    @Test func aSpreadsheetsSemicolonsAndDecimalCommasAndACurrencyInTheHeader() {
        let reader = read(
            """
            Date;Keyword ID;Ad Group ID;Local Spend (EUR);Adam ID
            01.03.2026;11;22;1.234,5;1234567890
            Mar 2, 2026;11;;12,25;1234567890
            """)
        #expect(reader.badRows.isEmpty, "\(reader.badRows)")
        #expect(reader.spend.map(\.amount) == [Decimal(string: "1234.5")!, Decimal(string: "12.25")!])
        #expect(reader.spend.map(\.day) == ["2026-03-01", "2026-03-02"])
        #expect(reader.spend.allSatisfy { $0.currency == "EUR" && $0.appID == "1234567890" && $0.campaignID == 0 })
        #expect(reader.spend.map(\.adGroupID) == [22, 0])
    }

    /// A cell holding more than an amount in the row's currency is a bad row: read loosely,
    /// `1e3` was 13, `12abc` 12, and `€7.50` in a USD row USD 7.50, each without a word.
    @Test func anAmountWithAnythingElseInItOrAnotherCurrencysMarkIsABadRow() {
        let reader = read(
            """
            Day,Keyword ID,Spend,Currency
            2026-03-01,1,1e3,USD
            2026-03-01,2,12abc,USD
            2026-03-01,3,€7.50,USD
            2026-03-01,4,12.00 EUR,USD
            2026-03-01,5,$12.00,USD
            2026-03-01,6,12.00 usd,USD
            2026-03-01,7,€7.50,EUR
            2026-03-01,8,"1,234.50",USD
            """)
        #expect(
            reader.badRows.map(\.description) == [
                "line 2, column Spend: '1e3' is not an amount in USD",
                "line 3, column Spend: '12abc' is not an amount in USD",
                "line 4, column Spend: '€7.50' is not an amount in USD",
                "line 5, column Spend: '12.00 EUR' is not an amount in USD",
            ])
        #expect(reader.spend.map(\.amount) == [12, 12, Decimal(string: "7.5")!, Decimal(string: "1234.5")!])
        // In a `;`-separated file, decimals come with a comma and points (or spaces) group
        // thousands; a lone zero before a point is no thousand, and the symbol may stand apart.
        let semicolons = read(
            """
            Day;Keyword ID;Spend;Currency
            2026-03-01;1;1.234;EUR
            2026-03-01;2;1.234,50;EUR
            2026-03-01;3;12.5;EUR
            2026-03-01;4;7,50 €;EUR
            2026-03-01;5;€ 7,50;EUR
            2026-03-01;6;0.500;EUR
            2026-03-01;7;1 234,50;EUR
            2026-03-01;8;$7.50;EUR
            """)
        #expect(semicolons.badRows.map(\.description) == ["line 9, column Spend: '$7.50' is not an amount in EUR"])
        #expect(
            semicolons.spend.map(\.amount) == [
                1234, Decimal(string: "1234.5")!, Decimal(string: "12.5")!, Decimal(string: "7.5")!,
                Decimal(string: "7.5")!, Decimal(string: "0.5")!, Decimal(string: "1234.5")!,
            ])
        // In a comma-separated one, `0,500` is a half too.
        #expect(read("Day,Keyword ID,Spend,Currency\n2026-03-01,1,\"0,500\",USD").spend.map(\.amount) == [0.5])
    }

    /// A `"` inside an unquoted cell (a keyword `12" tablet`) is text: it opened a quoted cell
    /// that joined the lines after it, and their days were lost.
    @Test func aQuoteInsideAnUnquotedCellKeepsTheRowsAfterIt() {
        let reader = read(
            """
            Day,Campaign ID,Keyword ID,Keyword,Spend,Currency
            2026-11-16,800,8001,12" tablet,1.00,USD
            2026-11-16,800,8002,case,2.00,USD
            2026-11-16,800,8003, "cheap, case",3.00,USD
            2026-11-16,800,8004,24" monitor,4.00,USD
            """)
        #expect(reader.badRows.isEmpty, "\(reader.badRows)")
        #expect(reader.spend.map(\.keywordID) == [8001, 8002, 8003, 8004])
    }

    @Test func badRowsNameTheirLineAndColumnAndTheRestIsRead() {
        let reader = read(
            """
            Day,Keyword ID,Spend,Currency
            2026-03-01,abc,1.00,USD
            2026-13-45,12,1.00,USD
            2026-03-01,12,lots,USD
            2026-03-01,12,1.00,dollars
            2026-03-01,12,0.0000001,USD
            2026-03-01,,1.00,USD
            2026-03-01,12,2.00,USD
            "2026-03-02,12,1.00,USD
            """)
        #expect(
            reader.badRows.map(\.description) == [
                "line 2, column Keyword ID: 'abc' is not a positive integer",
                "line 3, column Day: '2026-13-45' is not a date (2026-03-01, 03/01/2026, Mar 1, 2026)",
                "line 4, column Spend: 'lots' is not an amount in USD",
                "line 5, column Currency: is not a three-letter currency code",
                "line 6, column Spend: '0.0000001' has more than 6 decimals",
                "line 7, column Keyword ID: is empty",
                "line 9: a quoted cell is never closed",
            ])
        #expect(reader.spend.map(\.amount) == [2])
    }

    @Test func aFileWithoutTheColumnsSaysWhichItNeeds() {
        let reader = read("Keyword,Keyword ID,Match Type\nsleep,1,EXACT\n")
        #expect(
            reader.badRows.map(\.description) == [
                "line 1: no header with Day (or Date), Keyword ID and Spend columns in the first 20 rows"
            ])
        #expect(read("").badRows.map(\.reason) == ["the file is empty"])
        // Without a currency column or one in the spend header, each row says so.
        #expect(read("Day,Keyword ID,Spend\n2026-03-01,1,2.00").badRows.map(\.column) == ["Currency"])
    }
}
