import Foundation
import GatewayCore
import HTTPTypes
import Hummingbird

extension GatewayHTTP {
    /// `GET /dashboard` (HTML, or CSV with `format=csv`), its login form and sign-out. A
    /// browser signs in once with an operator key and holds a session cookie; a script
    /// sends the key as `Authorization: Bearer` instead.
    static func addDashboardRoutes(
        to router: Router<GatewayRequestContext>, gateway: Gateway, operators: OperatorKeys, reports: Reports,
        guesses: OperatorKeyGuesses
    ) {
        let bodies = BodyReader(gateway.configuration.server).forRoute(limit: 4096)
        // Said at most once a minute, with how many it stands for: someone guessing keys shows
        // in the log without flooding it. Never the key tried, nor the address.
        let refusedLogins = gateway.routeState.refusedLogins
        let snapshots = gateway.routeState.snapshots

        router.getAndHead("/dashboard") { request, context -> Response in
            guard operators.isConfigured else { throw OperatorKeys.notConfigured }
            // A browser's session, else an operator key as bearer; a client guessing keys
            // is refused before its key is looked at.
            if !Dashboard.hasSession(request, operators) {
                let next = Dashboard.next(request)
                if let refused = try guesses.refusal(request, context: context, as: .loginForm(next: next)) {
                    return refused
                }
                guard operators.bearer(request.headers) != nil else {
                    if request.headers[.authorization] != nil { guesses.failed(request, context: context) }
                    return Dashboard.html(.unauthorized, DashboardPage.login(next: next))
                }
            }
            let parameters = try ReportParameters(request, allowed: DashboardView.parameters)
            var view = try DashboardView(parameters)
            let format = parameters["format"] ?? "html"
            guard ["html", "csv"].contains(format) else {
                throw GatewayError(.invalidParameter, "expected html or csv", field: "format")
            }
            let query = try parameters.query()
            // A page's link shows the page's numbers while they are kept; anything else is
            // counted. Only a page shown is kept, for its links: a HEAD or a CSV fetched
            // by a script would push operators' pages out.
            let snapshot: ReportSnapshots.Snapshot
            if let id = view.asOf, let kept = snapshots.find(id, query: query) {
                snapshot = kept
            } else {
                let page = format == "html"
                let takenAt = Date()
                // The CSV is the table alone: no days to count.
                let (rows, daily, summed) = try await reports.report(
                    query, days: page ? DailySeries(since: query.purchasesSince, until: query.purchasesUntil) : nil,
                    postbacks: page ? SKANReport(since: query.purchasesSince, until: query.purchasesUntil) : nil)
                snapshot = .init(query: query, takenAt: takenAt, rows: rows, daily: daily, postbacks: summed)
                view.asOf = page && request.method == .get ? snapshots.keep(snapshot) : nil
            }
            let rows = snapshot.rows
            let groups = view.groups(rows)
            if format == "csv" {
                let file = "keywords-\(view.level.rawValue.replacingOccurrences(of: " ", with: "-")).csv"
                return Response(
                    status: .ok,
                    headers: [
                        .contentType: "text/csv; charset=utf-8", .cacheControl: "no-store",
                        .contentDisposition: #"attachment; filename="\#(file)""#,
                    ],
                    body: .init(byteBuffer: ByteBuffer(string: view.csv(groups))))
            }
            return Dashboard.html(
                .ok,
                DashboardPage.page(
                    view, groups: groups, shown: rows.first(where: view.includes), daily: snapshot.daily,
                    postbacks: snapshot.postbacks, takenAt: snapshot.takenAt))
        }

        router.get("/dashboard/login") { request, _ -> Response in
            guard operators.isConfigured else { throw OperatorKeys.notConfigured }
            let next = request.uri.queryParameters["next"].map(String.init).flatMap(Dashboard.safeNext)
            return Dashboard.html(.ok, DashboardPage.login(next: next))
        }

        router.post("/dashboard/login") { request, context -> Response in
            guard operators.isConfigured else { throw OperatorKeys.notConfigured }
            let form = FormEncoding.decode(String(decoding: try await bodies.collect(request), as: UTF8.self))
            let next = form["next"].flatMap(Dashboard.safeNext)
            if let refused = try guesses.refusal(request, context: context, as: .loginForm(next: next)) {
                return refused
            }
            guard let key = form["key"], let digest = operators.matching(key) else {
                guesses.failed(request, context: context)
                if let held = refusedLogins.pass() {
                    gateway.logger.warning(
                        "a dashboard login was refused: the key given is not one of auth.operator_keys",
                        metadata: ["refused": "\(held + 1)"])
                }
                let page = DashboardPage.login(next: next, error: DashboardPage.wrongKey)
                return Dashboard.html(.unauthorized, page)
            }
            let expiry = Int(Date().timeIntervalSince1970) + OperatorKeys.sessionSeconds
            var response = Response(status: .seeOther, headers: [.location: next ?? "/dashboard"])
            response.headers[.setCookie] = Dashboard.cookie(
                OperatorKeys.session(for: digest, expiry: expiry), maxAge: OperatorKeys.sessionSeconds)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        router.post("/dashboard/logout") { _, _ -> Response in
            var response = Response(status: .seeOther, headers: [.location: "/dashboard/login"])
            response.headers[.setCookie] = Dashboard.cookie("", maxAge: 0)
            return response
        }
    }
}

enum Dashboard {
    static let cookieName = "gateway_operator_session"
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    /// No script, no outside resource, no framing: escaping is the first defence, this the second.
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    /// `Secure`: a browser sends it over HTTPS only (and to `localhost`); `HttpOnly`: no
    /// script reads it; `SameSite=Strict`: no other site's page sends it along.
    static func cookie(_ value: String, maxAge: Int) -> String {
        "\(cookieName)=\(value); Path=/dashboard; Max-Age=\(maxAge); Secure; HttpOnly; SameSite=Strict"
    }

    /// A session cookie the login form set, still good.
    static func hasSession(_ request: Request, _ operators: OperatorKeys) -> Bool {
        guard let session = request.cookies[cookieName]?.value else { return false }
        return operators.admitsSession(session)
    }

    /// Where the login form returns to: the view that asked for it.
    static func next(_ request: Request) -> String? {
        safeNext(request.uri.string)
    }

    /// A dashboard path only, so that the form cannot send anyone elsewhere (`//evil`,
    /// `/dashboard.evil`), and no header could be split by it.
    static func safeNext(_ path: String) -> String? {
        guard path == "/dashboard" || path.hasPrefix("/dashboard?"), path.count <= 2048,
            !path.contains(where: { $0.isNewline || $0 == "\\" })
        else { return nil }
        return path
    }

    /// An HTML answer, kept out of caches and frames, and allowed no script at all.
    static func html(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                .contentSecurityPolicy: contentSecurityPolicy,
                .xContentTypeOptions: "nosniff", referrerPolicy: "no-referrer",
            ],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
