import Foundation
import GatewayCore

/// The dashboard's SKAdNetwork section: postbacks per campaign (source identifier) and how
/// their conversion values and coarse values spread. Postbacks name no user, so the section
/// stands apart from the keyword table: the view's app and period only.
enum DashboardPostbacks {
    /// `period`: when they were received, as the page words it (``DashboardPage/period(_:)``).
    static func section(_ report: SKANReport, period: String) -> String {
        var html = #"<section aria-labelledby="skan-heading"><h2 id="skan-heading">SKAdNetwork postbacks</h2>"#
        html +=
            #"<p class="muted">\#(report.total) postbacks received \#(period), for the view's app. They carry "#
            + "no user id, so they are counted on their own: not in the table above, and not by network or "
            + "country.</p>"
        guard report.total > 0 else { return html + "</section>" }
        let campaigns = report.byCampaign.map { campaign in
            [campaign.source.isEmpty ? "(none)" : campaign.source]
                + [
                    campaign.postbacks, campaign.winning, campaign.withValue,
                ].map(String.init)
        }
        html += table(
            id: "skan-campaigns", caption: "Postbacks per campaign",
            header: ["Source identifier", "Postbacks", "Winning", "With a value"], rows: campaigns)
        let fine = report.fineValues.sorted { $0.key < $1.key }.map { [String($0.key), String($0.value)] }
        html += table(
            id: "skan-fine", caption: "Conversion values", header: ["Fine value", "Postbacks"], rows: fine)
        let coarse = ["low", "medium", "high"].compactMap { value in
            report.coarseValues[value].map { [value, String($0)] }
        }
        let otherCoarse = report.coarseValues.filter { !["low", "medium", "high"].contains($0.key) }
            .sorted { $0.key < $1.key }.map { [$0.key, String($0.value)] }
        html += table(
            id: "skan-coarse", caption: "Coarse values", header: ["Coarse value", "Postbacks"],
            rows: coarse + otherCoarse)
        let events = report.events.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map {
            [$0.key, String($0.value)]
        }
        html += table(
            id: "skan-events", caption: "Decoded events (conversion model)", header: ["Event", "Postbacks"],
            rows: events)
        return html + "</section>"
    }

    /// A small table, its first column text, the others numbers; nothing when it has no rows.
    static func table(id: String, caption: String, header: [String], rows: [[String]]) -> String {
        guard !rows.isEmpty else { return "" }
        var html = #"<div class="scroll"><table id="\#(id)"><caption>\#(caption)</caption><thead><tr>"#
        for (index, column) in header.enumerated() {
            html += #"<th scope="col"\#(index > 0 ? #" class="num""# : "")>\#(DashboardPage.escape(column))</th>"#
        }
        html += "</tr></thead><tbody>"
        for row in rows {
            html += "<tr>"
            for (index, cell) in row.enumerated() {
                html += #"<td\#(index > 0 ? #" class="num""# : "")>\#(DashboardPage.escape(cell))</td>"#
            }
            html += "</tr>"
        }
        return html + "</tbody></table></div>"
    }
}
