import Synchronization

/// Runs operations on a fixed pool of pthreads it owns (NSOperationQueue's role).
///
/// - Width: `maxConcurrentOperationCount` operations run at once, each on its own thread, even if they block
///   (threads are created as needed, up to the width, and kept). Default: the CPUs this process may use.
/// - Order: only ready operations take a slot; among them highest `queuePriority` first, first-in first-out
///   within a level. Dependencies (also on other queues) beat priority.
/// - Lifetime: while any operation added is unfinished the queue keeps itself alive, so a queue released with
///   work pending finishes that work, then frees itself; its threads exit and are joined.
///
/// All methods may be called from any thread. State lives in `QueueCore` (see there for guards, lock order and
/// the state machine); this handle only holds it.
public final class SpindleOperationQueue: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The `maxConcurrentOperationCount` meaning "as many as the CPUs this process may use".
    public static let defaultMaxConcurrentOperationCount = -1

    let core: QueueCore

    /// A queue with the default width (as many operations at once as the CPUs this process may use), named `name`
    /// (default "SpindleOperationQueue N"). Cannot fail, so it needs no `try`, as `OperationQueue()` (for a
    /// stored property's initial value, say). Any thread.
    public convenience init(name: String? = nil) {
        self.init(checkedName: name, limit: SpindleOperationQueue.defaultMaxConcurrentOperationCount)
    }

    /// A queue of width `maxConcurrentOperationCount` (`defaultMaxConcurrentOperationCount`, -1: the CPU count).
    /// `name` defaults to "SpindleOperationQueue N".
    /// - Throws: `invalidConcurrencyLimit` for a negative width other than -1. Nothing is made then.
    public convenience init(name: String? = nil,
                            maxConcurrentOperationCount: Int = SpindleOperationQueue.defaultMaxConcurrentOperationCount)
        throws(SpindleError)
    {
        guard maxConcurrentOperationCount >= -1 else { throw .invalidConcurrencyLimit(maxConcurrentOperationCount) }
        self.init(checkedName: name, limit: maxConcurrentOperationCount)
    }

    /// A queue whose width was checked (at least -1), on `pool` if one is given (see `SpindleOperationQueue+Pool`).
    init(checkedName name: String?, limit: Int, pool: SpindleThreadPool? = nil) {
        let n = QueueNumbering.next()
        self.core = QueueCore(name: name ?? "SpindleOperationQueue \(n)", limit: limit,
                              pool: pool ?? SpindleThreadPool.environmentDefault)
        self.core.handle = self  // before any worker exists
    }

    /// A queue whose operations run one at a time on the thread that runs `runLoop` (in its common modes), as the
    /// main queue does on the main thread. The loop's thread must run it for anything to start.
    init(name: String, servedBy runLoop: SpindleRunLoop) {
        self.core = QueueCore(name: name, limit: 1, servingRunLoop: runLoop)
        self.core.handle = self
    }

    /// The main queue: width 1, served by the main thread's run loop (`SpindleRunLoop.main`), so its operations
    /// run on the main thread whenever that thread runs its run loop. Suspending, cancelling and changing its width
    /// work as on any queue.
    public static let main = SpindleOperationQueue(name: "SpindleOperationQueue.main", servedBy: SpindleRunLoop.main)

    deinit {
        self.core.shutdown()
    }

    // MARK: - Adding work

    /// Adds one operation. The queue starts it on a worker thread once it is ready and a slot is free. On a full
    /// bounded queue (`capacity`), follows `fullQueuePolicy`: blocks until there is room, throws, or runs it on
    /// the calling thread.
    /// - Throws: `operationAlreadyInQueue` (this queue or another), `operationExecuting`, `operationFinished`,
    ///   `queueShutDown` once `shutdown` began, `forkedChild` for a queue of a parent process (after `fork()`); on
    ///   a full queue `queueFull` (policy `.reject`, or `.callerRuns` when it cannot run on this thread: see
    ///   `SpindleFullQueuePolicy.callerRuns`) or `waitOnOwnQueue` (policy `.block`, called from one of this
    ///   queue's operations). The queue and the operation are unchanged then, except that an operation with
    ///   conditions has had them asked for their dependencies: one the queue accepted stays there and runs.
    public func addOperation(_ operation: SpindleOperation) throws(SpindleError) {
        if let hooks = self.core.hookSlot.current { return try self.addOperation(operation, telling: hooks) }
        try self.addOperationUntold(operation)
    }

    /// `addOperation(_:)` without telling the hooks (see `SpindleOperationQueue+Hooks`).
    @inline(__always)
    func addOperationUntold(_ operation: SpindleOperation) throws(SpindleError) {
        try self.refuseIfInheritedAcrossFork()
        let core = self.core
        if core.boundedHint.isBounded && !operation.isBarrier {
            return try self.addBounded([operation], waitUntil: nil)
        }
        if core.inbox.isClosed { throw .queueShutDown(name: self.name) }  // early: the push decides
        if let error = self.claim(operation) { throw error }
        operation.gateClaimedIfGated(on: self)  // its conditions' dependencies go first
        if !operation.isBarrier && !core.isServed {
            // The hot path: no queue lock. One operation lock, three compare-and-swaps, and the lock only when a
            // parked worker must be woken or a thread started.
            guard self.pushClaimed(operation) else {
                self.unclaim(operation)
                throw .queueShutDown(name: self.name)
            }
            core.noteAdded(level: operation.queuePriority.bucket)
            operation.gateEnqueuedIfGated()
        } else {
            // Barriers and run-loop-served queues: admitted under the lock, after everything added before.
            guard let after = core.admitOne(operation) else {
                self.unclaim(operation)
                throw .queueShutDown(name: self.name)
            }
            core.perform(after)
            operation.gateEnqueuedIfGated()
        }
    }

    /// Adds several operations, all or none: if any cannot be added (see `addOperation`, or it appears twice),
    /// none is and the error names it. Within the batch, priority order holds (all are linked before any runs).
    /// With `waitUntilFinished`, returns once these operations (not the whole queue) have finished. On a bounded
    /// queue the whole batch waits for room, is refused, or runs on the caller (see `fullQueuePolicy`).
    /// - Throws: as `addOperation`, `duplicateInBatch`, `batchExceedsCapacity` (a bounded queue smaller than the
    ///   batch); `waitOnOwnQueue` (nothing added) when the wait could never end: asked from an operation running on
    ///   this queue when every slot would be held by threads waiting like this (width 1, or all but this one
    ///   already wait so), or when a barrier is pending (the batch would wait behind it, and it waits for the
    ///   caller); or asked from the thread of the run loop serving this queue (its only thread), or by the worker of
    ///   a width-1 queue outside any operation (a deinit it runs). An empty batch waits for nothing and is never
    ///   refused.
    public func addOperations(_ operations: [SpindleOperation], waitUntilFinished: Bool = false) throws(SpindleError) {
        let hooks = self.core.hookSlot.current  // told before the checks, and after the add before any wait
        hooks?.willAdd(operations, to: self)
        try self.refuseIfInheritedAcrossFork()
        let waits = waitUntilFinished && !operations.isEmpty
        // The serving run loop's thread is the only one that runs this queue's operations, and so is the worker of a
        // width-1 queue outside any operation (a deinit it runs): neither may wait for them (as the drain wait).
        if waits, (self.core.servingRunLoop?.isOwnedByCurrentThread ?? false) || self.isLoneWorkerOutsideOperations {
            throw .waitOnOwnQueue(name: self.name)
        }
        // A member waiting for a batch in its own queue holds its slot meanwhile: refuse the wait nobody could end.
        if waits, case let slots = self.slotsHeldByCallingThread, !slots.isEmpty {
            guard self.core.beginBatchWait(slots: slots) else { throw .waitOnOwnQueue(name: self.name) }
            defer { self.core.endBatchWait(slots: slots) }
            try self.addOperationsUnchecked(operations, waitUntilFinished: true, hooks: hooks, holdingSlots: true)
            return
        }
        try self.addOperationsUnchecked(operations, waitUntilFinished: waitUntilFinished, hooks: hooks)
    }

    /// `holdingSlots`: the caller holds slots of this queue (a running member) and will wait for the batch; a
    /// barrier pending when the batch is admitted would hold the batch back until the caller finished, so the add
    /// is refused then (`waitOnOwnQueue`, nothing added).
    private func addOperationsUnchecked(_ operations: [SpindleOperation], waitUntilFinished: Bool,
                                        hooks: QueueHookBox?, holdingSlots: Bool = false) throws(SpindleError) {
        if self.core.boundedHint.isBounded {
            try self.addBounded(operations, waitUntil: nil, holdingSlots: holdingSlots)
            hooks?.didAdd(operations, to: self)
            if waitUntilFinished {
                for op in operations { try op.waitUntilFinished() }
            }
            return
        }
        let core = self.core
        core.lockAndAdmit()
        guard core.lifecycle.acceptsWork else {
            core.lock.unlock()
            throw .queueShutDown(name: self.name)
        }
        var claimed = 0
        var failure: SpindleError? = nil
        for op in operations {
            if let error = self.claim(op, inLockedBatch: true) {
                failure = error
                break
            }
            claimed += 1
        }
        if let failure {
            core.lock.unlock()  // then the undo, as for a shut-down queue: `unclaim` drops outstanding counts
            for op in operations[0..<claimed] { self.unclaim(op) }
            throw failure
        }
        try self.produceGateDependenciesLocked(operations)
        if holdingSlots && core.barriers.holdsAdds {
            core.lock.unlock()
            for op in operations { self.unclaim(op) }
            throw .waitOnOwnQueue(name: self.name)
        }
        core.perform(core.admitClaimedBatchUnlocking(operations))
        for op in operations { op.gateEnqueuedIfGated() }
        hooks?.didAdd(operations, to: self)
        if waitUntilFinished {
            for op in operations { try op.waitUntilFinished() }
        }
    }

    /// `idle` → `enqueued`, with this queue recorded, atomically under the operation's lock (so a thread that
    /// sees it enqueued also sees its queue). Returns the error if the operation cannot be added.
    ///
    /// `inLockedBatch`: the caller holds this queue's lock and claims a batch; an operation claimed earlier in the
    /// same batch (enqueued here, not yet admitted) is reported as `duplicateInBatch`.
    func claim(_ op: SpindleOperation, inLockedBatch: Bool = false) -> SpindleError? {
        let error = op.withLocked { l -> SpindleError? in
            let (moved, s) = op.advanceState { $0.enqueuing() }
            guard moved else {
                switch s.lifecycle {
                case .enqueued where inLockedBatch && !op.placement.isMember
                    && l.queue?.toOpaque() == Unmanaged.passUnretained(self).toOpaque():
                    return .duplicateInBatch(name: l.name ?? op.defaultName)
                case .enqueued, .dispatching: return .operationAlreadyInQueue(name: l.name ?? op.defaultName)
                case .executing: return .operationExecuting(name: l.name ?? op.defaultName)
                default: return .operationFinished(name: l.name ?? op.defaultName)
                }
            }
            l.queue = Unmanaged.passUnretained(self)
            // A gated operation took its gate's hold (`enqueuing`): if that made it not ready, say so later.
            if s.isGated { l.extras?.gate?.enqueuedUnready = s.pendingDependencies == 1 && !s.isCancelled }
            return nil
        }
        if error == nil { self.core.addOutstanding() }
        return error
    }

    /// For a claimed batch with gated operations (caller holds the lock; a plain batch costs a bit test per
    /// operation): unlocks, lets their conditions' dependencies join the queue first (`gateClaimedIfGated`), and
    /// locks again. Throws `queueShutDown`, the batch given back and the lock released, if the queue was shut down
    /// meanwhile.
    func produceGateDependenciesLocked(_ operations: [SpindleOperation]) throws(SpindleError) {
        guard operations.contains(where: { $0.currentState.isGated }) else { return }
        self.core.lock.unlock()
        for op in operations { op.gateClaimedIfGated(on: self) }
        self.core.lockAndAdmit()
        guard self.core.lifecycle.acceptsWork else {
            self.core.lock.unlock()
            for op in operations { self.unclaim(op) }
            throw .queueShutDown(name: self.name)
        }
    }

    /// Undoes `claim` for an operation of a failed batch (never admitted, so never in a bucket). Its outstanding
    /// count is dropped at once: never the queue's last reference, as the adding thread holds one.
    func unclaim(_ op: SpindleOperation) {
        op.withLocked { l in
            _ = op.advanceState { $0.dequeuingUnadmitted() }
            l.queue = nil
        }
        op.gateUnclaimedIfGated()  // what its conditions produced for this add is taken off it again
        self.core.dropOutstanding(1)
    }

    /// Adds a block, wrapped in a `SpindleBlockOperation`, and returns that operation. A queue that cannot take it
    /// (shut down, a full bounded queue whose policy refuses, a queue of a parent process) returns it finished as
    /// cancelled: the block never runs.
    @discardableResult
    public func addOperation(_ block: consuming @escaping @Sendable () -> Void) -> SpindleBlockOperation {
        let op = SpindleBlockOperation(block)  // moved in: the block's captures are not retained again
        if let hooks = self.core.hookSlot.current { return self.addBlockOperation(op, telling: hooks) }
        if self.isInheritedAcrossFork { return self.finishRefused(op) }
        let core = self.core
        if core.boundedHint.isBounded || core.isServed {
            do { try self.addOperation(op) } catch { return self.finishRefused(op) }
            return op
        }
        // No other thread can see this operation before the inbox push publishes it: it is claimed without its
        // lock or a compare-and-swap (what `claim` does, for a fresh idle operation).
        op.markEnqueuedUnpublished()
        op.lockedState.queue = Unmanaged.passUnretained(self)
        core.addOutstanding()
        guard self.pushClaimed(op) else {  // shut down (the push reads the closed bit: no separate check here)
            self.unclaim(op)
            return self.finishRefused(op)
        }
        core.noteAdded(level: SpindleOperation.QueuePriority.normal.bucket)
        return op
    }

    /// The hot path's second half: pushes a claimed, non-barrier operation on the inbox of a queue with threads of its own and
    /// wakes a worker or starts a thread if needed (the queue lock only then). Returns false, having pushed
    /// nothing, if the queue was shut down.
    @inline(__always)
    private func pushClaimed(_ operation: SpindleOperation) -> Bool {
        let core = self.core
        guard core.pushToInbox(operation) else { return false }
        guard core.needsWakeAfterInboxPush() else { return true }
        core.perform(core.pushedToInbox())
        return true
    }

    /// Adds a barrier: `block` runs after every operation added before it has finished, alone, and operations
    /// added after it start only once it has returned. Returns the barrier's operation (a `SpindleBlockOperation`
    /// named "barrier"), to wait on (`waitUntilFinished`, which returns once `block` and the operation's completion
    /// block have), observe, or make other operations depend on; it is not listed in `operations` nor counted in
    /// `operationCount`. A queue that cannot take it (shut down, or a queue of a parent process after `fork()`)
    /// returns it finished as cancelled: `block` never runs. A bounded queue never holds it back.
    @discardableResult
    public func addBarrierBlock(_ block: @escaping @Sendable () -> Void) -> SpindleBlockOperation {
        let op = SpindleBlockOperation(block)
        op.isBarrier = true
        op.name = "barrier"
        if self.isInheritedAcrossFork { return self.finishRefused(op) }
        do { try self.addOperation(op) } catch { return self.finishRefused(op) }  // only a shut-down queue refuses
        return op
    }

    // MARK: - Settings

    /// The queue's name (default "SpindleOperationQueue N"). Thread-safe. In a forked child, a queue of the parent
    /// keeps its name (setting it does nothing: its lock may have been held at the fork).
    public var name: String {
        get { self.isInheritedAcrossFork ? self.core.name : self.core.lock.withLock { self.core.name } }
        set {
            // A queue of a parent process never takes its lock (see `isInheritedAcrossFork`): the name stays.
            guard !self.isInheritedAcrossFork else { return }
            self.core.lock.withLock { self.core.name = newValue }
        }
    }

    /// How many operations may run at once; `defaultMaxConcurrentOperationCount` (-1) means the CPU count.
    ///
    /// Settable as Foundation's: setting it is `setMaxConcurrentOperationCount` without the error. An invalid
    /// value (negative, other than -1) leaves the width as it was and is reported to `SpindleDiagnostics` as
    /// `invalidConcurrencyLimitIgnored` (Foundation raises an exception; a property cannot throw); a queue of a
    /// parent process (after `fork()`) ignores the set. Call `setMaxConcurrentOperationCount` to get the error
    /// instead. Any thread.
    public var maxConcurrentOperationCount: Int {
        get {
            if self.isInheritedAcrossFork { return self.core.slots.requestedLimit }
            return self.core.lock.withLock { self.core.slots.requestedLimit }
        }
        set {
            do {
                try self.setMaxConcurrentOperationCount(newValue)
            } catch .invalidConcurrencyLimit(let value) {
                SpindleDiagnostics.report(.invalidConcurrencyLimitIgnored(queue: self.name, value: value))
            } catch {
                // forkedChild: a queue of the parent process is never changed in the child.
            }
        }
    }

    /// Changes the width; takes effect at once (raising it starts waiting operations right away; lowering it
    /// lets running ones finish). 0 starts nothing.
    /// - Throws: `invalidConcurrencyLimit` for a negative value other than -1, `forkedChild` for a queue of a
    ///   parent process; nothing changes then.
    public func setMaxConcurrentOperationCount(_ value: Int) throws(SpindleError) {
        guard value >= -1 else { throw .invalidConcurrencyLimit(value) }
        try self.refuseIfInheritedAcrossFork()
        self.core.perform(self.core.widthChanged(requested: value))
    }

    /// Whether the queue starts nothing new (running operations go on). Setting false starts waiting work. A
    /// shut-down queue ignores `true` (what it accepted must still run or finish cancelled); a queue of a parent
    /// process ignores both.
    public var isSuspended: Bool {
        get { self.isInheritedAcrossFork ? self.core.slots.suspended : self.core.lock.withLock { self.core.slots.suspended } }
        set {
            if self.isInheritedAcrossFork { return }
            self.core.perform(self.core.suspensionChanged(to: newValue))
        }
    }

    // MARK: - Inspecting

    /// The operations added and not yet finished, in the order they were added (barriers excluded).
    public var operations: [SpindleOperation] {
        if self.isInheritedAcrossFork { return [] }
        return self.core.withAdmittedLock {
            var list: [SpindleOperation] = []
            list.reserveCapacity(self.core.members.countedByCapacity)
            var node = self.core.members.first
            while let link = node {
                let op = link.takeUnretainedValue()
                if !op.isBarrier && !op.isFinished { list.append(op) }
                node = op.memberNext
            }
            return list
        }
    }

    /// How many operations are in the queue (barriers excluded): added, and not yet through the queue's bookkeeping
    /// of their finish. O(1). An operation that has just finished is still counted while its completion block runs
    /// and until that bookkeeping (its worker's next visit to the queue's lock, before the waiters on it are
    /// released), where `operations`, which reads each one's state, no longer lists it.
    public var operationCount: Int {
        self.isInheritedAcrossFork ? 0 : self.core.withAdmittedLock { self.core.members.countedByCapacity }
    }

    /// The queue running the calling thread's current operation; on the main thread outside any operation, the
    /// main queue; otherwise nil.
    public static var current: SpindleOperationQueue? {
        if let queue = ThreadContext.current.queue { return queue }
        return SpindleThread.isMainThread ? SpindleOperationQueue.main : nil
    }

    /// "SpindleOperationQueue(name)". Any thread.
    public var description: String { "SpindleOperationQueue(\(self.name))" }

    /// The queue's settings and counts, and each waiting operation with what it waits on.
    public var debugDescription: String { self.core.debugSummary() }
}
