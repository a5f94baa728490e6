import Logging
import ServiceLifecycle
import Spindle

/// Shuts a Spindle queue down when its service group shuts down: listed before the HTTP application in the
/// group, it is told to shut down only once the application has returned (a group shuts its services down in
/// reverse order), that is once the server stopped accepting and answered every request it had.
///
/// Then it shuts the queue down in drain mode (new work refused, everything admitted runs), waits up to
/// `drainTimeout` for the queue to terminate, and escalates to cancel mode if it has not. Work still in the queue
/// by then belongs to requests already answered 504 (cancelled, stopping) or to work that outlived its request.
/// If the group is cancelled instead, it shuts the queue down in cancel mode at once.
public struct QueueShutdownService: Service {
    /// The queue to shut down.
    public let queue: SpindleOperationQueue
    /// How long the drain may take before the rest is cancelled.
    public let drainTimeout: Duration
    /// Where it reports.
    public let logger: Logger
    /// Called once the queue terminated, before `run` returns (the service logs its summary there).
    public let onTerminated: @Sendable () -> Void

    /// A service that shuts `queue` down when the group does.
    public init(
        queue: SpindleOperationQueue,
        drainTimeout: Duration,
        logger: Logger,
        onTerminated: @escaping @Sendable () -> Void = {}
    ) {
        self.queue = queue
        self.drainTimeout = drainTimeout
        self.logger = logger
        self.onTerminated = onTerminated
    }

    /// Waits for the group's graceful shutdown (or cancellation), then shuts the queue down and waits for it to
    /// terminate (its threads joined).
    public func run() async throws {
        do {
            try await gracefulShutdown()
            self.logger.info("draining the work queue", metadata: ["queue": "\(self.queue.snapshot())"])
            self.queue.shutdown(.drain)
            if try await !self.queue.awaitTermination(timeout: self.drainTimeout) {
                self.logger.warning(
                    "the work queue did not drain in time: cancelling the rest",
                    metadata: ["queue": "\(self.queue.snapshot())"]
                )
                self.queue.shutdown(.cancel)
                try await self.queue.awaitTermination()
            }
        } catch is CancellationError {
            // The group was cancelled (or this wait was): cancel the work and still wait for the threads, in a task
            // the cancellation does not reach, for a bounded time.
            self.logger.info("cancelled: cancelling the work queue")
            self.queue.shutdown(.cancel)
            let queue = self.queue
            let terminated = try await Task.detached { try await queue.awaitTermination(timeout: .seconds(5)) }.value
            if !terminated { self.logger.warning("the work queue did not terminate within 5 s of its cancellation") }
        }
        self.logger.info("work queue terminated", metadata: ["queue": "\(self.queue.snapshot())"])
        self.onTerminated()
    }
}
