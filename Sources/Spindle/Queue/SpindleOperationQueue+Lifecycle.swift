/// How `SpindleOperationQueue.shutdown(_:)` treats the work the queue already accepted.
public enum SpindleShutdownMode: Sendable, Hashable {
    /// Run everything already accepted, then stop (Java's `shutdown`, NIO's graceful shutdown).
    case drain
    /// Cancel everything already accepted: operations not yet started finish cancelled without running `main`
    /// (their completion blocks run); running ones are told (`isCancelled`) and finish when they return (Java's
    /// `shutdownNow`, without handing the work back: nothing accepted is dropped).
    case cancel
}

/// A queue's explicit end, for a service that must stop accepting, finish or cancel what it holds, and join its
/// threads within a deadline (Java's `ExecutorService`, `NIOThreadPool.shutdownGracefully`).
///
/// - `shutdown(.drain)` or `shutdown(.cancel)` returns at once. From then on every add is refused: the throwing adds
///   throw `SpindleError.queueShutDown` and leave the operation untouched (it can be run elsewhere);
///   `addOperation { }` and `addBarrierBlock` hand back their new operation finished as cancelled; blocked
///   producers (`fullQueuePolicy` `.block`, timed and async adds) are refused with `queueShutDown`, their operations
///   untouched. An add racing the call is either accepted (and treated as below) or refused: never lost.
/// - Nothing accepted is lost: with `.drain` it runs; with `.cancel` it finishes cancelled, completion block run.
///   A suspended queue is resumed by the shutdown, and cannot be suspended again. A width of 0 still starts
///   nothing: a queue shut down at width 0 terminates once its width is raised.
/// - Calling `shutdown` again is a no-op, except that `.cancel` after `.drain` cancels what is still there.
/// - The queue terminates when every accepted operation is through and every worker has left its loop; the first
///   termination wait to see it joins the threads (or the queue's release does; a wait that returns while another
///   is joining them knows only that they have left their loops). `awaitTermination` blocks (or suspends a task)
///   until then; it may be called before `shutdown`, and by any number of callers. Each wait begins with a wake
///   decision, so a shut-down queue whose thread starts failed tries again.
/// - Releasing the last reference still works as before (the queue finishes its work, then stops and joins).
/// - The main queue (`SpindleOperationQueue.main`) shuts down like any other; it has no threads of its own, so it
///   terminates when its members are through, and stays refusing work for the rest of the process.
extension SpindleOperationQueue {
    /// Stops accepting work and drains (`.drain`, default) or cancels (`.cancel`) what the queue holds; returns at
    /// once (see the type's notes). Idempotent; `.cancel` after `.drain` escalates. Any thread, including the
    /// queue's own operations. A queue of a parent process (after `fork()`) ignores it.
    public func shutdown(_ mode: SpindleShutdownMode = .drain) {
        if self.isInheritedAcrossFork { return }
        let core = self.core
        let (cancel, after) = core.shutdownRequested(mode == .drain ? .drain : .cancel)
        core.perform(after)
        for op in cancel { op.cancel() }
    }

    /// Whether `shutdown` was called: the queue accepts no more work. Any thread.
    public var isShutDown: Bool {
        if self.isInheritedAcrossFork { return true }
        return self.core.lock.withLock { self.core.lifecycle.isShutDown }
    }

    /// Whether the queue has terminated: shut down, every accepted operation through, every worker out of its
    /// loop. Any thread.
    public var isTerminated: Bool {
        if self.isInheritedAcrossFork { return false }
        return self.core.lock.withLock { self.core.lifecycle.isTerminated }
    }

    /// Blocks until the queue has terminated (after a `shutdown`, which may come later, from another thread); the
    /// first wait to see it joins the threads.
    /// - Throws: `waitOnOwnQueue` from one of this queue's operations (its `main`, or its completion block),
    ///   which would wait for itself; `forkedChild` for a queue of a parent process.
    public func awaitTermination() throws(SpindleError) {
        _ = try self.awaitTermination(until: .distantFuture)
    }

    /// As `awaitTermination()`, giving up after `timeout` (zero or negative: a look); returns whether the queue
    /// terminated.
    /// - Throws: as `awaitTermination()`.
    public func awaitTermination(timeout: Duration) throws(SpindleError) -> Bool {
        try self.awaitTermination(until: .after(timeout))
    }

    /// As `awaitTermination()`, giving up at `deadline`; returns whether the queue terminated.
    /// - Throws: as `awaitTermination()`.
    public func awaitTermination(until deadline: SpindleDeadline) throws(SpindleError) -> Bool {
        try self.refuseTerminationWaitFromOwnOperation()
        return self.core.waitForTermination(until: deadline)
    }

    /// Suspends the calling task (never blocking its thread) until the queue has terminated, as the blocking form
    /// does. Cancelling the task ends the wait and changes nothing in the queue. Any task.
    /// - Throws: `CancellationError` if the task is cancelled first (at once if it already was);
    ///   `SpindleError.waitOnOwnQueue` from the async body of one of this queue's operations (or of one inside a
    ///   group of this queue; a task whose jobs run on this queue's `taskExecutor` may wait); `forkedChild`.
    public func awaitTermination() async throws {
        try self.refuseAsyncTerminationWait()
        let core = self.core
        let semaphore = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        if !core.terminationWaitBegan(semaphore) { return }
        do {
            try await semaphore.wait()
        } catch {
            core.terminationWaitCancelled(semaphore)
            throw error
        }
        core.terminationWaitEnded()
    }

    /// As `awaitTermination() async`, giving up after `timeout`: returns whether the queue terminated. A queue that
    /// has terminated returns true whatever the timeout (zero included). Any task.
    /// - Throws: as `awaitTermination() async`.
    public func awaitTermination(timeout: Duration) async throws -> Bool {
        try self.refuseAsyncTerminationWait()
        if self.core.waitForTermination(until: .after(.zero)) { return true }  // a look, without waiting
        // Beyond about 584 years (where every Spindle deadline saturates): no timeout, and no `Task.sleep`, which
        // traps past Int64.max seconds.
        if SpindleDeadline.after(timeout) == .distantFuture {
            try await self.awaitTermination()
            return true
        }
        let waited = try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await self.awaitTermination()
                return true
            }
            group.addTask {
                try await Task.sleep(for: timeout)  // the timeout itself, raced against the wait
                return false
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
        return waited || self.core.waitForTermination(until: .after(.zero))  // a tie goes to the termination
    }

    /// The async waits' refusals: a cancelled task, the queue's own async operation (or one inside a group of it),
    /// a queue of a parent process. Not the blocking form's thread check: the wait suspends the task, so a task
    /// whose job runs as one of this queue's operations (`taskExecutor`) lets that operation finish meanwhile.
    private func refuseAsyncTerminationWait() throws {
        try Task.checkCancellation()
        if self.isOwnQueueOfCallingTask { throw SpindleError.waitOnOwnQueue(name: self.name) }
        try self.refuseIfInheritedAcrossFork()
    }

    /// Throws `waitOnOwnQueue` when the calling thread runs one of this queue's operations or is one of its workers
    /// (user code a worker runs outside an operation: a deinit, a waiter), and `forkedChild`.
    private func refuseTerminationWaitFromOwnOperation() throws(SpindleError) {
        if self.isOwnQueueOfCallingThread || ThreadContext.current.workerOf === self.core {
            throw .waitOnOwnQueue(name: self.name)
        }
        try self.refuseIfInheritedAcrossFork()
    }
}
