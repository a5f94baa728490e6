import Synchronization
/// Waiting for an operation (`waitUntilFinished`) and the finish path's last step, which releases the waiters.
/// The waiters live in the operation's side object, under its lock; see `releaseWaiters` for the protocol that lets
/// the finish path skip that lock when nobody ever waited.
extension SpindleOperation {
    /// Blocks until it has finished and everything after (completion block, dependents, its queue) is done. The
    /// one exception: with a long backlog a queue worker runs a few plain block operations back to back and does
    /// their queue bookkeeping together afterwards; called from a later one of those, it returns as soon as this one
    /// has finished and its completion block returned (the queue's part is then that thread's own to do next).
    /// - Throws: `waitOnSelf` when called from its own `main` or its own completion block (for a group, also from
    ///   its `childDidFinish`); for a `SpindleGroupOperation`, `waitOnOwnGroup` when called from the `main` or
    ///   completion block of an operation inside it (at any depth), which it waits for.
    public final func waitUntilFinished() throws(SpindleError) {
        _ = try self.waitUntilFinished(until: .distantFuture)
    }

    /// As `waitUntilFinished()`, giving up after `timeout`; returns whether it finished. Zero or negative polls.
    public final func waitUntilFinished(timeout: Duration) throws(SpindleError) -> Bool {
        try self.waitUntilFinished(until: .after(timeout))
    }

    /// As `waitUntilFinished()`, giving up at `deadline`; returns whether it finished.
    public final func waitUntilFinished(until deadline: SpindleDeadline) throws(SpindleError) -> Bool {
        if self.currentState.isSettled { return true }
        let context = ThreadContext.current
        // Its `main` runs on this thread (also further up the stack: an operation started by hand inside it, such
        // as a retry's attempt, waiting for it), or its completion block does: the wait would wait for itself.
        if context.runsMain(of: self) || context.completing === self { throw .waitOnSelf(name: self.displayName) }
        // It finished earlier in the batch of reserved operations this worker is running: its completion block and
        // dependents are done, and the rest (its queue's bookkeeping, then its waiters) is this very thread's to do
        // once the batch is through, so waiting for it here could never end.
        if context.finishedEarlierInBatch(self) { return true }
        if let group = self as? SpindleGroupOperation,
            group.encloses(context.operation) || group.encloses(context.completing)
                || context.outerOperations.contains(where: { group.encloses($0.takeUnretainedValue()) })
        {
            throw .waitOnOwnGroup(name: self.displayName)
        }
        let semaphore = try! SpindleSemaphore(value: 0)
        if !self.registerWaiter(semaphore) { return true }
        if semaphore.wait(until: deadline) { return true }
        // Timed out: withdraw, unless the finish path already took us (then its signal is on its way).
        if self.withdrawWaiter(semaphore) { return false }
        semaphore.wait()
        return true
    }

    /// The last step of finishing: marks it settled and wakes everyone in `waitUntilFinished`, then tells the group
    /// it is a child of, if any (`SpindleGroupOperation.childDidSettle`, outside every lock: it may finish the
    /// group, which runs the group's completion block). A waiter publishes `hasWaiters` after registering and then
    /// looks at `settled` again; this sets `settled` and then looks at `hasWaiters` (all sequentially consistent),
    /// so at least one of the two sees the other: either this takes the waiter, or the waiter sees it settled and
    /// does not wait. A group sets `hasWaiters` when it links a child, before adding it to its inner queue. Without
    /// waiters or a group, no lock is taken.
    final func releaseWaiters() {
        self.state.bitwiseOr(OperationState.settledBit, ordering: .sequentiallyConsistent)
        guard self.hasWaiters.load(ordering: .sequentiallyConsistent) else { return }
        let (waiters, group) = self.withLocked { $0.takeWaitersAndGroup() }
        for waiter in waiters { waiter.signal() }
        group?.childDidSettle(self)
        self.didSettle()
    }

    /// Registers `semaphore` to be signalled once it has settled. Returns false (registering nothing) if it has
    /// already settled: no need to wait. See `releaseWaiters` for the protocol. A waiter that finds it finished
    /// but not settled (its worker's bookkeeping to come) counts itself in `lateWaiters`, after publishing
    /// `hasWaiters`: a worker running a reserved batch behind it stops claiming more (`QueueCore.someoneWaits`),
    /// having seen either that count move or the flag.
    final func registerWaiter(_ semaphore: SpindleSemaphore) -> Bool {
        let registered = self.withLocked { l -> Bool in
            if self.currentState.isSettled { return false }
            l.waiters.append(semaphore)
            return true
        }
        guard registered else { return false }
        self.hasWaiters.store(true, ordering: .sequentiallyConsistent)
        let now = OperationState(raw: self.state.load(ordering: .sequentiallyConsistent))
        if now.isSettled {
            _ = self.withdrawWaiter(semaphore)  // settled meanwhile; its signal, if any, lands on nobody
            return false
        }
        if now.lifecycle >= .finishing { SpindleOperation.lateWaiters.add(1, ordering: .sequentiallyConsistent) }
        return true
    }

    /// Waiters that registered on an operation already finishing or finished, not yet settled (process-wide; it
    /// only grows, wrapping). Read by workers running a reserved batch (`QueueCore.someoneWaits`).
    static let lateWaiters = Atomic<Int>(0)

    /// Removes a registered semaphore; false if the finish path already took it (its signal is then on its way).
    final func withdrawWaiter(_ semaphore: SpindleSemaphore) -> Bool {
        self.withLocked { l -> Bool in
            guard let index = l.waiters.firstIndex(where: { $0 === semaphore }) else { return false }
            l.waiters.remove(at: index)
            return true
        }
    }
}
