/// The async wait for an operation.
///
/// It reuses the operation's own waiter hook (`Locked.waiters`, signalled by the finish path after the completion
/// block, the dependents and the queue): the wait registers a fresh `SpindleSemaphore` there and awaits it with
/// the semaphore's async wait, which suspends the task instead of blocking a thread. On cancellation the
/// semaphore is withdrawn from `waiters` under the operation's lock (no leak); if the finish path had already
/// taken it, its later `signal` only lands on a semaphore nobody waits on.
extension SpindleOperation {
    /// Suspends the calling task until the operation has finished and everything after (completion block,
    /// dependents, its queue) is done, as the blocking `waitUntilFinished()` does, without blocking a thread.
    /// Cancelling the awaiting task ends the wait; it never cancels the operation. Callable from any task.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before the operation finished (at once if it was
    ///   already cancelled when it called); `SpindleError.waitOnSelf` when called from this operation's own
    ///   async body (`SpindleAsyncOperation`) or a task created inside it (a `Task { }` too: it inherits the
    ///   body's task-locals, and is not told apart from a child task the body awaits; use `Task.detached`); for a
    ///   `SpindleGroupOperation`, `waitOnOwnGroup` from the async body of an operation inside it. Nothing changes
    ///   then.
    public final func waitUntilFinished() async throws {
        try Task.checkCancellation()
        if self.currentState.isSettled { return }
        if SpindleAsyncOperation.running === self { throw SpindleError.waitOnSelf(name: self.displayName) }
        if let group = self as? SpindleGroupOperation, group.encloses(SpindleAsyncOperation.running) {
            throw SpindleError.waitOnOwnGroup(name: self.displayName)
        }
        let semaphore = try! SpindleSemaphore(value: 0)  // 0 is a valid value
        if !self.registerWaiter(semaphore) { return }
        do {
            try await semaphore.wait()
        } catch {
            _ = self.withdrawWaiter(semaphore)
            throw error
        }
    }

    /// Waiters registered right now (for tests: proves a cancelled async wait left nothing behind).
    var waiterCount: Int { self.withLocked { $0.waiters.count } }
}
