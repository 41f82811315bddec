/// The HTTP contract, served at `GET /openapi.yaml`: `openapi.yaml` beside this file,
/// embedded in the executable at build time so that the binary alone serves it. The
/// contract test (`scripts/contract-test`) checks the running server against it.
enum OpenAPIDocument {
    static let yaml = String(decoding: PackageResources.openapi_yaml, as: UTF8.self)
}
