/// Async/await on a queue: the async drain wait, `run` (blocking work with its result awaited) and the queue as a
/// `TaskExecutor`.
///
/// The drain wait registers a fresh `SpindleSemaphore` with the queue (`QueueCore.asyncDrainWaitBegan`, only if the
/// queue has members) and awaits it with the semaphore's async wait. The finish path that empties the queue takes
/// them all under the lock and signals each one after unlocking (see `DrainWaiters`). A cancelled wait withdraws
/// its semaphore (`asyncDrainWaitCancelled`).
extension SpindleOperationQueue {
    /// Suspends the calling task until the queue has no operations (including ones added while waiting), as the
    /// blocking form does, without blocking a thread. Cancelling the task ends the wait; it cancels nothing in
    /// the queue. Callable from any task.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before the queue drained (at once if it was already
    ///   cancelled); `SpindleError.waitOnOwnQueue` from the async body of one of this queue's operations (or of
    ///   one inside a group of this queue); `SpindleError.forkedChild` for a queue of a parent process.
    public func waitUntilAllOperationsAreFinished() async throws {
        try Task.checkCancellation()
        if self.isOwnQueueOfCallingTask { throw SpindleError.waitOnOwnQueue(name: self.name) }
        try self.refuseIfInheritedAcrossFork()
        let core = self.core
        let semaphore = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        if !core.asyncDrainWaitBegan(semaphore) { return }
        do {
            try await semaphore.wait()
        } catch {
            core.asyncDrainWaitCancelled(semaphore)
            throw error
        }
    }

    /// Runs `body` as an operation of this queue (on one of its threads, within its width, at `priority`) and
    /// returns what it returns, suspending the calling task meanwhile. The operation counts in the queue like
    /// any other until it has finished; the call returns after that.
    ///
    /// Cancellation: cancelling the awaiting task cancels the operation and the call throws `CancellationError`.
    /// If `body` has not started, the call throws at once and `body` will never run (the cancelled operation
    /// leaves the queue when the queue reaches it). If `body` is running, it is told through its operation
    /// (`SpindleOperation.current?.isCancelled`) and the call waits for it to return, so no work of this call
    /// runs after it has thrown. The same holds when the operation is cancelled by other means
    /// (`cancelAllOperations()`).
    ///
    /// A bounded queue that is full follows its policy, as `addOperation` does: `.block` blocks the awaiting
    /// task's thread until there is room, and `.callerRuns` runs `body` on that thread, not on the queue's.
    ///
    /// - Throws: `SpindleError.waitOnOwnQueue` from the async body of one of this queue's operations (or of one
    ///   inside a group of this queue) when the queue's width is 1: it holds the slot `body` would wait for;
    ///   `SpindleError.queueShutDown` from a shut-down queue, `SpindleError.queueFull` from a full queue
    ///   whose policy refuses, `SpindleError.forkedChild` from a queue of a parent process (`body` never runs
    ///   then); the error `body` threw; `CancellationError` as described above (it takes precedence over the
    ///   body's value or error once the operation was cancelled).
    public func run<Result: Sendable>(priority: SpindleOperation.QueuePriority = .normal,
                                      _ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        // From this queue's own async operation (or a group of it) on a queue of width 1, the slot `body` needs is
        // the caller's: the wait could never end. (A wider queue may still fill up with such callers; as with any
        // wait for one's own queue, that is the caller's to avoid.)
        if self.maxConcurrentOperationCount == 1 && self.isOwnQueueOfCallingTask {
            throw SpindleError.waitOnOwnQueue(name: self.name)
        }
        let op = AsyncRunOperation<Result>(body)
        op.queuePriority = priority
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Result, any Error>) in
                if op.install(continuation) {
                    // A new, private operation: refused only by a full queue whose policy refuses, or by a queue of
                    // a parent process in a forked child.
                    do { try self.addOperation(op) } catch { op.notAdded(error) }
                }
            }
        } onCancel: {
            op.awaitingTaskCancelled()
        }
    }

    /// An executor (SE-0417) that runs tasks' jobs as operations of this queue, on its threads and within its
    /// width: `withTaskExecutorPreference(queue.taskExecutor) { … }`. Each access makes a small new object that
    /// keeps the queue alive; any of them is equivalent. Callable from any thread.
    public var taskExecutor: SpindleTaskExecutor { SpindleTaskExecutor(queue: self) }
}
