/// What Spindle knows about the calling thread: the operation whose `main` runs here and the queue whose worker
/// this is. Confined to its thread (one per thread, in a thread-local), so it needs no lock.
final class ThreadContext {
    /// The operation running `main` on this thread (a strong reference only while it runs).
    var operation: SpindleOperation?
    /// The operation whose completion block is running on this thread.
    unowned(unsafe) var completing: SpindleOperation?
    /// The queue that owned `completing` (its members still count it until the completion block returns, so
    /// waiting for that queue from the block can never end: `waitUntilAllOperationsAreFinished` throws).
    unowned(unsafe) var completingQueue: SpindleOperationQueue?
    /// The queue whose worker is this thread, while it runs one of that queue's operations.
    unowned(unsafe) var queue: SpindleOperationQueue?
    /// Whether this thread is a worker of some queue (for shutdown: a worker never joins itself).
    unowned(unsafe) var workerOf: QueueCore?

    private static let slot = SpindleThreadLocal<ThreadContext>(initial: { ThreadContext() })

    /// The calling thread's context.
    static var current: ThreadContext { slot.value }
}
