import Foundation
import GatewayCore
import Hummingbird

extension GatewayHTTP {
    /// `POST /v1/users/forget` and `GET /v1/users/forget/{request_id}`: a backend's key
    /// for the app, as for the events route.
    static func addForgetRoutes(to router: Router<GatewayRequestContext>, gateway: Gateway) {
        let bodies = BodyReader(gateway.configuration.server)
        let keyring = gateway.keyring
        let requests = gateway.forgetRequests
        // Unlike the ingest routes, never open: one request rewrites a user's records and
        // asks every destination to delete them.
        @Sendable func admitBackend(_ headers: HTTPFields) throws -> Set<String> {
            guard let apps = try keyring.admit(headers, scope: .backend) else {
                throw GatewayError(
                    .forbidden,
                    "forget requests need a backend key: add one to auth.api_keys with scope: backend",
                    field: "authorization")
            }
            return apps
        }

        router.post("/v1/users/forget") { request, _ -> Response in
            let allowedApps = try admitBackend(request.headers)
            let body = try await bodies.collect(request)
            let subject = try ForgetRequests.subject(try PayloadFields.parseObject(body))
            guard allowedApps.contains(subject.appID) else { throw APIKeyring.forbidden }
            let status = try await requests.submit(subject)
            return JSONResponse.make(
                status: .accepted,
                jsonObject([
                    ("request_id", .string(status.requestID)), ("status", .string("accepted")),
                    ("records_forgotten", .integer(Int64(status.recordsForgotten))),
                ]))
        }

        router.getAndHead("/v1/users/forget/{request_id}") { request, context -> Response in
            let allowedApps = try admitBackend(request.headers)
            let id = context.parameters.get("request_id") ?? ""
            // Another app's request is answered as one that does not exist.
            guard let status = try await requests.status(id), allowedApps.contains(status.appID) else {
                throw GatewayError(.notFound, "no forget request with this id", field: "request_id")
            }
            return JSONResponse.make(status: .ok, status.json)
        }
    }
}
