import Foundation
import GatewayConfig
import GatewayCore
import GatewayEnrichers
import Hummingbird
import Logging

extension GatewayHTTP {
    /// `GET /v1/reports/keywords` and the dashboard: operator routes behind
    /// `auth.operator_keys`, showing the report `report keywords` prints.
    static func addReportRoutes(to router: Router<GatewayRequestContext>, gateway: Gateway) {
        let operators = gateway.operatorKeys
        let reports = gateway.routeState.reports
        let guesses = gateway.routeState.guesses

        router.getAndHead("/v1/reports/keywords") { request, context -> Response in
            if let refused = try guesses.admit(request, context: context, operators) { return refused }
            let parameters = try ReportParameters(request, allowed: ReportParameters.report)
            let rows = try await reports.rows(try parameters.query())
            return try Self.json(rows)
        }
        // The dashboard's charts and SKAdNetwork section, as numbers for a team's own charts.
        router.getAndHead("/v1/reports/daily") { request, context -> Response in
            if let refused = try guesses.admit(request, context: context, operators) { return refused }
            let query = try ReportParameters(request, allowed: ReportParameters.report).query()
            let days = DailySeries(since: query.purchasesSince, until: query.purchasesUntil)
            return try Self.json(DailyReportJSON(try await reports.daily(query, days)))
        }
        router.getAndHead("/v1/reports/postbacks") { request, context -> Response in
            if let refused = try guesses.admit(request, context: context, operators) { return refused }
            let query = try ReportParameters(request, allowed: ["app_id", "since", "until"]).query()
            let summed = try await reports.postbacks(
                query.appID, SKANReport(since: query.purchasesSince, until: query.purchasesUntil))
            return try Self.json(PostbackReportJSON(summed))
        }
        addDashboardRoutes(to: router, gateway: gateway, operators: operators, reports: reports, guesses: guesses)
    }
}

extension GatewayHTTP {
    /// A report's answer, encoded as `report keywords --format json` encodes, so that the
    /// route and the command read alike.
    static func json(_ value: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Response(
            status: .ok,
            headers: [.contentType: JSONResponse.contentType, .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(value))))
    }
}

/// The report's one computation, with the names of the keyword cache beside the store.
struct Reports: Sendable {
    let store: any AttributionStore
    let names: KnownNamesCache
    let gate = ReportGate()

    func rows(_ query: KeywordReportQuery) async throws -> [KeywordReport.Row] {
        try await report(query, days: nil).rows
    }

    /// `days` counted as the report counts them, behind the same gate: without the lines'
    /// names and spend, which the days do not show.
    func daily(_ query: KeywordReportQuery, _ days: DailySeries) async throws -> DailySeries {
        try await gate.run { [store] in
            try await KeywordReportReader.report(from: store, query, days: days, names: { _ in [:] }).daily ?? days
        }
    }

    /// `report` with the postbacks of `appID` added, behind the same gate as the reports.
    func postbacks(_ appID: String?, _ report: SKANReport) async throws -> SKANReport {
        try await gate.run { [store] in
            try await KeywordReportReader.postbacks(from: store, appID: appID, into: report)
        }
    }

    /// The rows, the installs and revenue of `days` day by day, and the postbacks summed.
    func report(_ query: KeywordReportQuery, days: DailySeries?, postbacks: SKANReport? = nil) async throws -> (
        rows: [KeywordReport.Row], daily: DailySeries?, postbacks: SKANReport?
    ) {
        try await gate.run { [store, names] in
            try await KeywordReportReader.report(
                from: store, query, days: days, postbacks: postbacks, names: { keys in try await names.names(keys) },
                spend: { from, until in try await names.spend(from: from, until: until) })
        }
    }
}

/// The keyword cache's names, opened at the first report that has ids to name and kept:
/// on PostgreSQL each opening is a connection pool of its own.
actor KnownNamesCache {
    let storage: StorageSettings
    let logger: Logger
    private var opening: Task<KnownNames, any Error>?

    init(storage: StorageSettings, logger: Logger) {
        self.storage = storage
        self.logger = logger
    }

    func names(_ keys: [String]) async throws -> KeywordReportReader.Names {
        try await known().names(keys)
    }

    func spend(from: String?, until: String?) async throws -> KeywordReportReader.Spend {
        try await known().spend(from: from, until: until)
    }

    private func known() async throws -> KnownNames {
        let task =
            opening
            ?? Task { [storage, logger] in
                try await KnownNames(storagePath: storage.sqlitePath, storageURL: storage.postgres?.url, logger: logger)
            }
        opening = task
        do {
            return try await task.value
        } catch {
            // A database that was down at the first report is tried again at the next.
            if opening == task { opening = nil }
            throw error
        }
    }
}
