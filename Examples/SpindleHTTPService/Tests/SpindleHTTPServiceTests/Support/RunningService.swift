import Glibc
import Logging
import ServiceLifecycle
import SpindleHTTPServiceKit
import Synchronization

/// An `ExampleService` running in this process on 127.0.0.1 and a free port, with its own data file.
final class RunningService: Sendable {
    let service: ExampleService
    let group: ServiceGroup
    let port: Int
    private let run: Task<Void, any Error>

    /// Starts a service with `configure` applied to a test configuration (port 0, a data file of 16 MiB named
    /// after `name`); returns once it listens.
    static func start(_ name: String, _ configure: (inout ServiceConfiguration) -> Void) async throws -> RunningService {
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.dataFilePath = "/tmp/spindle-http-service-test-\(getpid())-\(name).data"
        configuration.dataFileSize = 16 << 20
        configure(&configuration)
        var logger = Logger(label: "spindle-http-service-test.\(name)")
        logger.logLevel = .warning
        let service = try ExampleService(configuration: configuration, logger: logger)
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let group = service.makeServiceGroup { port in portSink.yield(port) }
        let run = Task {
            defer { portSink.finish() }  // a group that fails to start ends the stream: no hang below
            try await group.run()
        }
        guard let port = await ports.first(where: { _ in true }) else {
            try await run.value  // rethrows why it did not start
            throw TestFailure("the service returned without listening")
        }
        return RunningService(service: service, group: group, port: port, run: run)
    }

    private init(service: ExampleService, group: ServiceGroup, port: Int, run: Task<Void, any Error>) {
        self.service = service
        self.group = group
        self.port = port
        self.run = run
    }

    /// Asks for a graceful shutdown (what SIGTERM does) and returns at once.
    func triggerShutdown() async {
        await self.group.triggerGracefulShutdown()
    }

    /// Waits until the service group has returned (after `triggerShutdown`), rethrowing its error.
    func waitUntilStopped() async throws {
        try await self.run.value
    }

    /// Shuts down, waits, and removes the data file.
    func stop() async throws {
        await self.triggerShutdown()
        try await self.waitUntilStopped()
        unlink(self.service.dataFile.path)
    }
}

/// A failed expectation that must end the test.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with `TestFailure` if it has not returned after `limit`: a watchdog so that a broken
/// service fails the test instead of hanging it (the sleep only bounds the wait; it synchronises nothing).
func withWatchdog<T: Sendable>(_ limit: Duration, _ what: String,
                               _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TestFailure("\(what): not done after \(limit)")
        }
        return value
    }
}
