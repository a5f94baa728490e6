import CShim

/// The worker side of `QueueCore`: deciding whom to wake, the workers' loop, and the run-loop-served variant.
///
/// A worker is in one of three states (all transitions under `lock`, counted in `idle`; see `IdleWorkers`):
/// - BUSY: it took an operation (`running += 1`) and runs it outside the lock, then the operations it reserved
///   with it, if any (see `FastPath/Reservations`), in the same slot;
/// - SPINNING (`idle.spinning`, at most one worker): it found nothing to run and its `SpinPolicy` expects work
///   within the spin window, so it polls `pushes` and the inbox without the lock for up to that window (8 µs),
///   which saves a park and a wake when work comes that soon. While a worker spins, events wake nobody: the
///   spinner takes the work and wakes the next worker itself if more is ready. It always looks again under the
///   lock before parking, so no push is missed. At light load the policy is COLD and workers park at once;
/// - PARKED (`idle.parked`): asleep on its own `ThreadParker`, in `idle`'s idle line until a wake decision takes
///   it (first parked, first woken); `idle.wakeupsInFlight` counts the ones taken and not yet back.
/// A worker with nothing runnable first takes back other workers' unclaimed reservations, if a slot is free.
/// BUSY → SPINNING (nothing runnable, the policy says spin, nobody else spins, and it did not spin yet in this idle
/// spell or since its last wakeup) → BUSY (work arrived) or PARKED (window spent, still nothing) → BUSY
/// (signalled) … → exit when `shuttingDown`. Each worker's own `WorkerState` times its idle spells for its policy.
///
/// Finishing on a worker: a synchronous operation that finishes on the worker running it defers its queue
/// bookkeeping (`ThreadContext.deferrable`) to the worker, which does it under the same lock acquisition that
/// takes the next operation, then releases the finished operation's waiters before running the next one. One
/// lock round trip per operation instead of two (per batch, with reservations); the order (bookkeeping, then
/// waiters) is unchanged.
extension QueueCore {
    typealias WakeAction = IdleWorkers.WakeAction

    /// A worker drops finished operations from `outstanding` in batches of this many (and before it parks), so
    /// the adding thread keeps that counter's cache line to itself.
    static let dropBatch = 256

    var canDispatchLocked: Bool { self.slots.canDispatch(ready: self.ready.count) }

    /// Decides how to get one more operation running: wake a parked worker, start a thread, or nothing (also when
    /// a worker is spinning: it will take the work). Caller holds `lock`; it performs the action after unlocking.
    @inline(__always)
    func wakeOrSpawnLocked() -> WakeAction {
        let action = self.idle.wakeOrSpawn(
            canDispatch: self.canDispatchLocked, shuttingDown: self.shuttingDown,
            wanted: self.slots.running + self.ready.count, limit: self.slots.limit)
        if action != .none {
            if case .signal(let parker) = action { parker.signalledAt = cshim_clock_monotonic_ns() }
            self.publishIdleLocked()  // fewer unsignalled parked workers, or fewer threads to start
        }
        return action
    }

    /// Wake or spawn as many workers as there are operations that could start now. Caller holds `lock`; it
    /// performs the plan after unlocking. Allocates nothing.
    func collectWakeActionsLocked() -> IdleWorkers.WakePlan {
        var plan = IdleWorkers.WakePlan()
        let room = self.slots.room(ready: self.ready.count)
        for _ in 0..<room {
            let action = self.wakeOrSpawnLocked()
            if action == .none { break }
            plan.add(action)
        }
        return plan
    }

    @inline(__always)
    func perform(_ action: WakeAction) {
        switch action {
        case .none: return
        case .signal(let parker): parker.unpark()
        case .spawn(let index): self.spawnWorker(index)
        case .performOnRunLoop: self.servingRunLoop!.perform(inModes: [.common]) { [self] in self.serveFromRunLoop() }
        }
    }

    func perform(_ plan: IdleWorkers.WakePlan) {
        plan.unparkAll()
        for index in plan.firstSpawn..<(plan.firstSpawn + plan.spawns) { self.spawnWorker(index) }
        if plan.performOnRunLoop { self.perform(.performOnRunLoop) }
    }

    /// The worker's life (see the states above). "Do not rename": profilers match on it.
    ///
    /// References to operations are dropped outside the lock: releasing one may free user objects (and even this
    /// queue's handle), which must never happen under our lock. The operation being run is held through the
    /// queue's own reference, handed over by `takeNextLocked` (see `QueueCore`, "References").
    func workerLoop() {
        let context = ThreadContext.current
        context.workerOf = self
        let reservation = Reservation()
        // Bookkeeping done, waiters not yet released; owned. A chain through `nextLink` after a batch.
        var finished: Unmanaged<SpindleOperation>? = nil
        var drops = 0  // operations through the bookkeeping here, not yet dropped from `outstanding`
        var drainWaiters: [SpindleSemaphore]? = nil  // async queue waiters to signal with `finished`'s waiters
        var dropped: Unmanaged<SpindleOperation>? = nil  // a reference to release once unlocked
        var state = WorkerState()
        let parker = ThreadParker()
        self.lock.lock()
        self.reservations.append(reservation)
        while !self.shuttingDown {
            self.drainInboxLocked()
            if self.canDispatchLocked {
                // BUSY
                let op = self.takeNextLocked()  // the queue's reference is ours now
                self.reserveLocked(reservation)
                let chained = self.wakeOrSpawnLocked()
                self.lock.unlock()
                self.perform(chained)
                state.gotWork()
                self.releaseFinished(&finished, &drainWaiters, &dropped)
                if drops >= QueueCore.dropBatch {
                    self.dropOutstanding(drops)  // never the last: this worker's operation is outstanding
                    drops = 0
                }
                context.queue = self.handle
                let deferredFinish = self.runOnWorker(op, context)
                var doneHead: Unmanaged<SpindleOperation>? = nil
                var doneTail: Unmanaged<SpindleOperation>? = nil
                while let next = self.claimReserved(reservation) {
                    let done = self.runOnWorker(next, context)
                    precondition(done, "QueueCore: a reserved block operation did not finish on its worker")
                    if let tail = doneTail { tail._withUnsafeGuaranteedRef { $0.nextLink = next } } else {
                        doneHead = next
                    }
                    doneTail = next
                }
                context.queue = nil
                self.lock.lock()
                self.settleReservationLocked(reservation)
                if deferredFinish {
                    // It finished here and left us its queue bookkeeping.
                    drainWaiters = op._withUnsafeGuaranteedRef { self.unlinkFinishedLocked($0).wake }
                    finished = op
                    drops += 1
                } else {
                    // Still running (a concurrent operation): give the reference back to the member list; or it
                    // already finished elsewhere and was unlinked: drop it.
                    let member = op._withUnsafeGuaranteedRef { QueueCore.handBackLocked($0) }
                    if !member { dropped = op }
                }
                if let doneHead {
                    var node: Unmanaged<SpindleOperation>? = doneHead
                    while let link = node {
                        let wake = link._withUnsafeGuaranteedRef { x -> [SpindleSemaphore]? in
                            node = x.nextLink
                            return self.unlinkFinishedLocked(x, freesSlot: false).wake
                        }
                        if let wake { drainWaiters = (drainWaiters ?? []) + wake }
                        drops += 1
                    }
                    if let first = finished {
                        first._withUnsafeGuaranteedRef { $0.nextLink = doneHead }
                    } else {
                        finished = doneHead
                    }
                }
                continue
            }
            if self.slots.hasFreeSlot && self.reclaimReservationsLocked() {
                continue  // another worker's reserved operations are back in the buckets: run them
            }
            if finished != nil || dropped != nil {
                self.lock.unlock()
                self.releaseFinished(&finished, &drainWaiters, &dropped)
                self.lock.lock()
                continue
            }
            state.wentIdle()
            if state.maySpin && state.policy.budgetNanos > 0 && self.idle.beginSpin() {
                // SPINNING
                state.maySpin = false
                self.publishIdleLocked()
                let seen = self.pushes.current
                self.lock.unlock()
                // Yielding: the thread that will bring the work may be waiting for this very CPU (2 cores: an adder
                // and two workers).
                let caught = SpinPolicy.spin(
                    from: cshim_clock_monotonic_ns(), budget: state.policy.budgetNanos, yielding: true
                ) { self.pushes.current != seen || self.inbox.mayHoldWork } == .seen
                self.lock.lock()
                self.idle.endSpin()
                self.publishIdleLocked()
                if !caught { state.policy.spinMissed() }
                continue  // look again under the lock before parking
            }
            if drops > 0 {
                // About to park: settle the count first (this may release the handle and shut the queue down from
                // here, which `shutdown` handles; the loop then sees `shuttingDown`).
                self.lock.unlock()
                self.dropOutstanding(drops)
                drops = 0
                self.lock.lock()
                continue
            }
            // PARKED: advertise, then look at the inbox once more (a push that missed the advertisement is seen
            // here), then sleep until popped and unparked. A spurious return finds itself still in the idle line,
            // leaves it, and looks for work again.
            self.idle.parking(parker)
            self.publishIdleLocked()
            if self.inbox.isEmpty {
                self.lock.unlock()
                parker.park()
                self.lock.lock()
            }
            let signalled = self.idle.unparked(parker)
            self.publishIdleLocked()
            state.woke(workArrivedAt: signalled ? parker.signalledAt : 0)
        }
        self.reservations.removeAll { $0 === reservation }
        self.lock.unlock()
        self.releaseFinished(&finished, &drainWaiters, &dropped)
        if drops > 0 { self.dropOutstanding(drops) }
        context.workerOf = nil
    }

    /// After a deferred finish's bookkeeping, outside the lock: wake its waiters, then the queue's async drain
    /// waiters, and drop the references.
    @inline(__always)
    private func releaseFinished(
        _ finished: inout Unmanaged<SpindleOperation>?, _ drainWaiters: inout [SpindleSemaphore]?,
        _ dropped: inout Unmanaged<SpindleOperation>?
    ) {
        while let op = finished {
            finished = op._withUnsafeGuaranteedRef { op in
                let next = op.nextLink
                op.nextLink = nil
                op.releaseWaiters()
                return next
            }
            op.release()
        }
        if let waiters = drainWaiters {
            drainWaiters = nil
            for waiter in waiters { waiter.signal() }
        }
        if let op = dropped {
            dropped = nil
            op.release()
        }
    }

    /// Runs `op` on this worker; returns whether it finished here (leaving its queue bookkeeping to the worker).
    @inline(__always)
    private func runOnWorker(_ op: Unmanaged<SpindleOperation>, _ context: ThreadContext) -> Bool {
        context.deferrable = op.toOpaque()
        op._withUnsafeGuaranteedRef { self.run($0) }
        context.deferrable = nil
        let deferredFinish = context.deferredFinish
        context.deferredFinish = false
        return deferredFinish
    }

    /// Pops the best ready operation, moves it to `dispatching` and takes a slot; the queue's reference to it
    /// passes to the caller. Caller holds `lock` and has checked `canDispatchLocked`.
    private func takeNextLocked() -> Unmanaged<SpindleOperation> {
        let link = self.ready.popHighest()!
        self.stats.noteRunning(self.slots.take())
        link._withUnsafeGuaranteedRef { op in
            op.placement.move(to: .taken)
            if op.isTimed { self.recordWaitLocked(op) }
            QueueCore.markDispatching(op)
        }
        return link
    }

    /// A worker's `start()` of `op` returned while `op` still executes (a concurrent operation): if it is still a
    /// member, the member list gets the queue's reference back (`taken` → `handedBack`) and this returns true; if it
    /// already finished elsewhere and was unlinked, the caller still owns the reference and must drop it after
    /// unlocking. Caller holds `lock`.
    @inline(__always)
    static func handBackLocked(_ op: SpindleOperation) -> Bool {
        guard op.placement == .taken else { return false }
        op.placement.move(to: .handedBack)
        return true
    }

    /// `enqueued` → `dispatching`, by whoever took the operation (from a bucket, or from its own reservation).
    @inline(__always)
    static func markDispatching(_ op: SpindleOperation) {
        _ = op.advanceState { $0.dispatching() }
    }

    /// Runs on the serving run loop's thread: dispatch one operation, then schedule the next perform if more work
    /// may start (one operation per perform, so the loop's other sources get their turn in between).
    private func serveFromRunLoop() {
        let context = ThreadContext.current
        self.lock.lock()
        self.idle.performRan()
        if self.canDispatchLocked {
            self.dispatchOneUnlocking(context)
            self.lock.lock()
        }
        let next = self.wakeOrSpawnLocked()
        self.lock.unlock()
        self.perform(next)
    }

    /// Takes the best ready operation (caller holds `lock`, which this releases) and runs it, then settles the
    /// queue's reference to it (see `QueueCore`, "References"): the finish path's `operationDidFinish` already
    /// unlinked it if it finished, and the reference is dropped; if it still runs, the member list gets it back.
    @inline(never)
    private func dispatchOneUnlocking(_ context: ThreadContext) {
        let op = self.takeNextLocked()
        let chained = self.wakeOrSpawnLocked()
        self.lock.unlock()
        self.perform(chained)
        let outer = context.queue
        context.queue = self.handle
        op._withUnsafeGuaranteedRef { self.run($0) }
        context.queue = outer
        let member = self.lock.withLock { op._withUnsafeGuaranteedRef { QueueCore.handBackLocked($0) } }
        if !member { op.release() }
    }

    /// Starts one operation. A `start()` that throws without the operation ever executing (a custom `start` gone
    /// wrong) finishes it cancelled with that error, so its slot is never lost.
    private func run(_ op: SpindleOperation) {
        do {
            try op.start()
        } catch {
            if op.currentState.lifecycle == .dispatching {
                op.cancel()
                op.completeExecution(error: error)
            }
        }
    }
}
