/// The queue's events. Each takes the lock, calls the units in numbered steps, releases the lock and returns one
/// `AfterUnlock` saying what is left to do; the caller hands it to `perform(_:)` (in `QueueCore+Wake`), which
/// runs it in the one order `AfterUnlock` documents (wake, finished operations' waiters, semaphores, references,
/// `outstanding`). No event allocates on the hot path, signals, spawns, drops a reference or runs user code under
/// the lock.
///
/// Every event's first step admits the inbox (`lockAndAdmit`), so it sees every operation added before it; in
/// debug builds that step also checks the cross-unit invariants (`checkInvariantsLocked`).
///
/// Events here: an add that needs a wake, an add under the lock (barrier, run-loop-served queue, batch), a bounded
/// add, an operation became ready, a member finished off its worker, its priority changed, width, suspension and capacity
/// changed, a blocked producer gave up, a thread failed to start or is retried. The lifecycle's events (shutdown, a worker
/// leaving, termination waits) are in `QueueCore+Lifecycle`. The worker's own events
/// (take, its batch finished, idle) are in `QueueCore+Workers`, using the same `AfterUnlock` and `perform`.
extension QueueCore {
    typealias WakeAction = IdleWorkers.WakeAction

    // MARK: - Adds

    /// An add pushed on the inbox and `IdleHints` said a parked worker must be woken or a thread started. A wake is
    /// all it can leave to do, so it returns just that (`perform(_: WakeAction)`, step 1 alone): an `AfterUnlock`
    /// built and destroyed on every such add cost about 130 instructions (callgrind, BENCHMARKS.md).
    @inline(__always)
    func pushedToInbox() -> WakeAction {
        self.lockAndAdmit()  // 1. admit the inbox, the push among it
        let wake = self.wakeOrSpawnLocked()  // 2. whom to wake
        self.lock.unlock()
        return wake
    }

    /// A claimed barrier, or an add to a run-loop-served queue: admitted under the lock, after everything added
    /// before it. Takes over the caller's claim; the queue's reference is retained here. Returns nil, having
    /// admitted nothing, if the queue was shut down (the caller gives the operation back).
    func admitOne(_ operation: SpindleOperation) -> AfterUnlock? {
        var after = AfterUnlock()
        self.lockAndAdmit()  // 1. admit the inbox: everything added before
        guard self.lifecycle.acceptsWork else {
            self.lock.unlock()
            return nil
        }
        let link = Unmanaged.passRetained(operation)  // the queue's reference (see "References")
        self.admitLocked(link)  // 2. member list and barrier gate
        self.scheduleAdmittedLocked(link)  // 3. into its bucket, if ready
        self.noteMembersLocked()  // 4. statistics
        after.wake.add(self.wakeOrSpawnLocked())  // 5. whom to wake
        self.lock.unlock()
        return after
    }

    /// A batch the caller claimed under the lock (all linked before any is scheduled): admit it, decide the wakes,
    /// and unlock.
    func admitClaimedBatchUnlocking(_ operations: [SpindleOperation]) -> AfterUnlock {
        var after = AfterUnlock()
        self.admitBatchLocked(operations)  // 1. member list, gate, buckets, statistics
        after.wake = self.collectWakeActionsLocked()  // 2. one wake per operation that can start now
        self.lock.unlock()
        return after
    }

    /// A bounded add whose operations the caller claimed under the lock (after `lockAndAdmit`): `Admission`
    /// decides; the batch is admitted, or a producer joins the line (returned: the caller waits on it), or the
    /// refusal or the run on the caller is counted. Unlocks. The caller gives back (unclaims) the operations of an
    /// add that was refused or runs on the caller.
    func boundedAddClaimedUnlocking(
        _ operations: [SpindleOperation], policy: SpindleFullQueuePolicy?,
        canRunOnCaller: () -> Bool, mayWait: () -> Bool
    ) -> (decision: Admission.AddDecision, waiter: ProducerWaiter?, after: AfterUnlock) {
        var after = AfterUnlock()
        var waiter: ProducerWaiter? = nil
        let decision = self.admission.decide(  // 1. what the add does
            count: operations.count, counted: self.countedMembersLocked, policy: policy, queueName: self.name,
            canRunOnCaller: canRunOnCaller, mayWait: mayWait)
        switch decision {  // 2. do it
        case .admit:
            self.admitBatchLocked(operations)
            after.wake = self.collectWakeActionsLocked()  // 3. one wake per operation that can start now
        case .wait:
            waiter = ProducerWaiter(operations)
            self.admission.enqueue(waiter!)
        case .runOnCaller:
            self.stats.recordRanOnCaller(operations.count)
        case .refuse(.batchExceedsCapacity):
            break  // could never fit: a misuse, not a full queue, so not counted as rejected
        case .refuse:
            self.stats.recordRejected()
        }
        self.lock.unlock()
        return (decision, waiter, after)
    }

    // MARK: - Events from operations

    /// An enqueued operation became ready and claimed its scheduled bit (from any thread).
    ///
    /// `selfServe`: the caller is finishing, on the worker that ran it, an operation this one depended on, and that
    /// worker goes back to the lock right after. If it is one of this queue's workers, the operation is left for it:
    /// nobody is woken and a spinning worker is not told (waking another core for work this one is about to take
    /// costs more than the work). Returns whether that happened.
    @discardableResult
    func scheduleReady(_ op: SpindleOperation, selfServe: Bool = false) -> Bool {
        let serve = selfServe && ThreadContext.withCurrent { $0.workerOf === self }
        var wake = WakeAction.none  // a wake is all it can leave to do (see `pushedToInbox`)
        self.lockAndAdmit()  // 1. admit the inbox
        self.pushLocked(Unmanaged.passUnretained(op), announce: !serve)  // 2. into its bucket
        if !serve { wake = self.wakeOrSpawnLocked() }  // 3. whom to wake
        self.lock.unlock()
        self.perform(wake)
        return serve
    }

    /// A member finished (called by its finish path, after its completion block and dependents, before its
    /// waiters are released), on a thread that is not running it as this queue's worker.
    func operationDidFinish(_ op: SpindleOperation) {
        var after = AfterUnlock()
        self.lock.lock()
        let dropsReference = self.unlinkFinishedLocked(op, into: &after)  // 1. the finish bookkeeping
        if dropsReference { after.dropped = Unmanaged.passUnretained(op) }  // the caller still holds one
        self.reclaimForFreeSlotLocked()  // its slot is free: reserved operations may take it
        after.wake.add(self.wakeOrSpawnLocked())  // 2. whom to wake
        after.outstandingDrops = 1  // last: the handle (and this core) may go away there
        self.lock.unlock()
        self.perform(&after)
    }

    /// A member's priority changed: if it waits in a bucket, move it (to the back of its new level); if it is
    /// reserved, every reservation goes back to the buckets first (so the next free slot, on any worker, sees its
    /// new level), and a worker is woken if a slot is free for what came back.
    func priorityChanged(_ op: SpindleOperation) {
        var after = AfterUnlock()
        self.lock.lock()
        if op.placement == .reserved && self.reclaimReservationsLocked() {
            after.wake.add(self.wakeOrSpawnLocked())
        }
        if op.placement == .ready && !op.isBarrier {
            let link = Unmanaged.passUnretained(op)
            self.ready.remove(link)
            op.placement.move(to: .pending)
            self.pushLocked(link)
        }
        self.lock.unlock()
        self.perform(&after)
    }

    /// A dependency is being added to `op`, a member this queue found ready (`scheduled`) that no worker has taken:
    /// if it waits in a bucket (reservations are given back first; a reserved one may have been claimed
    /// meanwhile) or behind a barrier, `count` decides (it runs under this lock: the upstream's lock, and the state
    /// word's move back to waiting), and a counted one leaves its bucket. It is pushed again when its count reaches
    /// zero, or on a cancel; one held behind a barrier stays held, and the barrier's release no longer pushes it
    /// (`releaseHeldLocked` pushes only scheduled ones). Returns whether it was counted. Wakes nobody.
    func holdBackReady(_ op: SpindleOperation, counting count: () -> Bool) -> Bool {
        self.lockAndAdmit()
        defer { self.lock.unlock() }
        if op.placement == .reserved { _ = self.reclaimReservationsLocked() }
        guard op.placement == .ready || op.placement == .held, !op.isBarrier, count() else { return false }
        if op.placement == .ready {
            let link = Unmanaged.passUnretained(op)
            self.ready.remove(link)
            op.placement.move(to: .pending)
        }
        return true
    }

    /// A task starts awaiting the drain: registers `semaphore` unless the queue is empty already (then returns
    /// false: nothing to await).
    func asyncDrainWaitBegan(_ semaphore: SpindleSemaphore) -> Bool {
        self.withAdmittedLock {  // 1. admit the inbox: its operations count
            if self.members.count == 0 { return false }
            self.asyncDrainWaiters.add(semaphore)  // 2. signalled by the finish that drains the queue
            return true
        }
    }

    /// The awaiting task was cancelled: withdraws `semaphore` (a no-op if the drain took it meanwhile).
    func asyncDrainWaitCancelled(_ semaphore: SpindleSemaphore) {
        self.lock.withLock { self.asyncDrainWaiters.withdraw(semaphore) }
    }

    // MARK: - Settings

    /// The width changed (`setMaxConcurrentOperationCount`).
    func widthChanged(requested: Int) -> AfterUnlock {
        var after = AfterUnlock()
        self.lockAndAdmit()  // 1. admit the inbox
        self.slots.setWidth(requested: requested, resolved: QueueCore.resolve(requested))  // 2. the slots
        self.invalidateReservations()  // 3. reserved operations give way, and come back if a slot is free
        self.reclaimForFreeSlotLocked()
        self.publishIdleLocked()  // 4. adding threads see whether a thread may start
        self.drainInboxLocked()  // 5. adds that saw the old hint (no thread to start) left their operations here
        after.wake = self.collectWakeActionsLocked()  // 6. one wake per operation that can start now
        self.lock.unlock()
        return after
    }

    /// The queue was suspended or resumed (`isSuspended`).
    func suspensionChanged(to suspended: Bool) -> AfterUnlock {
        var after = AfterUnlock()
        self.lockAndAdmit()  // 1. admit the inbox
        // 2. the slots (a shut-down queue is not suspended again: what it accepted must run or finish cancelled)
        if !(suspended && self.lifecycle.isShutDown) { self.slots.setSuspended(suspended) }
        self.invalidateReservations()  // 3. reserved operations give way
        if !suspended {  // 4. resuming: reserved operations come back if a slot is free, then whom to wake
            self.reclaimForFreeSlotLocked()
            after.wake = self.collectWakeActionsLocked()
        }
        self.lock.unlock()
        return after
    }

    /// The capacity or the full-queue policy changed (`setCapacity`).
    func capacityChanged(to capacity: Int?, policy: SpindleFullQueuePolicy?) -> AfterUnlock {
        var after = AfterUnlock()
        self.lockAndAdmit()  // 1. admit the inbox
        self.admission.set(capacity: capacity, policy: policy)  // 2. the settings and their lock-free hint
        self.boundedHint.set(capacity != nil)
        after.addSemaphores(self.grantProducersLocked(refusingOversized: true))  // 3. blocked producers that fit
        after.wake = self.collectWakeActionsLocked()  // 4. whom to wake for what they added
        self.lock.unlock()
        return after
    }

    /// A blocked producer's wait ended; `withdraw`: it gave up (deadline or task cancellation) and leaves the line
    /// unless its outcome was decided meanwhile (granted or refused: that outcome stands).
    func producerWaitEnded(_ waiter: ProducerWaiter, withdraw: Bool) -> (
        outcome: ProducerWaiter.Outcome, name: String, capacity: Int, after: AfterUnlock
    ) {
        var after = AfterUnlock()
        self.lock.lock()
        if withdraw, case .waiting = waiter.outcome {
            self.admission.withdraw(waiter)  // 1. out of the line
            self.stats.recordRejected()
            after.addSemaphores(self.grantProducersLocked())  // 2. the producers behind it, if they fit now
            after.wake = self.collectWakeActionsLocked()  // 3. whom to wake for what they added
        }
        let outcome = waiter.outcome, name = self.name, capacity = self.admission.capacity ?? 0
        self.lock.unlock()
        return (outcome, name, capacity, after)
    }

    // MARK: - Threads

    /// A thread failed to start (see `QueueCore+Spawning`). Returns the retry's backoff.
    func spawnFailed() -> (after: AfterUnlock, retryDelay: UInt64) {
        var after = AfterUnlock()
        self.lock.lock()
        let delay = self.idle.threadFailedToStart()  // 1. free the place, retry pending, the backoff
        self.drainInboxLocked()  // 2. admit what was added meanwhile
        after.wake = self.collectWakeActionsLocked()  // 3. parked workers take what can start now
        self.publishIdleLocked()  // 4. adding threads see that no thread may start until the retry
        self.terminateIfDoneLocked(&after)  // 5. a stopping queue waited for this start
        self.lock.unlock()
        return (after, delay)
    }

    /// The timer's retry of a failed thread start (on the timer thread).
    func spawnRetried() -> AfterUnlock {
        var after = AfterUnlock()
        self.lock.lock()
        self.idle.retryStarted()  // 1. threads may start again
        self.publishIdleLocked()  // 2. first: a later add sees that a thread may start and locks, or we see its push
        self.drainInboxLocked()  // 3. admit the inbox
        self.reclaimForFreeSlotLocked()  // and reserved operations count for the slots a thread may now serve
        after.wake = self.collectWakeActionsLocked()  // 4. whom to wake or start
        self.publishIdleLocked()  // 5. the places just reserved
        self.lock.unlock()
        return after
    }
}
