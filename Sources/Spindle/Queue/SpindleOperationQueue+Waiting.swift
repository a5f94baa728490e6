/// Cancelling a queue's operations and waiting for it to drain (NSOperationQueue's `cancelAllOperations` and
/// `waitUntilAllOperationsAreFinished`). State is `QueueCore`'s (see there for guards and lock order).
extension SpindleOperationQueue {
    /// Cancels every operation in the queue (waiting and running). None is removed at once: waiting ones are
    /// started in turn and finish without running `main`; their completion blocks run.
    public func cancelAllOperations() {
        if self.isInheritedAcrossFork { return }
        let members: [SpindleOperation] = self.core.withAdmittedLock {
            var list: [SpindleOperation] = []
            list.reserveCapacity(self.core.members.count)
            var node = self.core.members.first
            while let link = node {
                let op = link.takeUnretainedValue()
                list.append(op)
                node = op.memberNext
            }
            return list
        }
        for op in members { op.cancel() }
    }

    /// Blocks until the queue has no operations (including ones added while waiting).
    /// - Throws: `waitOnOwnQueue` when called from one of this queue's operations (its `main`, or its completion
    ///   block on whatever thread it runs) or from code one of its workers runs outside them (a finished
    ///   operation's deinit); `forkedChild` for a queue of a parent process.
    public func waitUntilAllOperationsAreFinished() throws(SpindleError) {
        _ = try self.waitUntilAllOperationsAreFinished(until: .distantFuture)
    }

    /// As `waitUntilAllOperationsAreFinished()`, giving up after `timeout`; returns whether the queue drained.
    public func waitUntilAllOperationsAreFinished(timeout: Duration) throws(SpindleError) -> Bool {
        try self.waitUntilAllOperationsAreFinished(until: .after(timeout))
    }

    /// As `waitUntilAllOperationsAreFinished()`, giving up at `deadline`; returns whether the queue drained.
    public func waitUntilAllOperationsAreFinished(until deadline: SpindleDeadline) throws(SpindleError) -> Bool {
        // Also from user code a worker runs outside an operation (a deinit of a finished one): as the termination
        // wait, since the worker it would wait on is this thread.
        if self.isOwnQueueOfCallingThread || ThreadContext.current.workerOf === self.core {
            throw .waitOnOwnQueue(name: self.name)
        }
        try self.refuseIfInheritedAcrossFork()
        let core = self.core
        return ThreadContext.current.blocking {  // on a pool thread, another may serve meanwhile
            core.lock.lock()
            defer { core.lock.unlock() }
            // Admits on every look: operations added while we wait count too.
            return core.drained.wait(until: deadline) {
                core.drainInboxLocked()
                return core.members.count > 0
            }
        }
    }
}
