import Spindle

/// The service's executor: a bounded Spindle queue that refuses work when full (`SpindleFullQueuePolicy.reject`)
/// and a Spindle deadline on every operation.
///
/// `execute` adds a `DeadlineJob` (refused at once by a full queue, `SpindleError.queueFull`, and by a queue shut
/// down, `SpindleError.queueShutDown`), then arms its
/// deadline with `cancel(at:)`, so the deadline counts the time spent waiting in the queue as well as running. A
/// missed deadline answers `.deadlineExpired` from Spindle's deadline thread without waiting for the work to
/// notice; the cancelled operation stops within one chunk of work (or finishes unrun if it had not started) and
/// leaves the queue then.
public final class SpindleWorkExecutor: BlockingWorkExecutor {
    /// The queue the work runs on: width `width`, capacity `capacity`, policy `.reject`.
    public let queue: SpindleOperationQueue
    /// Operations running at once (the queue's width).
    public let width: Int
    /// Operations the queue holds at most, running or waiting (its capacity).
    public let capacity: Int

    /// A queue named `name` with `width` threads holding at most `capacity` operations.
    /// - Throws: `SpindleError` for a width below 1 or a capacity below 1.
    public init(name: String, width: Int, capacity: Int) throws {
        guard width >= 1 else { throw SpindleError.invalidConcurrencyLimit(width) }
        self.queue = try SpindleOperationQueue(
            name: name,
            maxConcurrentOperationCount: width,
            capacity: capacity,
            whenFull: .reject
        )
        self.width = width
        self.capacity = capacity
    }

    /// Runs `work` as an operation of `queue` with a deadline `timeout` from now; see `BlockingWorkExecutor`.
    public func execute<Value: Sendable>(
        timeout: Duration,
        _ work: @escaping @Sendable (WorkCancellation) throws -> Value
    ) async -> WorkOutcome<Value> {
        let deadline = SpindleDeadline.after(timeout)
        let job = DeadlineJob(work)
        do {
            try self.queue.addOperation(job)
        } catch {
            switch error {
            case .queueFull: return .refused(.full)
            case .queueShutDown: return .refused(.shutDown)
            default: return .failed(error)  // nothing else is expected of a new operation on a bounded queue
            }
        }
        job.cancel(at: deadline)
        return await withTaskCancellationHandler {
            await job.latch.wait()
        } onCancel: {
            job.abandon()
        }
    }
}
