import Foundation
import GatewayCore

/// The dashboard's HTML, written by the server: no script, inline CSS, a table that
/// scrolls sideways on a phone. Every value from records or the query is escaped: keyword
/// and campaign names come from apps, vendors and Apple.
enum DashboardPage {
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    static let style = """
        body{font:15px/1.4 -apple-system,system-ui,sans-serif;margin:0 auto;padding:1rem;max-width:72rem;color:#222}
        header{display:flex;justify-content:space-between;align-items:center;gap:1rem;flex-wrap:wrap}
        h1{font-size:1.3rem;margin:0}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
        nav,form.period{margin:.75rem 0}form.period{display:flex;gap:.5rem;flex-wrap:wrap;align-items:end}
        .scroll{overflow-x:auto}table{border-collapse:collapse;width:100%}
        th,td{padding:.35rem .6rem;border-bottom:1px solid #ddd;text-align:left;white-space:nowrap}
        th{background:#f4f4f4;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
        a{color:#0550ae}.error{color:#b00020}.muted{color:#666}
        main.login{max-width:22rem;margin:4rem auto}main.login input{width:100%;box-sizing:border-box;padding:.4rem}
        button{padding:.35rem .8rem}
        """ + DashboardCharts.style

    static func document(title: String, body: String) -> String {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title><style>\(style)</style></head>
        <body>\(body)</body></html>

        """
    }

    /// The login form; `error` when the key entered was not accepted, saying no more.
    /// The form, with `error` above it (``wrongKey``, ``tooManyWrongKeys(seconds:)``).
    static func login(next: String?, error: String? = nil) -> String {
        let hidden = next.map { #"<input type="hidden" name="next" value="\#(escape($0))">"# } ?? ""
        let message = error.map { #"<p class="error" role="alert">\#(escape($0))</p>"# } ?? ""
        return document(
            title: "Sign in · Attribution Gateway",
            body: """
                <main class="login"><h1>Attribution Gateway</h1>
                <p class="muted">Enter an operator key (auth.operator_keys).</p>\(message)
                <form method="post" action="/dashboard/login">\(hidden)
                <p><label for="key">Operator key</label><br>
                <input id="key" name="key" type="password" autocomplete="current-password" required autofocus></p>
                <p><button type="submit">Sign in</button></p></form></main>
                """)
    }

    static let wrongKey = "That key was not accepted."

    static func tooManyWrongKeys(seconds: Int) -> String {
        "Too many wrong keys were sent from here. Try again in \(seconds) s."
    }

    /// `shown`: the view's lines (``DashboardView/includes(_:)``), for the names of the
    /// campaign and ad group it is in.
    /// `daily`: the installs and revenue of the view's app, network, country and period,
    /// day by day, charted above the table.
    /// `postbacks`: the view's app's SKAdNetwork postbacks in the period, shown apart.
    /// `takenAt`: when the computation shown began; its links show the same numbers.
    static func page(
        _ view: DashboardView, groups: [DashboardView.Group], shown: KeywordReport.Row?, daily: DailySeries? = nil,
        postbacks: SKANReport? = nil, takenAt: Date? = nil
    ) -> String {
        let currencies = DashboardView.currencies(groups)
        let spendCurrencies = DashboardView.spendCurrencies(groups)
        var body = """
            <header><h1>Keywords → paying users</h1>
            <form method="post" action="/dashboard/logout"><button type="submit">Sign out</button></form></header>
            \(breadcrumbs(view, shown: shown))\(periodForm(view))
            <p><a href="\(escape(view.url([("format", "csv")])))">Download this view as CSV</a></p>
            """
        if let takenAt {
            var fresh = view
            fresh.asOf = nil
            body += """
                <p class="muted">Numbers as of \(escape(ISO8601.format(takenAt))), kept for this page's links.
                <a href="\(escape(fresh.url()))">Count again</a></p>
                """
        }
        if let daily {
            body +=
                #"<section class="charts" aria-label="Daily charts">"# + DashboardCharts.installs(daily)
                + DashboardCharts.revenue(daily) + "</section>"
        }
        if groups.isEmpty {
            body += #"<p class="muted">No installs or purchases recorded for this view yet.</p>"#
        }
        var apps: [String] = []
        for group in groups where apps.last != group.appID { apps.append(group.appID) }
        for app in apps {
            body += "<section><h2>App \(escape(app))</h2>"
            body +=
                table(
                    view, groups.filter { $0.appID == app }, currencies: currencies, spendCurrencies: spendCurrencies)
                + "</section>"
        }
        if let postbacks { body += DashboardPostbacks.section(postbacks, period: escape(period(view))) }
        let countryNote = view.country == nil ? "" : " Spend is not known per country: a country's view shows none."
        body += """
            <p class="muted">Purchases \(escape(period(view))); installs from any time. Paying users are
            summed over lines: a user paying on two lines counts on each. Conversion: of the installs, those
            paying on the same line. Spend: Apple Ads spend on the lines' keywords over the days of the
            period (UTC); ROAS is revenue over spend in the same currency. Charts: each user's install on the
            day it happened and revenue on the purchase's day (UTC), for the view's app, network and country,
            over the period (without one, the last 30 days); the table's installs are from any time.\(countryNote)</p>
            """
        return document(title: "Keywords · Attribution Gateway", body: body)
    }

    static func period(_ view: DashboardView) -> String {
        switch (view.since, view.until) {
        case (nil, nil): "of all time"
        case (let since?, nil): "from \(since)"
        case (nil, let until?): "before \(until)"
        case (let since?, let until?): "from \(since), before \(until)"
        }
    }

    static func table(
        _ view: DashboardView, _ groups: [DashboardView.Group], currencies: [String], spendCurrencies: [String] = []
    ) -> String {
        let name = view.level.rawValue.prefix(1).uppercased() + view.level.rawValue.dropFirst()
        var html = #"<div class="scroll"><table><thead><tr><th scope="col">\#(escape(name))</th>"#
        if view.level == .keyword { html += #"<th scope="col">Match</th>"# }
        for column in ["Installs", "Paying users", "Conv. %", "Purchases", "Refunds"] {
            html += #"<th scope="col" class="num">\#(column)</th>"#
        }
        for currency in currencies { html += #"<th scope="col" class="num">Revenue \#(escape(currency))</th>"# }
        for currency in spendCurrencies {
            for column in ["Spend", "Cost / install", "Cost / paying user", "ROAS"] {
                html += #"<th scope="col" class="num">\#(column) \#(escape(currency))</th>"#
            }
        }
        if view.showsInstallsInPeriod(spendCurrencies) {
            html += #"<th scope="col" class="num">Installs in period</th>"#
        }
        html += "</tr></thead><tbody>"
        for group in groups {
            let label = escape(group.label)
            let cell = view.opening(group).map { #"<a href="\#(escape($0.url()))">\#(label)</a>"# } ?? label
            html += "<tr><td>\(cell)</td>"
            if view.level == .keyword { html += "<td>\(escape(group.matchType ?? ""))</td>" }
            for number in group.numbers(
                currencies, spendCurrencies: spendCurrencies,
                installsInPeriod: view.showsInstallsInPeriod(spendCurrencies))
            {
                html += #"<td class="num">\#(escape(number))</td>"#
            }
            html += "</tr>"
        }
        return html + "</tbody></table></div>"
    }

    /// Where the view is, each step a link back up.
    static func breadcrumbs(_ view: DashboardView, shown: KeywordReport.Row?) -> String {
        var steps = [(label: "All apps", url: view.filters.url())]
        var path = view.filters
        if let app = view.appID {
            path.appID = app
            steps.append(("App \(app)", path.url()))
        }
        if let network = view.network {
            // Back up within the page's network, the page's numbers; above it, another
            // query, counted again.
            path.asOf = view.asOf
            path.network = network
            steps.append((network, path.url()))
        }
        let refs = [
            (view.campaign, \DashboardView.campaign, shown?.campaign),
            (view.adGroup, \DashboardView.adGroup, shown?.adGroup),
        ]
        for (ref, keyPath, name) in refs {
            guard let ref else { continue }
            path[keyPath: keyPath] = ref
            switch ref {
            case .id(let id): steps.append((name ?? "#\(id)", path.url()))
            case .name(let name): steps.append((name, path.url()))
            }
        }
        let links = steps.enumerated().map { index, step in
            index == steps.count - 1
                ? #"<span aria-current="page">\#(escape(step.label))</span>"#
                : #"<a href="\#(escape(step.url))">\#(escape(step.label))</a>"#
        }
        return #"<nav aria-label="Drill-down">\#(links.joined(separator: " › "))</nav>"#
    }

    /// Purchases' period and the country: a plain GET form, keeping the view's place.
    static func periodForm(_ view: DashboardView) -> String {
        var hidden = ""
        // Without `as_of`: applying the form computes the report again.
        for (name, value) in view.queryItems where !["since", "until", "country", "as_of"].contains(name) {
            hidden += #"<input type="hidden" name="\#(escape(name))" value="\#(escape(value))">"#
        }
        return """
            <form class="period" method="get" action="/dashboard">\(hidden)
            <label>Purchases from<br><input type="date" name="since" value="\(escape(view.since ?? ""))"></label>
            <label>before<br><input type="date" name="until" value="\(escape(view.until ?? ""))"></label>
            <label>Country<br><input name="country" value="\(escape(view.country ?? ""))" size="4" maxlength="2"
            pattern="[A-Za-z]{2}" placeholder="US" title="Two-letter code of the install's country or region"></label>
            <button type="submit">Apply</button></form>
            """
    }
}
