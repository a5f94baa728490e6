// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Spindle",
    products: [
        .library(name: "Spindle", targets: ["Spindle"]),
        .executable(name: "spindle-stress", targets: ["SpindleStress"]),
        .executable(name: "spindle-examples", targets: ["SpindleExamples"]),
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
    ],
    swiftLanguageModes: [.v6]
)
