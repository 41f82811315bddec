import Foundation
import GatewayCore

/// The dashboard's daily charts, as inline SVG written by the server: one bar per day, days
/// without data at zero. Each chart is an image with a title saying what it shows, and each
/// day's bar carries a `<title>` with the day and its numbers, so that a screen reader, a
/// hover or a test reads them without any script.
enum DashboardCharts {
    static let height = 100.0
    static let barWidth = 10.0

    static let style = """
        figure.chart{margin:1rem 0}figure.chart svg{width:100%;height:8rem;display:block;background:#fafafa}
        figure.chart figcaption{font-weight:600;margin-bottom:.25rem}
        .axis{display:flex;justify-content:space-between;color:#666;font-size:.85rem;margin:.2rem 0 0}
        .legend span{display:inline-block;width:.8rem;height:.8rem;margin:0 .3rem 0 .8rem;vertical-align:-.1rem}
        """

    static let attributedColour = "#0550ae"
    static let organicColour = "#9ab8de"

    /// Installs per day: attributed stacked under organic.
    static func installs(_ series: DailySeries) -> String {
        let totals = zip(series.attributed, series.organic).map { $0 + $1 }
        let top = Double(totals.max() ?? 0)
        let summary =
            "Daily installs from \(series.days.first ?? "") to \(series.days.last ?? ""): "
            + "\(series.attributed.reduce(0, +)) attributed, \(series.organic.reduce(0, +)) organic"
        var marks = ""
        for (index, day) in series.days.enumerated() {
            let (attributed, organic) = (series.attributed[index], series.organic[index])
            let x = Double(index) * barWidth
            let attributedHeight = scaled(Double(attributed), top)
            let organicHeight = scaled(Double(organic), top)
            marks +=
                #"<g class="mark" data-day="\#(day)" data-attributed="\#(attributed)" data-organic="\#(organic)">"#
                + "<title>\(day): \(attributed) attributed, \(organic) organic</title>"
                + hitArea(x)
                + rect(x, height - attributedHeight, attributedHeight, attributedColour)
                + rect(x, height - attributedHeight - organicHeight, organicHeight, organicColour) + "</g>"
        }
        return figure(
            id: "installs", caption: "Daily installs", summary: summary, marks: marks, days: series.days.count,
            axis: axis(series, top: "\(Int(top))"),
            legend: #"<p class="legend muted"><span style="background:\#(attributedColour)"></span>attributed"#
                + #"<span style="background:\#(organicColour)"></span>organic or not known</p>"#)
    }

    /// Revenue per day in the main currency; the others are named, not charted: amounts in
    /// two currencies do not add up.
    static func revenue(_ series: DailySeries) -> String {
        let currency = series.mainCurrency
        let amounts = currency.flatMap { series.revenue[$0] } ?? Array(repeating: 0, count: series.days.count)
        let values = amounts.map { NSDecimalNumber(decimal: $0).doubleValue }
        let top = values.max() ?? 0
        let unit = currency ?? ""
        let total = amounts.reduce(Decimal(0), +)
        var marks = ""
        for (index, day) in series.days.enumerated() {
            let x = Double(index) * barWidth
            let barHeight = scaled(values[index], top)
            let amount = "\(amounts[index])"
            marks +=
                #"<g class="mark" data-day="\#(day)" data-revenue="\#(amount)" data-currency="\#(DashboardPage.escape(unit))">"#
                + "<title>\(day): \(amount) \(DashboardPage.escape(unit))</title>" + hitArea(x)
                + rect(x, height - barHeight, barHeight, attributedColour) + "</g>"
        }
        let others = series.revenue.keys.filter { $0 != currency }.sorted()
        let note =
            others.isEmpty
            ? ""
            : #"<p class="muted">Also revenue in \#(DashboardPage.escape(others.joined(separator: ", "))), "#
                + "not charted: amounts in different currencies do not add up.</p>"
        let caption = currency.map { "Daily revenue, \(DashboardPage.escape($0))" } ?? "Daily revenue"
        let span = "from \(series.days.first ?? "") to \(series.days.last ?? "")"
        let summary = currency.map { "Daily revenue in \($0) \(span): \(total)" } ?? "No revenue \(span)"
        return figure(
            id: "revenue", caption: caption, summary: DashboardPage.escape(summary), marks: marks,
            days: series.days.count, axis: axis(series, top: "\(plain(top)) \(unit)"),
            legend: note)
    }

    /// A number as the axis shows it: whole where it is, else two decimals.
    static func plain(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(format: "%.2f", value)
    }

    static func scaled(_ value: Double, _ top: Double) -> Double {
        top > 0 ? (value / top * (height - 4)).rounded() : 0
    }

    static func rect(_ x: Double, _ y: Double, _ height: Double, _ colour: String) -> String {
        #"<rect x="\#(x + 1)" y="\#(y)" width="\#(barWidth - 2)" height="\#(height)" fill="\#(colour)"/>"#
    }

    /// The whole column, invisible: a day at zero still shows its title on hover.
    static func hitArea(_ x: Double) -> String {
        #"<rect x="\#(x)" y="0" width="\#(barWidth)" height="\#(height)" fill="transparent"/>"#
    }

    static func axis(_ series: DailySeries, top: String) -> String {
        #"<p class="axis"><span>\#(series.days.first ?? "")</span><span>max \#(DashboardPage.escape(top))</span>"#
            + "<span>\(series.days.last ?? "")</span></p>"
    }

    static func figure(
        id: String, caption: String, summary: String, marks: String, days: Int, axis: String, legend: String
    ) -> String {
        let width = Double(days) * barWidth
        return #"<figure class="chart" id="chart-\#(id)"><figcaption>\#(caption)</figcaption>"#
            + #"<svg role="img" aria-labelledby="chart-\#(id)-title" viewBox="0 0 \#(width) \#(height)" "#
            + #"preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">"#
            + #"<title id="chart-\#(id)-title">\#(summary)</title>\#(marks)</svg>\#(axis)\#(legend)</figure>"#
    }
}
