import Foundation
import GatewayCore

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
    /// The gateway's `{"code", "message", "field"}`, as every other route's errors carry.
    let error: GatewayErrorDetail?

    static let path = "/v1/skadnetwork/conversion-value"

    static func value(_ value: Int?) -> ConversionValueAnswer {
        ConversionValueAnswer(conversion_value: value, status: "ok", reason: nil, error: nil)
    }

    static func refusal(_ code: GatewayError.Code, field: String, _ reason: String) -> ConversionValueAnswer {
        refusal(GatewayError(code, reason, field: field))
    }

    static func refusal(_ error: GatewayError) -> ConversionValueAnswer {
        ConversionValueAnswer(
            conversion_value: nil, status: "error", reason: error.message,
            error: GatewayErrorDetail(error))
    }
}

extension SKAdNetworkProviderPlugin {
    /// Served while the provider has a conversion model. Every error on it, a refused key
    /// or a rate limit as much as bad input, is answered in the snippet's shape: it reads
    /// only `status` and `reason`.
    static func conversionValueRoute(model: ConversionModel) -> ContributedRoute {
        ContributedRoute(
            .query, ConversionValueAnswer.path,
            errorAnswer: { error in RouteAnswer(status: error.code.httpStatus, ConversionValueAnswer.refusal(error)) }
        ) { request in
            let query = request.query
            let apps: Set<String>?
            do {
                apps = try request.admit(queryKey: query["a"])
            } catch let error as GatewayError where error.code == .unauthorized {
                throw GatewayError(
                    .unauthorized, "send a valid API key as the query's a=KEY, or Authorization: Bearer KEY")
            }
            // The model is one for every app, so the client snippet names none; one that does
            // is held to its key's apps, as on every other route.
            if let apps, let appID = query["app_id"], !apps.contains(appID) {
                throw GatewayError.keyNotForApp
            }
            let answer = conversionValue(query, model: model, now: Date())
            return RouteAnswer(status: answer.status == "ok" ? 200 : 400, answer)
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
        if let version = text("skan_version") {
            guard let isWindowed = ConversionModel.isWindowed(skanVersion: version) else {
                return .refusal(
                    .invalidField, field: "skan_version",
                    "skan_version must be a SKAdNetwork version such as 4.0, or aak")
            }
            windowed = isWindowed
        }
        let coarse = text("coarse_value")
        if let coarse, !ConversionModel.coarseLevels.contains(coarse) {
            return .refusal(.invalidField, field: "coarse_value", "coarse_value must be low, medium or high")
        }
        var timing = ConversionModel.AppState.Timing.skan3(lastCall: calls["last_call_to_skadnetwork_timestamp"])
        if windowed {
            guard let first = calls["first_call_to_skadnetwork_timestamp"] else {
                return .refusal(
                    .missingField, field: "first_call_to_skadnetwork_timestamp",
                    "first_call_to_skadnetwork_timestamp is required with skan_version 4 and later: it sets the window")
            }
            timing = .windowed(firstCall: first)
        }
        let state = ConversionModel.AppState(
            event: event, revenue: revenue, fineValue: current, coarseValue: coarse, timing: timing)
        let next = model.next(for: state, now: now)
        var answer = ConversionValueAnswer.value(next.fineValue)
        answer.coarse_value = next.coarseValue
        answer.postback_sequence_index = next.window
        return answer
    }
}
