/// A queue's hooks (`SpindleOperationQueueHooks`): where each event reads them and calls them.
///
/// State: the hooks live in the core's `hookSlot` (see `FastPath/QueueHookSlot` for its guard and orderings).
/// Every event reads the slot once: the public add entries (`addOperation` in all its forms, `addOperations`, the
/// timed and async adds; `addBarrierBlock`, `addOperationAndWait`, `run` and `taskExecutor` go through
/// `addOperation`), the queue's `run` of an operation (`willStart`), the operation's one finish path
/// (`completeExecution`, `didFinish`), and the caller-runs path of a bounded queue. No lock of ours is held when a
/// hook runs.
extension SpindleOperationQueue {
    /// The hooks told of this queue's operations being added, started and finished (see
    /// `SpindleOperationQueueHooks`); nil (the default) for none. Settable at any time, from any thread: each event
    /// uses the hooks current when it happens. Setting hooks whose closures are all nil is setting nil. The hooks
    /// replaced are released once no event is calling them.
    public var hooks: SpindleOperationQueueHooks? {
        get { self.core.hookSlot.current?.hooks }
        set {
            let box = newValue.flatMap { $0.isEmpty ? nil : QueueHookBox($0) }
            // The old box is released here, after the slot's lock: its closures' captures may run a deinit.
            _ = self.core.hookSlot.replace(with: box)
        }
    }

    // MARK: - Adds

    /// `addOperation(_:)` with hooks set: `willAdd`, the add, then `didAdd` if it succeeded.
    @inline(never)
    func addOperation(_ operation: SpindleOperation, telling hooks: QueueHookBox) throws(SpindleError) {
        hooks.willAdd(operation, to: self)
        try self.addOperationUntold(operation)
        hooks.didAdd(operation, to: self)
    }

    /// `addOperation { }` with hooks set: as without them (a refused block's operation is handed back finished as
    /// cancelled), told `willAdd` and, if it was added, `didAdd`.
    @inline(never)
    func addBlockOperation(_ op: SpindleBlockOperation, telling hooks: QueueHookBox) -> SpindleBlockOperation {
        hooks.willAdd(op, to: self)
        if self.isInheritedAcrossFork { return self.finishRefused(op) }
        do { try self.addOperationUntold(op) } catch { return self.finishRefused(op) }
        hooks.didAdd(op, to: self)
        return op
    }

    /// Runs `add` (an add of `operations`) between `willAdd` and `didAdd` when hooks are set.
    @inline(__always)
    func tellingHooks(_ operations: [SpindleOperation], _ add: () throws(SpindleError) -> Void) throws(SpindleError) {
        guard let hooks = self.core.hookSlot.current else { return try add() }
        hooks.willAdd(operations, to: self)
        try add()
        hooks.didAdd(operations, to: self)
    }

    /// Operations of an add that run on the adding thread (a full bounded queue whose policy is `.callerRuns`): they
    /// are not members, so the queue's start and finish paths do not see them. Returns the hooks for their
    /// `willStart` (nil: none); each one's `didFinish` is delivered by an observer of its `isFinished`, registered
    /// here, before it can start.
    func hooksForCallerRuns(_ operations: [SpindleOperation]) -> QueueHookBox? {
        guard let hooks = self.core.hookSlot.current else { return nil }
        guard hooks.hooks.didFinish != nil else { return hooks }
        for op in operations {
            // Weakly: the observer stays registered on the operation, which may outlive the queue.
            op.observe([.isFinished]) { [weak self] op, change in
                guard change.phase == .did, let self else { return }
                hooks.didFinish(op, on: self)
            }
        }
        return hooks
    }
}

extension QueueCore {
    /// The queue is about to call `op.start()`: `willStart`, unless `op` was cancelled. One load without hooks.
    @inline(__always)
    func tellHooksWillStart(_ op: SpindleOperation) {
        if let hooks = self.hookSlot.current { hooks.willStart(op, on: self.handle!) }
    }

    /// `op`, a member, has finished (its finish path, before its completion block): `didFinish`. One load without
    /// hooks. The handle is alive: `op` is still outstanding.
    @inline(__always)
    func tellHooksDidFinish(_ op: SpindleOperation) {
        if let hooks = self.hookSlot.current { hooks.didFinish(op, on: self.handle!) }
    }
}

extension QueueHookBox {
    /// `willAdd` for one operation.
    @inline(__always)
    func willAdd(_ op: SpindleOperation, to queue: SpindleOperationQueue) { self.hooks.willAdd?(queue, op) }

    /// `didAdd` for one operation.
    @inline(__always)
    func didAdd(_ op: SpindleOperation, to queue: SpindleOperationQueue) { self.hooks.didAdd?(queue, op) }

    /// `willAdd` for each operation of a batch, in order.
    func willAdd(_ operations: [SpindleOperation], to queue: SpindleOperationQueue) {
        guard let hook = self.hooks.willAdd else { return }
        for op in operations { hook(queue, op) }
    }

    /// `didAdd` for each operation of a batch, in order.
    func didAdd(_ operations: [SpindleOperation], to queue: SpindleOperationQueue) {
        guard let hook = self.hooks.didAdd else { return }
        for op in operations { hook(queue, op) }
    }

    /// `willStart`, unless `op` is cancelled (it will finish unrun).
    func willStart(_ op: SpindleOperation, on queue: SpindleOperationQueue) {
        guard let hook = self.hooks.willStart, !op.isCancelled else { return }
        hook(queue, op)
    }

    /// `didFinish`, with the thread marked as a completion block's is, so that a hook waiting for its own operation
    /// (`waitOnSelf`) or its queue (`waitOnOwnQueue`) is told instead of deadlocking.
    func didFinish(_ op: SpindleOperation, on queue: SpindleOperationQueue) {
        guard let hook = self.hooks.didFinish else { return }
        let error = op.error
        ThreadContext.current.asCompleting(op, of: queue) { hook(queue, op, error) }
    }
}
