import Synchronization

/// A `TaskExecutor` (SE-0417) backed by a `SpindleOperationQueue`: every job a task hands it runs as one
/// operation of that queue, on one of the queue's threads, within its width and suspension (unless the queue
/// refuses or cannot take it: see `enqueue`). Use it with
/// `withTaskExecutorPreference(queue.taskExecutor) { … }` or `Task(executorPreference:)`: nonisolated async code
/// and child tasks then run on Spindle's threads (`SpindleOperationQueue.current` is the queue there).
///
/// A job runs until its task next suspends, so a task occupies a thread and a slot only while it has work; a
/// suspended task holds neither. Job priority maps onto queue priority (high → `.high`, medium → `.normal`, low
/// and utility → `.low`, background → `.veryLow`). Jobs are counted in `operationCount` while they wait or run.
/// A job runs even if its operation is cancelled (`cancelAllOperations`, a cancelling shutdown): its task is
/// waiting for it. Task cancellation is the task's own, as usual.
///
/// Guards: none needed; `queue` is immutable and the queue is thread-safe. Keeps the queue alive.
/// Threading: `enqueue` from any thread (the concurrency runtime calls it).
public final class SpindleTaskExecutor: TaskExecutor, @unchecked Sendable {
    /// The queue that runs the jobs.
    public let queue: SpindleOperationQueue

    /// An executor for `queue` (the same as `queue.taskExecutor`).
    public init(queue: SpindleOperationQueue) { self.queue = queue }

    /// Runs `job` as an operation of the queue. Called by the concurrency runtime; any thread. This call never
    /// waits: a bounded queue takes the job even when full, past its capacity (the job counts from then on; its
    /// width still applies), whatever its `fullQueuePolicy`, because the caller may be any thread (a `Task`
    /// initialiser, a `signal()` resuming a task, the deadline thread cancelling one) and must not block on the
    /// queue's room. Bound the work with the adds (`addOperationWhenRoom`), not with the jobs. A job the queue
    /// refuses still runs, rather than never: one refused by a shut-down queue goes to the global concurrent
    /// executor (never run inside this call, in the middle of the caller's work); in a forked child, where that
    /// executor's threads are gone, a queue of the parent process runs it here, on the calling thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let priority = ExecutorJobOperation.queuePriority(for: job.priority)
        let unowned = UnownedJob(job)
        let op = ExecutorJobOperation(job: unowned, executor: self)
        if priority != .normal { op.queuePriority = priority }
        // A new operation: refused only by a shut-down queue, or a queue of a parent process in a forked child. A
        // refused operation never starts, so the job is still ours to place.
        do {
            try self.queue.addPastCapacity(op)
        } catch SpindleError.forkedChild {
            try? op.start()
        } catch {
            globalConcurrentExecutor.enqueue(ExecutorJob(unowned))
        }
    }
}

/// One job of a task, run as an operation by `SpindleTaskExecutor`. The job runs exactly once, also when its
/// operation was cancelled (`cancelAllOperations`, a cancelling shutdown, a deadline): its task waits for it, and a
/// job never run is a task suspended for ever. A cancelled one runs in `start()`, on the thread finishing the
/// operation, before the operation finishes (so within the queue's width, like any other).
///
/// Guards: `job` and `executor` are immutable after `init`; `ran` (atomic) makes the job run once. States: job
/// waiting → job run (by `main`, or by `start()` for a cancelled operation; once).
final class ExecutorJobOperation: SpindleOperation, @unchecked Sendable {
    private let job: UnownedJob
    private let executor: SpindleTaskExecutor
    private let ran = Atomic<Bool>(false)

    init(job: UnownedJob, executor: SpindleTaskExecutor) {
        self.job = job
        self.executor = executor
        super.init()
    }

    override func start() throws {
        switch try self.claimExecution() {
        case .claimed:
            self.runMainOnThisThread()
            self.completeExecution(error: nil)
        case .cancelled:
            self.runJob()  // cancelled before it ran: the job still must
            self.completeExecution(error: nil)
        case .finished:
            return
        }
    }

    override func main() throws { self.runJob() }

    private func runJob() {
        guard !self.ran.exchange(true, ordering: .acquiringAndReleasing) else { return }
        self.job.runSynchronously(on: self.executor.asUnownedTaskExecutor())
    }

    static func queuePriority(for priority: JobPriority) -> SpindleOperation.QueuePriority {
        switch priority.rawValue {
        case 25...: return .high
        case 21..<25: return .normal
        case 10..<21: return .low
        case 1..<10: return .veryLow
        default: return .normal  // unspecified
        }
    }
}
