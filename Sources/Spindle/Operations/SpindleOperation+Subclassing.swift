extension SpindleOperation {
    /// For subclasses that override `start()` and drive their own state (the seeds' hand-written concurrent
    /// operation): moves into `executing`, delivering `will`/`did isExecuting`. Returns false, doing nothing else,
    /// when the operation was cancelled before it started — it has then been finished unrun, so `start()` should
    /// simply return — or was already finished.
    ///
    /// - Throws: `operationExecuting`, `operationNotReady` or `operationEnqueued` as `start()` does.
    /// Call it from your `start()` only (any thread).
    @discardableResult
    public final func beginExecuting() throws(SpindleError) -> Bool {
        try self.enterExecution()
    }

    /// For subclasses that report their own end (concurrent operations): moves `executing` → finished, delivering
    /// `will/did isExecuting` then `will/did isFinished`, then runs the completion block, readies dependents,
    /// tells the queue and releases waiters. A cancelled operation that never began executing, and is not waiting
    /// in a queue, may also be finished this way. Callable from any thread, once.
    ///
    /// - Parameter error: kept in `error` (nil for success).
    /// - Throws: `operationAlreadyFinished` on a second call; `operationNotExecuting` if it neither began executing
    ///   nor was cancelled, or if it is cancelled but still waiting in a queue (the queue finishes it, through the
    ///   `start()` it calls, which may call this, then or later and from any thread);
    ///   `groupFinishesByItself` on a `SpindleGroupOperation`. Nothing changes then.
    ///
    /// Porting: a base class that declares its own `finish(_ errors: [Error] = [])` (the "Advanced NSOperations"
    /// sample, PSOperations) keeps its `finish()` calls: this method is a disfavoured overload, so a plain
    /// `finish()` picks the subclass's method rather than being ambiguous. Call this one from it with its label,
    /// `try finish(throwing: errors.first)`.
    @_disfavoredOverload
    public final func finish(throwing error: (any Error)? = nil) throws(SpindleError) {
        if self.isGroup { throw .groupFinishesByItself(name: self.displayName) }
        let s = self.currentState
        if s.lifecycle >= .finishing { throw .operationAlreadyFinished(name: self.displayName) }
        if s.beginningFinish() == nil { throw .operationNotExecuting(name: self.displayName) }
        // Cancelled and taken by a worker: its queue finishes it, through the `start()` it calls (a custom one may
        // call this, also later from another thread).
        if s.lifecycle == .dispatching && !self.queueCalledStart.load(ordering: .acquiring) {
            throw .operationNotExecuting(name: self.displayName)
        }
        if !self.completeExecution(error: error) {
            // Lost a race with another finishing call.
            throw .operationAlreadyFinished(name: self.displayName)
        }
    }

    /// Its queue is about to call `start()` (see `queueCalledStart`). A release store: one plain move on x86.
    @inline(__always)
    final func queueIsCallingStart() { self.queueCalledStart.store(true, ordering: .releasing) }

    /// What `claimExecution` found.
    enum ExecutionClaim {
        /// It moved into `executing` (the isExecuting change emitted): the caller runs it.
        case claimed
        /// It was cancelled before it ran (idle or dispatching): the caller finishes it unrun.
        case cancelled
        /// It is finishing or finished: nothing to do.
        case finished
    }

    /// `enterExecution` without finishing a cancelled operation: a group finishes unrun only once its children are
    /// through. Throws as `start()`.
    ///
    /// `byItsQueue`: the queue's own start of a plain block operation (`startAsItsQueue`), whose `start()` cannot
    /// hop to another thread; its public `start()` is then refused while it is `dispatching`.
    @inline(__always)
    final func claimExecution(byItsQueue: Bool = false) throws(SpindleError) -> ExecutionClaim {
        var current = self.currentState
        while true {
            switch current.lifecycle {
            case .finished, .finishing: return .finished
            case .executing: throw .operationExecuting(name: self.displayName)
            case .enqueued: throw .operationEnqueued(name: self.displayName)
            case .dispatching:
                // Taken by a worker: the queue's to start until it called `start()`; from then on that start() code
                // claims it, on any thread (it may hop to another, as Foundation code does with the main thread).
                guard byItsQueue || self.queueCalledStart.load(ordering: .acquiring) else {
                    throw .operationEnqueued(name: self.displayName)
                }
            case .idle: break
            }
            if current.propagatesFailure && !current.isCancelled && self.hasFailedDependency {
                // The last gate of `cancelsOnFailedDependency`: nothing starts past a failed dependency.
                self.cancel(for: .dependencyFailed)
                // An override of cancel() that did not call super's left it uncancelled: cancel it here, or this
                // loop would come back for ever.
                if !self.currentState.isCancelled { self.markCancelled() }
                current = self.currentState
                continue
            }
            if current.isCancelled { return .cancelled }
            // A gated operation runs only through a queue (see `SpindleOperation+Conditions`).
            if current.lifecycle == .idle && current.isGated { throw .gatedOperationNeedsQueue(name: self.displayName) }
            guard let next = current.beginningExecution() else { throw .operationNotReady(name: self.displayName) }
            // Only the call that won reports anything: a start that lost to cancel() never says "executing".
            if self.hasObservers.load(ordering: .relaxed) {
                guard let seen = self.moveObservedToExecuting(from: current, to: next) else { return .claimed }
                current = seen
                continue
            }
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                if self.hasObservers.load(ordering: .sequentiallyConsistent) { self.emitExecutingIfStill() }
                return .claimed
            }
            current = OperationState(raw: seen)
        }
    }

    /// `claimExecution`'s move for an observed operation: the move and its record under one lock. A finish on
    /// another thread can only move on from `executing` after this move, and records its own change under the same
    /// lock after its move, so observers get "executing" before "not executing". Returns nil once moved, or the
    /// state that made the compare-and-swap fail. Out of line: an operation nobody observes does not carry it.
    @inline(never)
    private final func moveObservedToExecuting(from current: OperationState,
                                               to next: OperationState) -> OperationState? {
        let (done, seen, drain) = self.withLocked { l -> (Bool, UInt64, Bool) in
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            guard done else { return (false, seen, false) }
            return (true, seen, l.recordObservation(.isExecuting, from: .bool(false), to: .bool(true),
                                                    now: self.currentState))
        }
        guard done else { return OperationState(raw: seen) }
        if drain { self.drainOnOwnPath(of: self.owningQueue) }
        return nil
    }

    /// An observer registered between `claimExecution`'s look at `hasObservers` and its move: tells it of the move
    /// unless a finish has already moved on from `executing` (that finish's "not executing" is then the last word
    /// on it, and an "executing" after it would be out of order).
    @inline(never)
    private final func emitExecutingIfStill() {
        let drain = self.withLocked { l -> Bool in
            guard self.currentState.lifecycle == .executing else { return false }
            return l.recordObservation(.isExecuting, from: .bool(false), to: .bool(true), now: self.currentState)
        }
        if drain { self.drainOnOwnPath(of: self.owningQueue) }
    }
}
