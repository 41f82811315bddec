import Foundation
import GatewayCore
import GatewayProviders
import Hummingbird

/// `GET /v1/skadnetwork/conversion-value`: the SKAN server-to-server pattern, where the
/// app reports each session, event and revenue and asks which conversion value to set.
/// It takes the query names of the widely copied client snippet of Singular's SKAN S2S
/// guide, so an app using it switches by changing one URL. Values never go down. For
/// SKAN 3 nothing changes once the update window (24 h after the last SKAdNetwork call)
/// closed; an app that says it is on SKAN 4 or AdAttributionKit (`skan_version`) is
/// answered for the postback window its first call places it in, a coarse value with
/// the fine one in the first, a coarse value alone in the two later ones.
/// A refusal carries the snippet's `status`/`reason` and the gateway's `error` object, so
/// both the snippet and a client reading every route's errors one way understand it.
struct ConversionValueAnswer: Encodable {
    let conversion_value: Int?
    var coarse_value: String? = nil
    /// The SKAN 4 window answered for (0, 1, 2); absent for SKAN 3.
    var postback_sequence_index: Int? = nil
    let status: String
    let reason: String?
    let error: ErrorBody?

    /// The gateway's `{"code", "message", "field"}`, as every other route's errors carry.
    struct ErrorBody: Encodable, Equatable {
        let code: String
        let message: String
        let field: String?
    }

    static let path = "/v1/skadnetwork/conversion-value"

    static func isRoute(_ path: String) -> Bool {
        path == Self.path || path == Self.path + "/"
    }

    static func value(_ value: Int?) -> ConversionValueAnswer {
        ConversionValueAnswer(conversion_value: value, status: "ok", reason: nil, error: nil)
    }

    static func refusal(_ code: GatewayError.Code, field: String, _ reason: String) -> ConversionValueAnswer {
        refusal(GatewayError(code, reason, field: field))
    }

    static func refusal(_ error: GatewayError) -> ConversionValueAnswer {
        ConversionValueAnswer(
            conversion_value: nil, status: "error", reason: error.message,
            error: ErrorBody(code: error.code.name, message: error.message, field: error.field))
    }
}

extension GatewayHTTP {
    static func addConversionValueRoute(to router: Router<GatewayRequestContext>, gateway: Gateway) {
        guard let provider = gateway.provider(named: SKAdNetworkProvider.typeName) as? SKAdNetworkProvider,
            let model = provider.options.conversionModel
        else { return }
        let keyring = gateway.keyring
        // It changes nothing, so `HEAD` answers as `GET` does.
        router.getAndHead(RouterPath(ConversionValueAnswer.path)) { request, _ in
            // Read as a form is, `+` a space: Python's, Go's and Java's encoders write one so.
            let query = FormEncoding.decode(request.uri.query ?? "")
            let apps: Set<String>?
            do {
                apps = try keyring.admit(request.headers, queryKey: query["a"])
            } catch let error as GatewayError where error.code == .unauthorized {
                throw GatewayError(
                    .unauthorized, "send a valid API key as the query's a=KEY, or Authorization: Bearer KEY")
            }
            // The model is one for every app, so the client snippet names none; one that does
            // is held to its key's apps, as on every other route.
            if let apps, let appID = query["app_id"], !apps.contains(appID) {
                throw APIKeyring.forbidden
            }
            let answer = conversionValue(query, model: model, now: Date())
            return JSONResponse.make(status: answer.status == "ok" ? .ok : .badRequest, answer)
        }
    }

    static func conversionValue(_ query: [String: String], model: ConversionModel, now: Date) -> ConversionValueAnswer {
        func text(_ name: String) -> String? {
            query[name].flatMap { $0.isEmpty ? nil : $0 }
        }
        var current = 0
        if let value = text("conversion_value") {
            guard let number = Int(value), (0...63).contains(number) else {
                return .refusal(
                    .invalidField, field: "conversion_value", "conversion_value must be an integer from 0 to 63")
            }
            current = number
        }
        guard let event = text("n") else {
            return .refusal(.missingField, field: "n", "n (the event name, or __SESSION__) is required")
        }
        var revenue: [String: Decimal] = [:]
        if let json = text("total_revenue_by_currency") {
            guard case .object(let object)? = try? JSONValue.parse(Data(json.utf8)) else {
                return .refusal(
                    .invalidField, field: "total_revenue_by_currency",
                    "total_revenue_by_currency must be a JSON object such as {\"USD\": 4.99}")
            }
            for (currency, amount) in object {
                switch amount {
                case .integer(let n): revenue[currency] = Decimal(n)
                case .double(let d): revenue[currency] = Decimal(string: String(d)) ?? Decimal(d)
                default:
                    return .refusal(
                        .invalidField, field: "total_revenue_by_currency.\(currency)",
                        "total_revenue_by_currency.\(currency) must be a number")
                }
            }
        }
        var calls: [String: Double] = [:]
        var neverCalled = false
        for name in ["first_call_to_skadnetwork_timestamp", "last_call_to_skadnetwork_timestamp"] {
            guard let value = text(name) else { continue }
            // The snippet sends 0 until the app has called SKAdNetwork: this call is its first.
            if Double(value) == 0 {
                neverCalled = true
                continue
            }
            // Milliseconds, or `inf`, read as seconds kept the update window open for good.
            guard let seconds = Double(value), seconds.isFinite, seconds > 0,
                seconds <= now.timeIntervalSince1970 + 86_400
            else {
                return .refusal(
                    .invalidField, field: name,
                    "\(name) must be UNIX seconds, at most a day ahead, or 0 if the app never called SKAdNetwork")
            }
            calls[name] = seconds
        }
        if let first = calls["first_call_to_skadnetwork_timestamp"],
            let last = calls["last_call_to_skadnetwork_timestamp"],
            first > last
        {
            return .refusal(
                .invalidField, field: "last_call_to_skadnetwork_timestamp",
                "last_call_to_skadnetwork_timestamp is before first_call_to_skadnetwork_timestamp")
        }
        // The first call, about to be made, opens the first window.
        if neverCalled && calls["first_call_to_skadnetwork_timestamp"] == nil {
            calls["first_call_to_skadnetwork_timestamp"] = now.timeIntervalSince1970
        }
        var windowed = false
        if let version = text("skan_version")?.trimmingCharacters(in: .whitespaces) {
            // A version as Apple writes one (`4.0`, `3`), or `aak`: `Double` also read
            // `0x4` and `1e9` as versions.
            let parts = version.split(separator: ".", omittingEmptySubsequences: false)
            if version.lowercased() == "aak" {
                windowed = true
            } else if parts.allSatisfy(\.isASCIIDigits), let major = Int(parts[0]) {
                windowed = major >= 4
            } else {
                return .refusal(
                    .invalidField, field: "skan_version",
                    "skan_version must be a SKAdNetwork version such as 4.0, or aak")
            }
        }
        if let coarse = text("coarse_value"), !ConversionModel.coarseLevels.contains(coarse) {
            return .refusal(.invalidField, field: "coarse_value", "coarse_value must be low, medium or high")
        }
        if windowed {
            return windowedValue(
                event: event, revenue: revenue, current: current, query: query, calls: calls, model: model, now: now)
        }
        // SKAN 3's timer: each update allows another within 24 hours, then the window closes.
        if let last = calls["last_call_to_skadnetwork_timestamp"], now.timeIntervalSince1970 > last + 24 * 3600 {
            return .value(nil)
        }
        guard let next = model.fineValue(event: event, revenue: revenue), next > current else { return .value(nil) }
        return .value(next)
    }

    /// SKAN 4 and AdAttributionKit: three windows fixed from the first call (days 0–2, 3–7,
    /// 8–35, postbacks 0, 1, 2), the first with a fine and a coarse value, the later two
    /// with a coarse value only; no 24-hour timer. Each value only goes up within its window.
    static func windowedValue(
        event: String, revenue: [String: Decimal], current: Int, query: [String: String], calls: [String: Double],
        model: ConversionModel, now: Date
    ) -> ConversionValueAnswer {
        guard let first = calls["first_call_to_skadnetwork_timestamp"] else {
            return .refusal(
                .missingField, field: "first_call_to_skadnetwork_timestamp",
                "first_call_to_skadnetwork_timestamp is required with skan_version 4 and later: it sets the window")
        }
        // Checked by the caller: low, medium or high.
        let currentCoarse = query["coarse_value"].flatMap { ConversionModel.coarseLevels.firstIndex(of: $0) } ?? -1
        let day = 86_400.0
        let elapsed = now.timeIntervalSince1970 - first
        let window: Int
        switch elapsed {
        case ..<(2 * day): window = 0
        case ..<(7 * day): window = 1
        case ..<(35 * day): window = 2
        default: return .value(nil)  // every window has closed
        }
        var answer = ConversionValueAnswer.value(nil)
        if window == 0, let next = model.fineValue(event: event, revenue: revenue), next > current {
            answer = .value(next)
        }
        if let coarse = model.coarseValue(window: window, event: event, revenue: revenue),
            let level = ConversionModel.coarseLevels.firstIndex(of: coarse), level > currentCoarse
        {
            answer.coarse_value = coarse
        }
        answer.postback_sequence_index = window
        return answer
    }
}
