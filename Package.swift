// swift-tools-version:6.1
import PackageDescription

/// Operators' own sinks: one target each under Plugins/NAME, tested in Tests/NAMETests,
/// registered in Sources/GatewayServer/Assembly/BuiltInPlugins.swift.
/// `swift package --allow-writing-to-package-directory new-sink --name Slack` adds one.
let operatorSinks = ["CSVSink"]

let package = Package(
    name: "attribution-gateway",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "attribution-gateway", targets: ["AttributionGatewayCLI"]),
        .library(name: "GatewayCore", targets: ["GatewayCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // Hummingbird's own HTTP part types, for the request read deadline.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // The model and the extension points. Depends on nothing heavy so that plugins can.
        .target(
            name: "GatewayCore",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // config.yaml: YAML → checked, typed configuration.
        .target(
            name: "GatewayConfig",
            dependencies: [
                "GatewayCore", .product(name: "Yams", package: "Yams"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The durable store (records, dedupe keys, outboxes, dead letters) on SQLite.
        .target(
            name: "GatewayStorage",
            dependencies: [
                "GatewayCore", "GatewayCompactRaw", .product(name: "GRDB", package: "GRDB.swift"),
                // SHA-256, for the upgrade that rekeys S2S events as the provider keys them.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The system zlib, for raw payloads kept compressed in the stores.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", providers: [.apt(["zlib1g-dev"])]),
        // How both stores keep a record's raw payload: apart from its body, compressed.
        .target(name: "GatewayCompactRaw", dependencies: ["GatewayCore", "CZlib"]),
        // The store on PostgreSQL, for several replicas sharing one database.
        .target(
            name: "GatewayPostgres",
            dependencies: [
                "GatewayCore", "GatewayCompactRaw", .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The HTTP client of every outbound call (sinks, Apple, vendors): no redirects.
        .target(
            name: "GatewayHTTP",
            dependencies: [.product(name: "AsyncHTTPClient", package: "async-http-client")]
        ),
        // Child processes (the exec sink's plugins) started by posix_spawn, not Foundation's
        // Process, which crashes now and then on Linux (swift-corelibs-foundation#5472).
        .target(name: "CSpawn"),
        .target(name: "GatewaySpawn", dependencies: ["CSpawn"]),
        // Built-in providers: one folder per signal kind.
        // The system OpenSSL (libssl-dev), only for SKAN 1.0/2.0's P-192, which swift-crypto lacks.
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .target(
            name: "GatewayProviders",
            dependencies: [
                "GatewayCore", "COpenSSL", "GatewayHTTP",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Enrichers: keyword names from Apple's advertising APIs.
        .target(
            name: "GatewayEnrichers",
            dependencies: [
                "GatewayCore", "GatewayStorage", "GatewayPostgres", "GatewayHTTP",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Built-in sinks: one folder per destination.
        .target(
            name: "GatewaySinks",
            dependencies: [
                "GatewayCore", "GatewayStorage", "GatewayPostgres", "GatewayHTTP", "GatewaySpawn",
                // The S2S vendors' wire formats (adapters), which their sink sends.
                "GatewayProviders",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // Scaffolds an operator's sink: swift package --allow-writing-to-package-directory new-sink --name Slack
        .plugin(
            name: "NewSinkCommand",
            capability: .command(
                intent: .custom(verb: "new-sink", description: "Adds a sink target under Plugins/ with its tests"),
                permissions: [
                    .writeToPackageDirectory(
                        reason: "creates Plugins/NAMESink and Tests/NAMESinkTests and registers them")
                ]),
            path: "Plugins/NewSinkCommand"
        ),
        // Assembly (config → running gateway) and the HTTP surface.
        .target(
            name: "GatewayServer",
            dependencies: [
                "GatewayCore", "GatewayConfig", "GatewayStorage", "GatewayPostgres", "GatewayProviders", "GatewaySinks",
                "GatewayEnrichers",
                // HMAC, for the dashboard's session cookie.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ] + operatorSinks.map { .target(name: $0) },
            // The HTTP contract, a file of its own in the repository and part of the binary.
            resources: [.embedInCode("HTTP/openapi.yaml")]
        ),
        .executableTarget(
            name: "AttributionGatewayCLI",
            dependencies: [
                "GatewayServer", "GatewayProviders", "GatewayEnrichers",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Signed postbacks for Benchmarks/run (wrk cannot sign them itself).
        .executableTarget(
            name: "PostbackMaker",
            dependencies: ["GatewayProviders", .product(name: "Crypto", package: "swift-crypto")],
            path: "Benchmarks/PostbackMaker"
        ),
        // Per-stage CPU of an ingest, for reading Benchmarks/run's CPU per request.
        .executableTarget(
            name: "StageTimer",
            dependencies: [
                "GatewayProviders", "GatewayStorage", "GatewaySinks", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Benchmarks/StageTimer"
        ),
        .testTarget(name: "GatewayCoreTests", dependencies: ["GatewayCore"]),
        // What several test targets share: the test PostgreSQL server, a database per test.
        .target(
            name: "GatewayTestSupport",
            dependencies: [
                "GatewayCore", "GatewayPostgres", .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Tests/GatewayTestSupport"
        ),
        .testTarget(name: "GatewaySpawnTests", dependencies: ["GatewaySpawn"]),
        .testTarget(name: "GatewayConfigTests", dependencies: ["GatewayConfig", "GatewayServer"]),
        .testTarget(
            name: "GatewayProvidersTests",
            dependencies: [
                "GatewayProviders", "GatewaySinks", "COpenSSL", .product(name: "Crypto", package: "swift-crypto"),
            ],
            // Outside data the tests read by path (../shared/testdata/skan/public_vectors.json).
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "GatewayStorageTests",
            dependencies: [
                "GatewayStorage", "GatewayPostgres", "GatewaySinks", "GatewayTestSupport", "GatewayCompactRaw",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "GatewayServerTests",
            dependencies: [
                "GatewayServer", "GatewayEnrichers", "GatewaySpawn", "GatewayTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            // Plugins the tests run as separate programs, read by path.
            exclude: ["Fixtures"]
        ),
    ]
        + operatorSinks.map { .target(name: $0, dependencies: ["GatewayCore"], path: "Plugins/\($0)") }
        + operatorSinks.map { .testTarget(name: "\($0)Tests", dependencies: [.target(name: $0)]) },
    swiftLanguageModes: [.v6]
)
