import Foundation
import GatewayConfig
import GatewayCore
import GatewayServer
import Hummingbird
import HummingbirdTesting
import Testing

/// `GET /openapi.yaml` serves the contract, and the contract names every route a fully
/// configured gateway answers, so a new route cannot ship undocumented. That the answers
/// match it is `scripts/contract-test`'s job (schemathesis against the running server).
@Suite struct OpenAPIDocumentTests {
    @Test func theServedContractDocumentsEveryRoute() async throws {
        let env = try TestEnvironment()
        defer { env.remove() }
        let model = FileManager.default.currentDirectoryPath + "/conversion-model.yaml"
        let yaml = """
            server: { host: 127.0.0.1, port: 0, log_level: warning }
            storage: { sqlite: { path: \(env.databasePath), durability: normal } }
            providers:
              iad: {}
              adservices: { sdk: { app_id: "1234567890" } }
              skadnetwork: { conversion_model: \(model) }
              s2s:
                vendors:
                  appsflyer: { callback_secret: contract-secret-000001 }
            sinks:
              local: { type: sqlite }
            """
        let config = try ConfigLoader.parse(yaml: yaml, file: "openapi.yaml", environment: [:], registry: .builtIn)
        let gateway = try await Gateway.build(configuration: config)
        try await GatewayHTTP.makeApplication(gateway: gateway).test(.live) { client in
            let response = try await client.execute(uri: "/openapi.yaml", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/yaml")
            let document = String(buffer: response.body)
            #expect(document.hasPrefix("openapi: 3.1.0"))
            let documented = Set(
                document.split(separator: "\n").filter { $0.hasPrefix("  /") && $0.hasSuffix(":") }
                    .map { String($0.dropFirst(2).dropLast()) })

            var served = ["/healthz", "/readyz", "/metrics", "/openapi.yaml", "/v1/skadnetwork/conversion-value"]
            served += ["create-user", "resolve-asa-attribution", "associate-user"].map { "/functions/v1/\($0)" }
            for route in gateway.providers.flatMap(\.routes) {
                // Vendor callback paths are one templated path in the contract.
                let path = route.path.replacingOccurrences(
                    of: #"^/v1/s2s/[a-z]+/callbacks$"#, with: "/v1/s2s/{vendor}/callbacks", options: .regularExpression)
                served.append(path)
            }
            #expect(served.count > 12)
            let undocumented = Set(served).subtracting(documented)
            #expect(undocumented.isEmpty, "routes missing from openapi.yaml: \(undocumented.sorted())")
            // Served routes must exist (the conversion-value route needs the model).
            for path in ["/v1/skadnetwork/conversion-value?n=x", "/metrics"] {
                #expect(try await client.execute(uri: path, method: .get).status != .notFound, "\(path)")
            }
        }
    }
}
