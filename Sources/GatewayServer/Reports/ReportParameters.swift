import Foundation
import GatewayCore
import Hummingbird

/// A report route's query parameters, checked: a parameter the route does not take, one
/// given twice, or a value it cannot read is a `400` naming the parameter, never a filter
/// silently ignored. An empty value is an absent one (a form's empty date field).
struct ReportParameters {
    private(set) var values: [String: String] = [:]

    init(_ request: Request, allowed: [String]) throws {
        for (name, value) in request.uri.queryParameters {
            let name = String(name)
            guard allowed.contains(name) else {
                throw GatewayError(
                    .invalidParameter,
                    "this route takes no such query parameter; it takes \(allowed.joined(separator: ", "))",
                    field: String(name.prefix(64)))
            }
            guard values[name] == nil else {
                throw GatewayError(.invalidParameter, "given more than once", field: name)
            }
            if !value.isEmpty { values[name] = String(value) }
        }
    }

    subscript(name: String) -> String? { values[name] }

    /// `app_id`, `since`, `until`, `network` and `country` as the report takes them.
    func query() throws -> KeywordReportQuery {
        func time(_ name: String) throws -> Date? {
            guard let text = values[name] else { return nil }
            do {
                return try ReportTime.parse(text, option: name)
            } catch {
                throw GatewayError(.invalidParameter, error.message, field: name)
            }
        }
        if let network = values["network"], let problem = KeywordReportQuery.problem(network: network) {
            throw GatewayError(.invalidParameter, problem, field: "network")
        }
        var country: String?
        if let text = values["country"] {
            guard let code = KeywordReportQuery.country(text) else {
                throw GatewayError(
                    .invalidParameter, "expected a two-letter country or region code (US, GB)", field: "country")
            }
            country = code
        }
        let query = KeywordReportQuery(
            appID: values["app_id"], purchasesSince: try time("since"), purchasesUntil: try time("until"),
            network: values["network"], country: country)
        if let since = query.purchasesSince, let until = query.purchasesUntil, until <= since {
            throw GatewayError(.invalidParameter, "until must be after since", field: "until")
        }
        return query
    }

    /// A whole number, as ids are.
    func id(_ name: String) throws -> Int64? {
        guard let text = values[name] else { return nil }
        guard let id = Int64(text) else {
            throw GatewayError(.invalidParameter, "expected a whole number", field: name)
        }
        return id
    }

    /// The parameters every report route takes.
    static let report = ["app_id", "since", "until", "network", "country"]
}
