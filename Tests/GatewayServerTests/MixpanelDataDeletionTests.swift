import Foundation
import GatewayCore
import GatewaySinks
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

/// A forget request at the Mixpanel sink with a GDPR token: the profile goes through
/// `/engage`, the events through Mixpanel's data-deletion API, whose task is read until
/// Mixpanel says it succeeded. The fake checks requests as Mixpanel's API documents them.
@Suite struct MixpanelDataDeletionTests {
    static let gdprToken = "mixpanel-gdpr-oauth-token-01"

    final class FakeGDPR: Sendable {
        /// The distinct ids of each deletion asked for.
        let asked = Mutex<[[String]]>([])
        let looks = Mutex(0)
        /// The statuses the task reports, one per look; SUCCESS once they run out.
        let statuses = Mutex(["PENDING", "STARTED"])
        let refusals = Mutex<[String]>([])

        func router() -> Router<BasicRequestContext> {
            let router = Router()
            router.post("/api/app/data-deletions/v3.0/") { request, _ -> Response in
                let body = Data(try await request.body.collect(upTo: 1 << 20).readableBytesView)
                guard self.authorized(request),
                    let fields = try JSONSerialization.jsonObject(with: body) as? [String: Any],
                    let ids = fields["distinct_ids"] as? [String], !ids.isEmpty, ids.count < 2000,
                    ["GDPR", "CCPA"].contains(fields["compliance_type"] as? String ?? "GDPR")
                else { return self.refuse("create") }
                self.asked.withLock { $0.append(ids) }
                return Response(
                    status: .created,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"status":"ok","results":{"task_id":"task-42"}}"#)))
            }
            router.get("/api/app/data-deletions/v3.0/:task") { request, context -> Response in
                guard self.authorized(request), context.parameters.get("task") == "task-42" else {
                    return self.refuse("status")
                }
                self.looks.withLock { $0 += 1 }
                let status = self.statuses.withLock { $0.isEmpty ? "SUCCESS" : $0.removeFirst() }
                return Response(
                    status: .ok,
                    body: .init(byteBuffer: ByteBuffer(string: #"{"status":"ok","results":{"status":"\#(status)"}}"#)))
            }
            return router
        }

        func authorized(_ request: Request) -> Bool {
            request.headers[.authorization] == "Bearer \(MixpanelDataDeletionTests.gdprToken)"
                && request.uri.queryParameters["token"].map(String.init) == MixpanelSinkTests.token
        }

        func refuse(_ what: String) -> Response {
            refusals.withLock { $0.append(what) }
            return Response(status: .badRequest)
        }
    }

    @Test func theProfileAndTheEventsAreDeletedAndTheTaskIsReadUntilItSucceeds() async throws {
        let mixpanel = MixpanelSinkTests.FakeMixpanel()
        let gdpr = FakeGDPR()
        let local = ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0))
        try await Application(router: mixpanel.router(), configuration: local).test(.live) { engage in
            try await Application(router: gdpr.router(), configuration: local).test(.live) { api in
                var options = MixpanelSink.Options(
                    token: MixpanelSinkTests.token, endpoint: "http://127.0.0.1:\(try #require(engage.port))")
                options.gdprToken = Self.gdprToken
                options.gdprEndpoint = "http://127.0.0.1:\(try #require(api.port))"
                let sink = MixpanelSink(options: options)
                var identifiers = ForgottenIdentifiers()
                identifiers.appUserIDs = ["user-9", "anon"]
                var request = ForgetRequest(
                    requestID: "req-9", appID: "1", requestedAt: Date(), identifiers: identifiers)

                let first = try await sink.forget(request)
                guard case .inProgress(let note, _) = first else {
                    Issue.record("expected a deletion in progress, got \(first)")
                    return
                }
                #expect(gdpr.asked.withLock { $0 } == [["user-9"]])
                let deletions = try mixpanel.bodies.withLock { bodies in
                    try bodies.flatMap { try JSONSerialization.jsonObject(with: $0) as? [[String: Any]] ?? [] }
                }
                #expect(deletions.map { $0["$distinct_id"] as? String } == ["user-9"])
                // Each later attempt reads the task, never asks again.
                request.progress = note
                var outcome = try await sink.forget(request)
                while case .inProgress = outcome { outcome = try await sink.forget(request) }
                #expect(outcome == .done)
                #expect(gdpr.looks.withLock { $0 } == 3)
                #expect(gdpr.asked.withLock { $0.count } == 1)
                #expect(gdpr.refusals.withLock { $0 }.isEmpty)
            }
        }
    }
}
