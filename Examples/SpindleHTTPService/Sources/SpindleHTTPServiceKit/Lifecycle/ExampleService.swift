import Hummingbird
import Logging
import ServiceLifecycle
import Spindle
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

    /// The service group to run: the queue's shutdown service, then the HTTP application. `run()` returns after
    /// a graceful shutdown (one of `gracefulShutdownSignals`, or `triggerGracefulShutdown()`) once the server
    /// answered what it had accepted and the queue terminated. `onListening` gets the bound port.
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
        let tally = self.tally
        let logger = self.logger
        let queueShutdown = QueueShutdownService(
            queue: executor.queue,
            drainTimeout: self.configuration.drainTimeout,
            logger: self.logger,
            onTerminated: { logger.info("shut down", metadata: ["requests": "\(tally.counts)"]) }
        )
        return ServiceGroup(
            configuration: .init(
                // Shut down in reverse order: the application first, then the queue.
                services: [.init(service: queueShutdown), .init(service: application)],
                gracefulShutdownSignals: gracefulShutdownSignals,
                logger: self.logger
            )
        )
    }
}
