#if SpindleServiceLifecycle  // the trait of the same name (Package.swift)
import ServiceLifecycle
import Spindle

/// A `SpindleOperationQueue` as a `Service` of a swift-service-lifecycle `ServiceGroup`: the group's graceful
/// shutdown (SIGTERM, say) drains the queue, and the service returns once the queue has terminated.
///
/// ```swift
/// let queue = try SpindleOperationQueue(name: "blocking-io", maxConcurrentOperationCount: 8)
/// let group = ServiceGroup(
///     services: [SpindleQueueService(queue: queue, drainTimeout: .seconds(10)), httpServer],
///     gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// What `run()` does:
/// - Until graceful shutdown, it waits (the queue runs as usual; the service adds nothing to it).
/// - On graceful shutdown it calls `queue.shutdown(.drain)`: the queue refuses new work and runs what it accepted.
///   With a `drainTimeout`, if the queue has not terminated that long after, it escalates to
///   `queue.shutdown(.cancel)` (what is left finishes cancelled; running operations see `isCancelled`). Then it
///   returns once the queue has terminated (its threads joined).
/// - If the queue terminates first (someone else shut it down), it returns then.
/// - If its task is cancelled (the group is cancelled, or its `maximumGracefulShutdownDuration` passed), it calls
///   `queue.shutdown(.cancel)` and throws `CancellationError` at once, without waiting for the operations still
///   running (they finish when they return; the queue then terminates on its own).
///
/// A group shuts its services down in reverse order, each after the one behind it has returned: list the queue's
/// service before the services that add to the queue, so that they have stopped adding when the queue drains (adds
/// after the shutdown are refused with `SpindleError.queueShutDown`).
public struct SpindleQueueService: Service, CustomStringConvertible {
    /// The queue this service shuts down.
    public let queue: SpindleOperationQueue
    /// How long a graceful shutdown lets the queue drain before it cancels what is left; nil: no limit (the
    /// group's own `maximumGracefulShutdownDuration`, if set, still cancels the service).
    public let drainTimeout: Duration?

    /// A service for `queue`, escalating from drain to cancel after `drainTimeout` (nil: never).
    /// - Precondition: `drainTimeout`, if given, is not negative.
    public init(queue: SpindleOperationQueue, drainTimeout: Duration? = nil) {
        if let drainTimeout {
            precondition(drainTimeout >= .zero, "SpindleQueueService: a negative drain timeout (\(drainTimeout))")
        }
        self.queue = queue
        self.drainTimeout = drainTimeout
    }

    /// Waits for graceful shutdown, then drains the queue (and cancels what is left after `drainTimeout`) and
    /// returns once it has terminated; see the type's notes.
    /// - Throws: `CancellationError` when the task is cancelled (the queue is then shut down with `.cancel`);
    ///   `SpindleError.waitOnOwnQueue` when run from one of the queue's own operations.
    public func run() async throws {
        let queue = self.queue
        let drainTimeout = self.drainTimeout
        try await withTaskCancellationHandler {
            try await withThrowingTaskGroup(of: Outcome.self) { group in
                group.addTask {
                    try await queue.awaitTermination()
                    return .terminated
                }
                group.addTask {
                    try await gracefulShutdown()
                    queue.shutdown(.drain)
                    if let drainTimeout, try await !queue.awaitTermination(timeout: drainTimeout) {
                        queue.shutdown(.cancel)
                    }
                    return .shutdownRequested
                }
                while let outcome = try await group.next() {
                    if outcome == .terminated {
                        group.cancelAll()  // the graceful-shutdown waiter, if it is still waiting
                        return
                    }
                }
            }
        } onCancel: {
            queue.shutdown(.cancel)
        }
        // Cancelled: say so, even when the queue, shut down by the cancellation, terminated before the wait noticed.
        try Task.checkCancellation()
    }

    /// What one of `run()`'s two child tasks saw.
    private enum Outcome: Sendable {
        /// The queue terminated.
        case terminated
        /// Graceful shutdown came, and the queue was shut down (drained, and cancelled after the drain timeout).
        case shutdownRequested
    }

    /// The queue's name and the drain timeout, as the group's logs show the service.
    public var description: String {
        let timeout = self.drainTimeout.map { ", drain timeout \($0)" } ?? ""
        return "SpindleQueueService('\(self.queue.name)'\(timeout))"
    }
}
#endif
