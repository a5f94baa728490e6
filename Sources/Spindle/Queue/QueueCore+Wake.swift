import CShim

/// The wake decision and the one place an event's `AfterUnlock` is carried out. The events (`QueueCore+Events`)
/// and the worker's own steps (`QueueCore+Workers`) call `wakeOrSpawnLocked` / `collectWakeActionsLocked` under the
/// lock, where `IdleWorkers` decides; they hand what is left to `perform(_:)` after unlocking, which runs it in
/// `AfterUnlock`'s order: (1) the wake (unpark, spawn, the run loop's perform), (2) the finished operations'
/// waiters, then their references, (3) semaphores, (4) a dropped reference, (5) `outstanding`, last, since the
/// handle (and this core) may go away there.
extension QueueCore {
    // MARK: - The wake decision

    /// Decides how to get one more operation running: wake a parked worker, start a thread, or nothing (also when
    /// a worker spins or a woken one is on its way: it will take the work, and decide again for what is left; see
    /// `IdleWorkers.wakeOrSpawn`, the hand-off rule). `inFlightBelow`: 1 for one event's operation, more for a
    /// batch. Caller holds `lock`.
    @inline(__always)
    func wakeOrSpawnLocked(inFlightBelow: Int = 1) -> WakeAction {
        let action = self.idle.wakeOrSpawn(
            canDispatch: self.canDispatchLocked, shuttingDown: self.shuttingDown,
            wanted: self.slots.running + self.ready.count, limit: self.slots.limit, running: self.slots.running,
            inFlightBelow: inFlightBelow, wakerCPU: self.idle.idleCount > 1 ? cshim_current_cpu() : -1)
        if action != .none {
            if case .signal(let parker) = action { parker.signalledAt = cshim_clock_monotonic_ns() }
            self.publishIdleLocked()  // fewer unsignalled parked workers, or fewer threads to start
        }
        return action
    }

    /// Wake or spawn as many workers as there are operations that could start now, counting those already on
    /// their way. Caller holds `lock`. Allocates nothing.
    func collectWakeActionsLocked() -> IdleWorkers.WakePlan {
        var plan = IdleWorkers.WakePlan()
        let room = self.slots.room(ready: self.ready.count)
        for _ in 0..<room {
            let action = self.wakeOrSpawnLocked(inFlightBelow: room)
            if action == .none { break }
            plan.add(action)
        }
        return plan
    }

    // MARK: - After unlocking

    /// Runs what an event left to do, in `AfterUnlock`'s order, and leaves `after` empty. With `keepingDropsBelow`,
    /// step 5 waits until that many drops are due (a worker settles `outstanding` in batches). With `retiring` (a
    /// worker about to run its next operation), finished operations' references may be kept in `after` (see
    /// `AfterUnlock`, "Retiring"); without it, they are all dropped. Caller holds no lock.
    @inline(__always)
    func perform(_ after: inout AfterUnlock, keepingDropsBelow threshold: Int = 1, retiring: Bool = false) {
        if !after.wake.isEmpty {  // 1.
            self.perform(after.wake)
            after.wake = IdleWorkers.WakePlan()
        }
        let keeping = retiring && after.keepsReferences
        if !after.hasNoReleases {  // 2.–4.
            let (finished, semaphores, dropped) = after.takeReleases()
            self.performReleases(finished, semaphores, dropped, retiring: keeping, into: &after)
        }
        let drops = after.outstandingDrops >= threshold
        if after.retired != nil && (!keeping || drops || after.retiredCount >= AfterUnlock.retiredLimit) {
            QueueCore.dropChain(after.takeRetired())  // before any `outstanding` drop
            if keeping { after.keepsReferences = false }  // a stream, not a burst: RELEASING until the next wakeup
        }
        if drops {  // 5.
            let n = after.outstandingDrops
            after.outstandingDrops = 0
            self.dropOutstanding(n)
        }
    }

    /// Step 1 alone, for the events whose only effect is one wake (`pushedToInbox`, `scheduleReady`).
    @inline(__always)
    func perform(_ wake: WakeAction) {
        switch wake {
        case .none: return
        case .signal(let parker): parker.unpark()
        case .spawn(let index): self.spawnWorker(index)
        case .performOnRunLoop: self.servingRunLoop!.perform(inModes: [.common]) { [self] in self.serveFromRunLoop() }
        case .serveOnPool: self.pool!.core.request(self, count: 1)
        }
    }

    /// `perform(_:)` for an event's value, taken over (not copied: a copy would retain every reference it holds).
    @inline(__always)
    func perform(_ after: consuming AfterUnlock) {
        self.perform(&after)
    }

    /// Steps 2 to 4: the finished operations' waiters, then their references (kept in `after` when `retiring`);
    /// semaphores; a dropped reference.
    @inline(__always)
    private func performReleases(
        _ finished: Unmanaged<SpindleOperation>?, _ semaphores: [SpindleSemaphore]?,
        _ dropped: Unmanaged<SpindleOperation>?, retiring: Bool, into after: inout AfterUnlock
    ) {
        if retiring, let head = finished {
            QueueCore.retireChain(head, into: &after)
        } else {
            QueueCore.dropChain(finished, releasingWaiters: true)
        }
        if let semaphores { for semaphore in semaphores { semaphore.signal() } }
        if let op = dropped { op.release() }
    }

    /// Releases the waiters of a chain of finished operations (linked through `nextLink`) and keeps the chain itself,
    /// links and all, in `after`'s retired ones. Out of line, like `dropChain`.
    @inline(never)
    static func retireChain(_ head: Unmanaged<SpindleOperation>, into after: inout AfterUnlock) {
        var tail = head
        var count = 1
        while let following = tail._withUnsafeGuaranteedRef({ op -> Unmanaged<SpindleOperation>? in
            op.releaseWaiters()
            return op.nextLink
        }) {
            tail = following
            count += 1
        }
        after.retire(head, through: tail, count: count)
    }

    /// Drops the references of a chain of operations linked through `nextLink` (finished ones, whose waiters it
    /// releases first when told to, or retired ones), unlinking them. Out of line: what it frees costs far more than
    /// the call, and the callers it stays out of are the workers' hot loop.
    @inline(never)
    static func dropChain(_ chain: Unmanaged<SpindleOperation>?, releasingWaiters: Bool = false) {
        var next = chain
        while let op = next {
            next = op._withUnsafeGuaranteedRef { op in
                let following = op.nextLink
                op.nextLink = nil
                if releasingWaiters { op.releaseWaiters() }
                return following
            }
            op.release()
        }
    }

    /// Step 1: unpark, spawn, schedule the run loop's perform.
    private func perform(_ plan: IdleWorkers.WakePlan) {
        plan.unparkAll()
        for index in plan.firstSpawn..<(plan.firstSpawn + plan.spawns) { self.spawnWorker(index) }
        if plan.performOnRunLoop {
            self.servingRunLoop!.perform(inModes: [.common]) { [self] in self.serveFromRunLoop() }
        }
        if plan.poolServes > 0 { self.pool!.core.request(self, count: plan.poolServes, callerReturns: plan.callerReturns) }
    }
}
