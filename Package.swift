// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Spindle",
    products: [
        .library(name: "Spindle", targets: ["Spindle"]),
        .executable(name: "spindle-stress", targets: ["SpindleStress"]),
        .executable(name: "spindle-examples", targets: ["SpindleExamples"]),
        // Integrations (issue 18), each a product of its own, built with the trait of the same name (below).
        .library(name: "SpindleServiceLifecycle", targets: ["SpindleServiceLifecycle"]),
        .library(name: "SpindleMetrics", targets: ["SpindleMetrics"]),
        .library(name: "SpindleLogging", targets: ["SpindleLogging"]),
    ],
    // One trait per integration product, all off by default: a trait's dependency is fetched only by a package that
    // enables it, so one using only `Spindle` fetches nothing (`.ci/check-lean-dependency`). SwiftPM resolves the
    // dependencies of every product of a package dependency, used or not; only a disabled trait keeps one out. With
    // its trait off, an integration module is empty.
    traits: [
        .trait(name: "SpindleServiceLifecycle", description: "SpindleServiceLifecycle (swift-service-lifecycle)"),
        .trait(name: "SpindleMetrics", description: "SpindleMetrics (swift-metrics)"),
        .trait(name: "SpindleLogging", description: "SpindleLogging (swift-log)"),
        .default(enabledTraits: []),
    ],
    dependencies: [
        // Benchmarks only (the library depends on nothing). Explicit traits: the default set pulls a runtime
        // interposer that is not available here.
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        // Benchmarks only: NIOThreadPool is one of the peers we measure against.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // The integration products only (SpindleServiceLifecycle, SpindleMetrics, SpindleLogging).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", exact: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // The only C in the package: thin wrappers over pthreads, eventfd and poll. No policy.
        .target(name: "CShim", path: "CShim", cSettings: [.define("_GNU_SOURCE")]),
        // The library: depends on the toolchain (Swift stdlib, Synchronization) and libc only.
        .target(name: "Spindle", dependencies: ["CShim"], path: "Sources/Spindle"),
        // The stress binary: `swift run -c release spindle-stress` runs the default pass.
        .executableTarget(name: "SpindleStress", dependencies: ["Spindle"], path: "Sources/SpindleStress"),
        // The seeds' examples ported to Spindle: one function per example, writing to an output sink.
        .target(name: "SpindleExamplesKit", dependencies: ["Spindle"], path: "Sources/SpindleExamplesKit"),
        // `swift run spindle-examples [--list | NAME]`.
        .executableTarget(name: "SpindleExamples", dependencies: ["SpindleExamplesKit"], path: "Sources/SpindleExamples"),
        // Test-only: counts malloc calls so tests can assert allocation budgets (off under sanitizers).
        .target(name: "CMallocCounter", path: "Tests/CMallocCounter"),
        .testTarget(name: "SpindleTests", dependencies: ["Spindle", "CShim", "CMallocCounter", "SpindleExamplesKit"],
                    path: "Tests/SpindleTests"),
        // `swift package benchmark` runs these: Spindle and its peers (Foundation, Dispatch, NIO, raw pthreads)
        // side by side in one run.
        .executableTarget(
            name: "SpindleBenchmarks",
            dependencies: ["Spindle", "PacedLoad", .product(name: "Benchmark", package: "benchmark"),
                           .product(name: "NIOPosix", package: "swift-nio")],
            path: "Benchmarks/SpindleBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // The paced-load harness, shared by the suite and `spindle-paced`; and `spindle-paced` itself
        // (`swift run -c release spindle-paced`): issue 17's loads from a thread that belongs to no peer.
        .target(
            name: "PacedLoad",
            dependencies: ["Spindle", .product(name: "NIOPosix", package: "swift-nio")],
            path: "Benchmarks/PacedLoad"
        ),
        .executableTarget(name: "spindle-paced", dependencies: ["PacedLoad"], path: "Benchmarks/SpindlePaced"),
        // Integrations: a queue and a run-loop thread as services of a ServiceGroup; a queue's snapshot as metrics;
        // Spindle's diagnostics events to a Logger. Each depends on Spindle and, with its trait on, one server package
        // (its sources are inside `#if <trait>`); so do their tests: `swift test --traits SpindleServiceLifecycle,
        // SpindleMetrics,SpindleLogging` runs them (`.ci/run` does).
        .target(
            name: "SpindleServiceLifecycle",
            dependencies: ["Spindle", serviceLifecycle("ServiceLifecycle")],
            path: "Sources/SpindleServiceLifecycle"
        ),
        .target(name: "SpindleMetrics", dependencies: ["Spindle", metrics("Metrics")], path: "Sources/SpindleMetrics"),
        .target(name: "SpindleLogging", dependencies: ["Spindle", logging("Logging")], path: "Sources/SpindleLogging"),
        .testTarget(
            name: "SpindleServiceLifecycleTests",
            dependencies: [
                "SpindleServiceLifecycle", serviceLifecycle("ServiceLifecycle"),
                serviceLifecycle("ServiceLifecycleTestKit"), serviceLifecycleLogging("Logging"),
            ],
            path: "Tests/SpindleServiceLifecycleTests"
        ),
        .testTarget(
            name: "SpindleMetricsTests",
            dependencies: ["SpindleMetrics", metrics("MetricsTestKit")],
            path: "Tests/SpindleMetricsTests"
        ),
        .testTarget(
            name: "SpindleLoggingTests",
            dependencies: ["SpindleLogging", logging("Logging")],
            path: "Tests/SpindleLoggingTests"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The integration products' dependencies, each only with its trait on.

/// A product of swift-service-lifecycle, with the `SpindleServiceLifecycle` trait on.
func serviceLifecycle(_ product: String) -> Target.Dependency {
    .product(name: product, package: "swift-service-lifecycle", condition: .when(traits: ["SpindleServiceLifecycle"]))
}

/// swift-log's `Logging`, with the `SpindleServiceLifecycle` trait on (the ServiceGroup tests make a Logger).
func serviceLifecycleLogging(_ product: String) -> Target.Dependency {
    .product(name: product, package: "swift-log", condition: .when(traits: ["SpindleServiceLifecycle"]))
}

/// A product of swift-metrics, with the `SpindleMetrics` trait on.
func metrics(_ product: String) -> Target.Dependency {
    .product(name: product, package: "swift-metrics", condition: .when(traits: ["SpindleMetrics"]))
}

/// A product of swift-log, with the `SpindleLogging` trait on.
func logging(_ product: String) -> Target.Dependency {
    .product(name: product, package: "swift-log", condition: .when(traits: ["SpindleLogging"]))
}
