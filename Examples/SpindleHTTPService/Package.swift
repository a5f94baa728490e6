// swift-tools-version:6.1
import PackageDescription

// SwiftPM names a path dependency after its directory, so the repository's checkout directory (whatever CI calls it)
// is the package identity of Spindle here: two levels up from this manifest.
let spindlePackage = Context.packageDirectory.split(separator: "/").dropLast(2).last.map(String.init) ?? "spindle"

// An example service built on Spindle (issue 18): its own package so the library's manifest stays lean. Spindle is
// taken by path from this repository; every other dependency is pinned exactly.
let package = Package(
    name: "SpindleHTTPService",
    products: [
        .executable(name: "spindle-http-service", targets: ["SpindleHTTPService"]),
        .executable(name: "spindle-http-bench", targets: ["SpindleHTTPBench"]),
    ],
    dependencies: [
        // Spindle with two of its integration products: SpindleQueueService (the queue as a ServiceGroup service)
        // and SpindleDiagnosticLogger (Spindle's diagnostics to swift-log). Each needs its trait.
        .package(path: "../..", traits: ["SpindleServiceLifecycle", "SpindleLogging"]),
        // No default traits: they pull swift-configuration and full Foundation, which the example does not use.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", exact: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-log.git", exact: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", exact: "1.8.2"),
    ],
    targets: [
        // The service as a library: configuration, the work, the Spindle-backed runner, routes, the lifecycle.
        .target(
            name: "SpindleHTTPServiceKit",
            dependencies: [
                .product(name: "Spindle", package: spindlePackage),
                .product(name: "SpindleServiceLifecycle", package: spindlePackage),
                .product(name: "SpindleLogging", package: spindlePackage),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `swift run spindle-http-service [--port …]`.
        .executableTarget(
            name: "SpindleHTTPService",
            dependencies: [
                "SpindleHTTPServiceKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // `swift run -c release spindle-http-bench`: the same handler on Spindle and on NIOThreadPool, one table.
        .executableTarget(
            name: "SpindleHTTPBench",
            dependencies: [
                "SpindleHTTPServiceKit",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "SpindleHTTPServiceTests",
            dependencies: [
                "SpindleHTTPServiceKit",
                "SpindleHTTPService",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
