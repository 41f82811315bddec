import Foundation
import Hummingbird
import Synchronization

/// Local stand-ins for Singular's, AppsFlyer's and Adjust's S2S endpoints on one port,
/// each checking a request as the vendor does and answering as it does: Singular `200`
/// with `{"status":"error"}` for bad parameters, AppsFlyer `401` for a wrong key and a
/// silent `200` for an app id without its `id` prefix, Adjust `202` for a wrong token.
final class FakeVendors: Sendable {
    static let singularKey = "singular-sdk-key-0001"
    static let appsFlyerKey = "appsflyer-s2s-key-0001"
    static let adjustToken = "adjust-s2s-token-0001"
    static let adjustAppToken = "abc123abc123"
    static let adjustEventTokens = ["purchase": "pur987", "level_up": "lvl654"]

    /// One accepted request: the vendor, its path and every parameter (query, form or
    /// JSON body, flattened to text).
    struct Seen: Sendable {
        var vendor: String
        var path: String
        var parameters: [String: String]
        var headers: [String: String]
        var rawText: String
    }

    private let seen = Mutex<[Seen]>([])
    private let refusals = Mutex<[String]>([])
    /// While above zero, every vendor answers `503` and counts down.
    let outage = Mutex(0)
    /// While above zero, Singular takes the event, counts down, and answers two seconds
    /// later: past the gateway's timeout, as a vendor under load does.
    let slowAnswers = Mutex(0)
    /// Singular answers these statuses at once, one request each, and then stalls the body
    /// past the gateway's timeout.
    let stalledAnswers = Mutex<[HTTPResponse.Status]>([])
    /// How long a slow answer is held, and a stalled body stalls.
    let holdFor = Mutex(Duration.seconds(2))
    /// Singular holds each request until this many are open at once (20 s at most), to
    /// show how many the gateway sends side by side: the most seen is `mostOpen`.
    let openAtOnce = Mutex(0)
    private let open = Mutex((now: 0, most: 0))
    var mostOpen: Int { open.withLock { $0.most } }
    /// Devices (IDFV) that opted out: Adjust answers `451` for their events.
    let optedOut = Mutex<Set<String>>([])
    /// Devices (IDFV) Adjust has not learned from its SDK yet: it answers `404` "Device
    /// not found" to this many more of their events.
    let unknownToAdjust = Mutex<[String: Int]>([:])

    /// Singular's SKAN answer, members added to its `{"status":"ok"}` (such as
    /// `"conversion_value":7`), as Singular answers for an app with SKAN enabled.
    let singularSKANAnswer = Mutex<String?>(nil)
    /// While true, Singular takes each event and holds its answer (a minute at most).
    let holdSingular = Mutex(false)

    /// While above zero, every vendor answers `400` with a page quoting the request's URL
    /// and headers, as a proxy's or a debugging endpoint's error page does, and counts down.
    let echoes = Mutex(0)

    var accepted: [Seen] { seen.withLock { $0 } }
    func accepted(_ vendor: String) -> [Seen] { accepted.filter { $0.vendor == vendor } }
    /// Requests a vendor refused or (AppsFlyer) silently dropped.
    var refused: [String] { refusals.withLock { $0 } }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        for path in ["/api/v1/launch", "/api/v1/evt"] {
            router.get(RouterPath(path)) { request, _ -> Response in
                if let down = self.down(request) { return down }
                var query: [String: String] = [:]
                for (key, value) in request.uri.queryParameters { query[String(key)] = String(value) }
                let required = ["a", "p", "i", "ip", "ve"] + (path.hasSuffix("evt") ? ["n"] : [])
                if query["a"] != Self.singularKey { return self.singular(refusing: "Invalid SDK key") }
                if let missing = required.first(where: { query[$0] == nil }) {
                    return self.singular(refusing: "Missing parameter: \(missing)")
                }
                if query["p"] != "iOS" || query["ip"]?.contains(":") == true {
                    return self.singular(refusing: "Invalid platform or ip")
                }
                self.record(
                    Seen(
                        vendor: "singular", path: path, parameters: query, headers: Self.headers(request),
                        rawText: request.uri.description))
                let slow = self.slowAnswers.withLock { remaining -> Bool in
                    guard remaining > 0 else { return false }
                    remaining -= 1
                    return true
                }
                if slow { try await Task.sleep(for: self.holdFor.withLock { $0 }) }
                for _ in 0..<6000 where self.holdSingular.withLock({ $0 }) {
                    try await Task.sleep(for: .milliseconds(10))
                }
                let wanted = self.openAtOnce.withLock { $0 }
                if wanted > 0 {
                    self.open.withLock { open in
                        open.now += 1
                        open.most = max(open.most, open.now)
                    }
                    for _ in 0..<2000 where self.open.withLock({ $0.most }) < wanted {
                        try await Task.sleep(for: .milliseconds(10))
                    }
                    self.open.withLock { $0.now -= 1 }
                }
                if let stalled = self.stalledAnswers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    let hold = self.holdFor.withLock { $0 }
                    return Response(
                        status: stalled, headers: [.contentLength: "100"],
                        body: ResponseBody { writer in
                            try await Task.sleep(for: hold)
                            try await writer.write(ByteBuffer(string: String(repeating: " ", count: 100)))
                            try await writer.finish(nil)
                        })
                }
                if let skan = self.singularSKANAnswer.withLock({ $0 }) {
                    return Self.json(#"{"status":"ok","# + skan + "}")
                }
                return Self.json(#"{"status":"ok"}"#)
            }
        }
        router.post("/inappevent/:app") { request, context -> Response in
            if let down = self.down(request) { return down }
            guard request.headers[HTTPFields.Element.Name("authentication")!] == Self.appsFlyerKey else {
                return Response(status: .unauthorized, body: .init(byteBuffer: ByteBuffer(string: "Unauthorized")))
            }
            let body = try await request.body.collect(upTo: 64 * 1024)
            guard body.readableBytes <= 1024, request.headers[.contentType] == "application/json",
                let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any]
            else { return self.appsFlyer(refusing: "Payload is missing or failed to parse") }
            guard let id = object["appsflyer_id"] as? String,
                id.range(of: #"^\d{13}-\d{7}$"#, options: .regularExpression) != nil
            else { return self.appsFlyer(refusing: "appsflyer_id is a mandatory field") }
            guard object["eventName"] is String, object["eventValue"] is String else {
                return self.appsFlyer(refusing: "Bad request")
            }
            let app = context.parameters.get("app") ?? ""
            var parameters = object.mapValues { "\($0)" }
            parameters["app"] = app
            let text = String(buffer: body)
            // An iOS app id without "id" is accepted and never recorded.
            guard app.range(of: #"^id\d+$"#, options: .regularExpression) != nil else {
                self.refusals.withLock { $0.append("appsflyer dropped app \(app)") }
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "OK")))
            }
            self.record(
                Seen(
                    vendor: "appsflyer", path: "/inappevent", parameters: parameters, headers: Self.headers(request),
                    rawText: text))
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "OK")))
        }
        for path in ["/session", "/event"] {
            router.post(RouterPath(path)) { request, _ -> Response in
                if let down = self.down(request) { return down }
                guard request.headers[.authorization] == "Bearer \(Self.adjustToken)" else {
                    self.refusals.withLock { $0.append("adjust token") }
                    return Response(
                        status: .accepted,
                        body: .init(byteBuffer: ByteBuffer(string: "Missing/Wrong authentication token")))
                }
                let body = try await request.body.collect(upTo: 1 << 20)
                guard request.headers[.contentType] == "application/x-www-form-urlencoded" else {
                    return self.adjust(refusing: "Bad content type")
                }
                let text = String(buffer: body)
                var form: [String: String] = [:]
                for pair in text.split(separator: "&") {
                    let parts = pair.split(separator: "=", maxSplits: 1).map {
                        String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
                    }
                    if parts.count == 2 { form[parts[0]] = parts[1] }
                }
                guard form["s2s"] == "1", form["app_token"] == Self.adjustAppToken else {
                    return self.adjust(refusing: "Invalid app token")
                }
                if path == "/event", !Self.adjustEventTokens.values.contains(form["event_token"] ?? "") {
                    return self.adjust(refusing: "Invalid event token")
                }
                guard form["idfa"] != nil || form["idfv"] != nil || form["adid"] != nil else {
                    return self.adjust(refusing: "Device id missing")
                }
                guard let created = form["created_at_unix"].flatMap(Double.init),
                    Date().timeIntervalSince1970 - created <= 58 * 86400
                else { return self.adjust(refusing: "Event too old") }
                if let idfv = form["idfv"], self.optedOut.withLock({ $0.contains(idfv) }) {
                    return self.adjust(refusing: "Device is opted out", status: .init(code: 451))
                }
                if let idfv = form["idfv"],
                    self.unknownToAdjust.withLock({ unknown in
                        guard let left = unknown[idfv], left > 0 else { return false }
                        unknown[idfv] = left - 1
                        return true
                    })
                {
                    return self.adjust(refusing: "Device not found", status: .notFound)
                }
                self.record(
                    Seen(vendor: "adjust", path: path, parameters: form, headers: Self.headers(request), rawText: text))
                return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: "OK")))
            }
        }
        return router
    }

    private func down(_ request: Request) -> Response? {
        let echoing = echoes.withLock { remaining -> Bool in
            guard remaining > 0 else { return false }
            remaining -= 1
            return true
        }
        if echoing {
            let headers = request.headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
            let page = "<html>Bad request\n\(request.uri)\n\(headers)</html>"
            return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: page)))
        }
        let isDown = outage.withLock { remaining -> Bool in
            guard remaining > 0 else { return false }
            remaining -= 1
            return true
        }
        return isDown ? Response(status: .serviceUnavailable) : nil
    }

    private func record(_ request: Seen) {
        seen.withLock { $0.append(request) }
    }

    private func singular(refusing reason: String) -> Response {
        refusals.withLock { $0.append("singular: \(reason)") }
        return Self.json(#"{"status":"error","reason":"\#(reason)"}"#)
    }

    private func appsFlyer(refusing reason: String) -> Response {
        refusals.withLock { $0.append("appsflyer: \(reason)") }
        return Response(status: .badRequest, body: .init(byteBuffer: ByteBuffer(string: reason)))
    }

    private func adjust(refusing reason: String, status: HTTPResponse.Status = .badRequest) -> Response {
        refusals.withLock { $0.append("adjust: \(reason)") }
        return Self.json(#"{"error":"Event request failed (\#(reason))"}"#, status: status)
    }

    static func json(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func headers(_ request: Request) -> [String: String] {
        var headers: [String: String] = [:]
        for field in request.headers { headers[field.name.canonicalName] = field.value }
        return headers
    }
}
