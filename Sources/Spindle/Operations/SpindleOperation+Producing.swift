/// Producing operations: a running operation hands follow-up operations to where it runs (the `produceOperation`
/// of Apple's "Advanced NSOperations" sample, PSOperations and ProcedureKit), and its observers are told.
extension SpindleOperation {
    /// Adds `operation` to where this operation runs, and tells this operation's observers (a `did` change of the
    /// event `producedOperation`, whose `newValue` is `.operation(operation)`). Where: the group this operation is a
    /// child of, if any (so the group also waits for `operation`), else the queue that owns it.
    ///
    /// Call it while this operation executes: from `main`, or, for a concurrent operation, from any thread before
    /// it reports its end. The produced operation is independent: it is no dependency of anything (neither this
    /// operation nor its dependents wait for it; make one depend on it by hand before producing it if needed), as in
    /// the sample. It runs on that queue (or in that group) like any other operation added there.
    ///
    /// - Throws: `produceWhenNotExecuting` if this operation is not executing (not started, or finished);
    ///   `produceWithoutQueue` if it runs in no queue and no group (started by hand, or run on the adding thread
    ///   by a full bounded queue's `.callerRuns` policy); otherwise what adding to that
    ///   queue or group throws for `operation` (in a queue or a group already, executing, finished; a full bounded
    ///   queue by its policy; a shut-down queue). Nothing is added and nobody is told then. A `produce` racing this
    ///   operation's own finish may add `operation` without the event: nothing is delivered after `did isFinished`.
    public final func produce(_ operation: SpindleOperation) throws(SpindleError) {
        guard self.currentState.lifecycle == .executing else {
            throw .produceWhenNotExecuting(name: self.displayName)
        }
        let (group, queue) = self.withLocked { l in (l.parentGroup, l.queue?.takeUnretainedValue()) }
        if let group {
            try group.addOperation(operation)
        } else if let queue {
            try queue.addOperation(operation)
        } else {
            throw .produceWithoutQueue(name: self.displayName)
        }
        self.emitEvent(.producedOperation, .operation(operation))
    }

    /// Records the event `key` carrying `value` and delivers it if this thread must. Nothing without observers.
    final func emitEvent(_ key: Key, _ value: ObservedValue) {
        guard self.hasObservers.load(ordering: .relaxed) else { return }
        let drain = self.withLocked { l -> Bool in
            guard let extras = l.extras else { return false }
            return extras.observation.recordEvent(key, value)
        }
        if drain { self.drainObservations() }
    }
}
