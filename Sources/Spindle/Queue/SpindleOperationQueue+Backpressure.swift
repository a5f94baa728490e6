/// Bounded queues: a capacity, a policy for a full queue, and adds that wait for room (blocking with a deadline,
/// or suspending a task). The queue side (FIFO hand-over of room, no lost or stolen wakeups) is in
/// `QueueCore+Backpressure`.
///
/// Decisions:
/// - Capacity counts operations added and not yet finished (running ones included). Barriers do not count and
///   are never held back (`addBarrierBlock` cannot fail).
/// - A batch is all or nothing under every policy: it waits until the whole batch fits, is refused whole, or runs
///   whole on the caller. A batch larger than the capacity can never fit: `batchExceedsCapacity`, whatever the
///   policy.
/// - Lowering the capacity removes nothing: adds wait (or follow the policy) until the queue is below it; blocked
///   producers whose batch no longer fits at all are released with `batchExceedsCapacity`. Raising it, or setting
///   nil, admits blocked producers at once. Adds racing with the call that sets a capacity on an unbounded queue
///   may be admitted without the check (they count from then on).
/// - An unbounded queue's `addOperation` pays one test of a flag for all this; a bounded queue takes its lock on
///   every add.
extension SpindleOperationQueue {
    /// A bounded queue: as `init(name:maxConcurrentOperationCount:)`, holding at most `capacity` operations added
    /// and not finished; a full queue follows `policy`.
    /// - Throws: `invalidConcurrencyLimit`, or `invalidCapacity` for a capacity below 1.
    public convenience init(name: String? = nil,
                            maxConcurrentOperationCount: Int = SpindleOperationQueue.defaultMaxConcurrentOperationCount,
                            capacity: Int, whenFull policy: SpindleFullQueuePolicy = .block) throws(SpindleError) {
        if capacity < 1 { throw .invalidCapacity(capacity) }
        try self.init(name: name, maxConcurrentOperationCount: maxConcurrentOperationCount)
        try self.setCapacity(capacity, whenFull: policy)
    }

    /// The most operations (added, not finished; barriers excluded) the queue holds; nil: unbounded (default).
    /// Any thread.
    public var capacity: Int? { self.core.lock.withLock { self.core.admission.capacity } }

    /// What a plain add does when the queue is full (default `.block`). Any thread.
    public var fullQueuePolicy: SpindleFullQueuePolicy { self.core.lock.withLock { self.core.admission.policy } }

    /// Sets the capacity (nil: unbounded) and, if given, the policy. Takes effect at once (see the decisions
    /// above). Any thread.
    /// - Throws: `invalidCapacity` for a capacity below 1, `forkedChild` for a queue of a parent process; nothing
    ///   changes then.
    public func setCapacity(_ capacity: Int?, whenFull policy: SpindleFullQueuePolicy? = nil) throws(SpindleError) {
        if let capacity, capacity < 1 { throw .invalidCapacity(capacity) }
        try self.refuseIfInheritedAcrossFork()
        self.core.perform(self.core.capacityChanged(to: capacity, policy: policy))
    }

    /// Adds `operation`, waiting until `deadline` for room if the queue is full, whatever its policy.
    /// - Throws: as `addOperation`; `queueFull` if the deadline passed first (nothing was added); `waitOnOwnQueue`
    ///   if `deadline` is `.distantFuture` and the queue is full, from the queue's own thread (as the blocking add).
    public func addOperation(_ operation: SpindleOperation, until deadline: SpindleDeadline) throws(SpindleError) {
        let batch = [operation]
        try self.tellingHooks(batch) { () throws(SpindleError) in try self.addBounded(batch, waitUntil: deadline) }
    }

    /// `addOperation(_:until: .after(timeout))`. Zero or negative: adds only if there is room now.
    /// - Throws: as `addOperation(_:until:)`.
    public func addOperation(_ operation: SpindleOperation, timeout: Duration) throws(SpindleError) {
        try self.addOperation(operation, until: .after(timeout))
    }

    /// Adds a batch, all or none, waiting until `deadline` for room for all of it, whatever the policy.
    /// - Throws: as `addOperations`; `batchExceedsCapacity`; `queueFull` if the deadline passed first.
    public func addOperations(_ operations: [SpindleOperation], until deadline: SpindleDeadline) throws(SpindleError) {
        try self.tellingHooks(operations) { () throws(SpindleError) in
            try self.addBounded(operations, waitUntil: deadline)
        }
    }

    /// Adds `operation`, suspending the calling task (never blocking its thread) while the queue is full,
    /// whatever the policy. Producers are served in order, together with blocking ones. Callable from any task.
    /// - Throws: the errors of `addOperation` (`waitOnOwnQueue` when it would wait from the async body of one of
    ///   this queue's operations, or of one inside a group of this queue: it may hold the room it waits for);
    ///   `CancellationError` if the task was cancelled before room was
    ///   granted (nothing was added; at once if it was already cancelled). Granted before the cancellation, it
    ///   returns normally: the operation is in the queue.
    public func addOperationWhenRoom(_ operation: SpindleOperation) async throws {
        try await self.addOperationsWhenRoom([operation])
    }

    /// The batch form of `addOperationWhenRoom`: all or none, waiting until the whole batch fits.
    /// - Throws: as `addOperationWhenRoom`, and `duplicateInBatch`, `batchExceedsCapacity`.
    public func addOperationsWhenRoom(_ operations: [SpindleOperation]) async throws {
        let hooks = self.core.hookSlot.current
        hooks?.willAdd(operations, to: self)
        try await self.addOperationsWhenRoomUntold(operations)
        hooks?.didAdd(operations, to: self)
    }

    private func addOperationsWhenRoomUntold(_ operations: [SpindleOperation]) async throws {
        try Task.checkCancellation()
        // The task's own async operation of this queue (or a group of it) holds the room or slot it would wait for.
        guard let waiter = try self.beginBoundedAdd(operations, policy: .block, checkOwnQueue: true, fromTask: true)
        else { return }
        do {
            try await waiter.semaphore.wait()
        } catch {
            if let failure = self.endWait(waiter, withdraw: true) {
                if case .queueFull = failure { throw error }  // withdrawn by the cancellation
                throw failure
            }
            return
        }
        if let failure = self.endWait(waiter, withdraw: false) { throw failure }
    }

    // MARK: - Internals

    /// The bounded add path: `addOperation`/`addOperations` on a bounded queue (`deadline` nil: the queue's
    /// policy) and the timed forms (any queue).
    /// `holdingSlots`: as for `addOperationsUnchecked` (a batch wait from a running member).
    func addBounded(_ operations: [SpindleOperation], waitUntil deadline: SpindleDeadline?,
                    holdingSlots: Bool = false) throws(SpindleError) {
        let policy: SpindleFullQueuePolicy? = deadline == nil ? nil : .block
        // A wait with no end (no deadline, or `.distantFuture`) from this queue's own thread is refused: it may hold
        // the room it would wait for. A real deadline ends it anyway.
        let endless = deadline.map { $0.uptimeNanoseconds == SpindleDeadline.distantFuture.uptimeNanoseconds } ?? true
        guard let waiter = try self.beginBoundedAdd(
            operations, policy: policy, checkOwnQueue: endless, holdingSlots: holdingSlots)
        else {
            return
        }
        let granted = waiter.semaphore.wait(until: deadline ?? .distantFuture)
        if let failure = self.endWait(waiter, withdraw: !granted) { throw failure }
    }

    /// Adds `operation` without the capacity check (it counts from then on): for work that must neither wait nor
    /// be refused for room, because the call that adds it cannot wait (a task executor's job: `enqueue` may be
    /// called by any thread, the deadline thread included) or because what it serves was already admitted or is
    /// waiting with its own deadline (a condition's produced dependency: `adopt`). On an unbounded queue, the
    /// plain add. Tells the hooks.
    /// - Throws: as `addOperation`, except `queueFull` and `waitOnOwnQueue`.
    func addPastCapacity(_ operation: SpindleOperation) throws(SpindleError) {
        guard self.core.boundedHint.isBounded && !operation.isBarrier else { return try self.addOperation(operation) }
        try self.tellingHooks([operation]) { () throws(SpindleError) in
            try self.refuseIfInheritedAcrossFork()
            if let error = self.claim(operation) { throw error }
            operation.gateClaimedIfGated(on: self)  // its own conditions' dependencies go first
            guard let after = self.core.admitOne(operation) else {
                self.unclaim(operation)
                throw .queueShutDown(name: self.name)
            }
            self.core.perform(after)
            operation.gateEnqueuedIfGated()
        }
    }

    /// Claims the batch and admits it if it fits; otherwise follows `policy` (nil: the queue's): refuses, runs it
    /// on the caller, or queues a producer and returns it (the caller waits on its semaphore, then `endWait`).
    /// Returns nil when the add is complete.
    func beginBoundedAdd(_ operations: [SpindleOperation], policy: SpindleFullQueuePolicy?,
                         checkOwnQueue: Bool, fromTask: Bool = false,
                         holdingSlots: Bool = false) throws(SpindleError) -> ProducerWaiter? {
        try self.refuseIfInheritedAcrossFork()  // every bounded add comes through here (sync, timed and async)
        if operations.count > 1 {
            var seen = Set<ObjectIdentifier>()
            for op in operations where !seen.insert(ObjectIdentifier(op)).inserted {
                throw .duplicateInBatch(name: op.displayName)
            }
        }
        let core = self.core
        core.lockAndAdmit()
        guard core.lifecycle.acceptsWork else {
            core.lock.unlock()
            throw .queueShutDown(name: self.name)
        }
        if operations.isEmpty {  // nothing to fit: never waits behind producers, never refused for room
            core.lock.unlock()
            return nil
        }
        var claimed = 0
        for op in operations {
            if let error = self.claim(op) {
                core.lock.unlock()  // then the undo: `unclaim` drops outstanding counts, never under the lock
                for op in operations[0..<claimed] { self.unclaim(op) }
                throw error
            }
            claimed += 1
        }
        let mayWait = {
            !(checkOwnQueue && (fromTask ? self.isOwnQueueOfCallingTask : self.isOnlyThreadThatCouldServeLocked))
        }
        // Conditions produce their dependencies (which join past the capacity) only for an add that will be admitted
        // or wait: one refused now leaves nothing behind (a refused retry loop would grow a full queue).
        if !core.admission.refusesAtOnce(count: operations.count, counted: core.countedMembersLocked, policy: policy,
                                         mayWait: mayWait) {
            try self.produceGateDependenciesLocked(operations)
        }
        // A batch wait from a running member: a barrier pending now (perhaps added by its conditions, unlocked
        // meanwhile) would hold the batch behind it, and it waits for the caller.
        if holdingSlots && core.barriers.holdsAdds {
            core.lock.unlock()
            for op in operations { self.unclaim(op) }
            throw .waitOnOwnQueue(name: self.name)
        }
        var looked: [SpindleOperation] = []  // the dependencies `canRunOnCaller` saw, released after the unlock
        let (decision, waiter, after) = core.boundedAddClaimedUnlocking(
            operations, policy: policy, canRunOnCaller: { self.canRunOnCaller(operations, keeping: &looked) },
            mayWait: mayWait)
        looked = []
        core.perform(after)
        switch decision {
        case .admit:
            for op in operations { op.gateEnqueuedIfGated() }
            return nil
        case .wait:
            return waiter
        case .runOnCaller:
            for op in operations { self.unclaim(op) }
            SpindleOperationQueue.runOnCaller(operations, hooks: self.hooksForCallerRuns(operations), of: self)
            return nil
        case .refuse(let error):
            for op in operations { self.unclaim(op) }
            throw error
        }
    }

    /// After a producer's wait: nil if its operations were added; else the error to throw (`queueFull` when it
    /// withdrew, having waited in vain), its operations given back.
    func endWait(_ waiter: ProducerWaiter, withdraw: Bool) -> SpindleError? {
        let (outcome, name, capacity, after) = self.core.producerWaitEnded(waiter, withdraw: withdraw)
        self.core.perform(after)
        switch outcome {
        case .granted:
            for op in waiter.operations { op.gateEnqueuedIfGated() }
            return nil
        case .refused(let error):
            for op in waiter.operations { self.unclaim(op) }
            return error
        case .withdrawn, .waiting:
            for op in waiter.operations { self.unclaim(op) }
            return .queueFull(name: name, capacity: capacity)
        }
    }

    /// Whether the calling thread runs one of this queue's operations (its `main` or its completion block), or an
    /// operation inside a `SpindleGroupOperation` of this queue (at any depth): it may hold the slot or the room it
    /// would wait for (a group holds its slot until its children are through).
    var isOwnQueueOfCallingThread: Bool {
        // A queue served by a run loop (the main queue): the loop's thread is its one worker, in or out of an operation.
        if let loop = self.core.servingRunLoop, loop.isOwnedByCurrentThread { return true }
        let context = ThreadContext.current
        if context.queue === self || context.completingQueue === self { return true }
        return self.isOwnQueue(of: context.operation) || self.isOwnQueue(of: context.completing)
    }

    /// Whether a wait here could never end because the calling thread is the only one that could end it: it runs
    /// one of this queue's operations (`isOwnQueueOfCallingThread`), or it is the worker of a queue of width 1 with
    /// threads of its own, running user code outside any operation (a deinit of what it released): that queue has
    /// no other thread to make room or run an operation meanwhile. (A worker of a wider queue, or a pool thread,
    /// whose wait the pool sees, may wait: another thread can.)
    var isOnlyThreadThatCouldServe: Bool { self.isOwnQueueOfCallingThread || self.isLoneWorkerOutsideOperations }

    /// The calling thread is the worker of this width-1 queue with threads of its own, outside any operation.
    var isLoneWorkerOutsideOperations: Bool {
        self.isOwnWorkerOutsideOperations && self.core.lock.withLock { self.core.slots.limit } == 1
    }

    /// `isOnlyThreadThatCouldServe`, for a caller that holds the queue's lock.
    var isOnlyThreadThatCouldServeLocked: Bool {
        if self.isOwnQueueOfCallingThread { return true }
        return self.isOwnWorkerOutsideOperations && self.core.slots.limit == 1
    }

    /// The calling thread is a worker of this queue (its own threads, not a pool's) outside any operation.
    private var isOwnWorkerOutsideOperations: Bool {
        let context = ThreadContext.current
        return context.workerOf === self.core && context.queue !== self && self.core.pool == nil
    }

    /// Whether the calling task runs the body of one of this queue's async operations, or of one inside a
    /// `SpindleGroupOperation` of this queue (at any depth): as `isOwnQueueOfCallingThread`, for the async waits
    /// (which suspend the task, so what its thread runs does not matter).
    var isOwnQueueOfCallingTask: Bool { self.isOwnQueue(of: SpindleAsyncOperation.running) }

    /// Whether `op` is one of this queue's operations, or inside a group of this queue (at any depth).
    func isOwnQueue(of op: SpindleOperation?) -> Bool {
        guard let op else { return false }
        if op.owningQueue === self { return true }
        guard let parent = op.parentGroup else { return false }
        return parent.owningQueue === self || parent.enclosingGroups.contains(where: { $0.owningQueue === self })
    }

    /// Whether the calling thread runs an operation inside a group of this queue (see `isOwnQueueOfCallingThread`):
    /// a batch wait there holds the group's slot, as one from the queue's own operation holds its own.
    /// The members of this queue whose slots the calling thread holds, by address (empty if none): the operation
    /// this queue's worker is starting or running here (also on a block operation's helper threads, and inside an
    /// operation started by hand from it), or a member running on a thread of its own (a concurrent operation), or
    /// the member group this thread's operation is inside; and, besides, a member whose completion block runs here
    /// (its slot is held until the block returns, also when a worker runs it for another member). A batch wait from
    /// such a thread holds those slots while it waits.
    var slotsHeldByCallingThread: [UInt] {
        let context = ThreadContext.current
        func address(_ op: SpindleOperation) -> UInt { UInt(bitPattern: Unmanaged.passUnretained(op).toOpaque()) }
        var slots: [UInt] = []
        if context.queue === self {
            // Its worker (or a helper of the operation it runs); before `start()` (its `willStart` hook) the slot
            // is the one this thread's take holds, keyed by the thread.
            slots.append(UInt(bitPattern: context.starting ?? Unmanaged.passUnretained(context).toOpaque()))
        } else if let op = context.operation, op.owningQueue === self {
            slots.append(address(op))
        } else {
            for running in [context.operation, context.completing] {
                guard let running, let parent = running.parentGroup else { continue }
                if parent.owningQueue === self {
                    slots.append(address(parent))
                    break
                }
                if let outer = parent.enclosingGroups.first(where: { $0.owningQueue === self }) {
                    slots.append(address(outer))
                    break
                }
            }
        }
        if let op = context.completing, context.completingQueue === self, !slots.contains(address(op)) {
            slots.append(address(op))
        }
        return slots
    }

    /// Whether the batch can run on the calling thread in its order: no operation waits for an unfinished later
    /// one of the batch, and none has an unfinished dependency at all if this thread runs an operation (its
    /// `main`, started by a queue or by hand, its completion block, or an async operation's body). Such a thread
    /// may hold what a dependency needs (the slot of a width-1 queue the dependency waits in, the group it runs
    /// in, or it is the dependency): waiting for it here could never end, and which of these it is cannot be told
    /// without walking every queue's slots, so it is refused. Asked by `Admission.decide`, under the queue's lock
    /// (it takes the operations' locks, which come after it). The dependencies it looked at go into `kept`, for the
    /// caller to release after unlocking: one removed meanwhile by another thread may be held by nothing else, and
    /// its deinit is user code.
    private func canRunOnCaller(_ operations: [SpindleOperation], keeping kept: inout [SpindleOperation]) -> Bool {
        // Added while a barrier is pending, they may start only after it has run, and not beside it.
        if self.core.barriers.holdsAdds { return false }
        let context = ThreadContext.current
        let runsAnOperation = context.operation != nil || context.completing != nil
            || SpindleAsyncOperation.running.map { !$0.isFinished } == true
        for (i, op) in operations.enumerated() {
            if op.currentState.isGated { return false }  // only a queue runs it (`gatedOperationNeedsQueue`)
            // Finished is enough: what is left of a finished dependency (its completion block, its queue's
            // bookkeeping) needs no slot, so waiting for it to settle ends.
            let dependencies = op.dependencies
            kept.append(contentsOf: dependencies)
            for dependency in dependencies where !dependency.currentState.isSettled && !dependency.isFinished {
                if runsAnOperation { return false }
                if operations[i...].contains(where: { $0 === dependency }) { return false }
            }
        }
        return true
    }

    /// Runs each operation on this thread, in order, once its dependencies have finished (caller-runs), telling
    /// `hooks` of each start (their finishes are observed: `hooksForCallerRuns`).
    private static func runOnCaller(_ operations: [SpindleOperation], hooks: QueueHookBox?,
                                    of queue: SpindleOperationQueue) {
        for op in operations {
            var told = false
            while true {
                // Settled, not just finished: its dependents have been released by then. A wait this thread may
                // not make (a dependency added meanwhile, by another thread, on what this thread runs) would
                // never end: the operation is cancelled instead, so it finishes unrun rather than spinning.
                var waited = true
                for dependency in op.dependencies {
                    do { _ = try dependency.waitUntilFinished() } catch { waited = false }
                }
                if !waited { op.cancel() }
                if let hooks, !told {
                    told = true
                    hooks.willStart(op, on: queue)
                }
                do {
                    try op.start()
                } catch SpindleError.operationNotReady(_) {
                    continue  // a dependency was added meanwhile: wait for it too
                } catch {
                    // Someone else started it meanwhile: it runs there.
                }
                break
            }
        }
    }
}
