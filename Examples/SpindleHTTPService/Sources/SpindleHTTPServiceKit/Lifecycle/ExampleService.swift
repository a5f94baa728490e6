import Hummingbird
import Logging
import ServiceLifecycle
import Spindle
import SpindleServiceLifecycle
import UnixSignals

/// The example service put together: the data file, the Spindle executor, the routes, the Hummingbird
/// application and the service group that runs them and shuts them down in order.
public struct ExampleService: Sendable {
    /// What it was started with.
    public let configuration: ServiceConfiguration
    /// The bounded Spindle queue the work runs on.
    public let executor: SpindleWorkExecutor
    /// The file `/hash` reads.
    public let dataFile: DataFile
    /// How the requests ended.
    public let tally: RequestTally
    /// The service's logger.
    public let logger: Logger

    /// Writes the data file and makes the queue; nothing listens yet.
    /// - Throws: `DataFileError` if the file cannot be written; `SpindleError` for a bad width or capacity.
    public init(configuration: ServiceConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        self.dataFile = try DataFile(
            path: configuration.resolvedDataFilePath,
            size: configuration.dataFileSize,
            removeWhenReleased: configuration.dataFilePath == nil
        )
        self.executor = try SpindleWorkExecutor(
            name: "http-work",
            width: configuration.width,
            capacity: configuration.capacity
        )
        self.tally = RequestTally()
    }

    /// The service group to run: the queue's service (`SpindleQueueService`), then the HTTP application. A group
    /// shuts its services down in reverse order, each after the one behind it returned: on a graceful shutdown
    /// (one of `gracefulShutdownSignals`, or `triggerGracefulShutdown()`) the server stops accepting and answers
    /// every request it has; then the queue is shut down in drain mode (work still there belongs to requests
    /// already answered 504, stopping), cancelled after `drainTimeout`, and awaited until it terminated. `run()`
    /// returns then. `onListening` gets the bound port.
    public func makeServiceGroup(
        gracefulShutdownSignals: [UnixSignal] = [],
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> ServiceGroup {
        let executor = self.executor
        let routes = WorkRoutes(
            executor: executor,
            dataFile: self.dataFile,
            deadline: self.configuration.deadline,
            retryAfterSeconds: self.configuration.retryAfterSeconds,
            tally: self.tally,
            describeExecutor: { executor.queue.snapshot().description }
        )
        let application = HTTPFrontEnd.makeApplication(
            routes: routes,
            host: self.configuration.host,
            port: self.configuration.port,
            logger: self.logger,
            onListening: onListening
        )
        let queueService = SpindleQueueService(queue: executor.queue, drainTimeout: self.configuration.drainTimeout)
        return ServiceGroup(
            configuration: .init(
                // Shut down in reverse order: the application first, then the queue.
                services: [.init(service: queueService), .init(service: application)],
                gracefulShutdownSignals: gracefulShutdownSignals,
                logger: self.logger
            )
        )
    }

    /// Logs what the service did: the request counts and the queue's final snapshot (after the group returned).
    public func logSummary() {
        self.logger.info(
            "shut down",
            metadata: [
                "requests": "\(self.tally.counts)",
                "queue": "\(self.executor.queue.snapshot())",
                "terminated": "\(self.executor.queue.isTerminated)",
            ]
        )
    }
}
