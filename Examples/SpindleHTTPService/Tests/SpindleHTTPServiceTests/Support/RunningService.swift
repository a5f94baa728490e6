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
    static func start(_ name: String, _ configure: (inout ServiceConfiguration) -> Void) async throws -> RunningService
    {
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

/// Starts a service (see `RunningService.start`) and a client for it with `connections` connections, runs `body`
/// with both, then stops both, also when `body` throws (async-http-client traps on a client released without
/// its shutdown). A service that does not stop within its watchdog is left behind.
func withRunningService<T: Sendable>(
    _ name: String,
    connections: Int,
    configure: (inout ServiceConfiguration) -> Void,
    _ body: (RunningService, HTTPProbe) async throws -> T
) async throws -> T {
    let running = try await RunningService.start(name, configure)
    let probe = HTTPProbe(port: running.port, connections: connections)
    let value: T
    do {
        value = try await body(running, probe)
    } catch {
        try? await probe.shutdown()
        try? await withWatchdog(.seconds(10), "the failed test's service to stop") { try await running.stop() }
        throw error
    }
    try await probe.shutdown()
    try await withWatchdog(.seconds(60), "the service to stop") { try await running.stop() }
    return value
}

/// A failed expectation that must end the test.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body`, failing with `TestFailure` if it has not returned after `limit`: a watchdog so that a broken
/// service fails the test instead of hanging it (the sleep only bounds the wait; it synchronises nothing). On
/// time-out `body` is cancelled and left behind: the test does not wait for a body that may never return.
func withWatchdog<T: Sendable>(
    _ limit: Duration,
    _ what: String,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let first = FirstResult<T>()
    let work = Task {
        do { first.offer(.success(try await body())) } catch { first.offer(.failure(error)) }
    }
    let timer = Task {
        try? await Task.sleep(for: limit)
        first.offer(.failure(TestFailure("\(what): not done after \(limit)")))
    }
    let result = await first.value
    timer.cancel()
    work.cancel()
    return try result.get()
}

/// The first of several results offered from any task; `value` waits for it.
final class FirstResult<T: Sendable>: Sendable {
    private struct State {
        var result: Result<T, any Error>? = nil
        var waiter: CheckedContinuation<Result<T, any Error>, Never>? = nil
    }

    private let state = Mutex(State())

    /// Keeps `result` if it is the first; wakes the waiter.
    func offer(_ result: Result<T, any Error>) {
        let waiter = self.state.withLock { state -> CheckedContinuation<Result<T, any Error>, Never>? in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    /// The first result offered, once there is one. One caller.
    var value: Result<T, any Error> {
        get async {
            await withCheckedContinuation { continuation in
                let ready = self.state.withLock { state -> Result<T, any Error>? in
                    if let result = state.result { return result }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
