/// Conditions and mutual exclusivity: an operation's gate (the toolkit of Apple's "Advanced NSOperations" sample).
///
/// An operation with a condition or an exclusivity category is *gated*: `OperationState.gatedBit`, set while it
/// is idle, and an `OperationGate` in its side object. Operations without one pay a bit test where the gate could
/// act (enqueuing, the add paths, `cancel`, the finish path, the dependency decrement, `start`), nothing more.
///
/// The gate's steps, for an operation added to a queue:
/// 1. **Hold** (in the add, under the operation's lock): enqueuing takes one pending count for the gate
///    (`gateHoldBit`), so the operation cannot become ready before the gate has passed.
/// 2. **Produce** (`gateClaimed`, on the adding thread once the queue claimed it, before it is published there,
///    no lock held): each condition may produce a dependency; it becomes a dependency of the operation and, if it
///    is in no queue, joins the same one, ahead of the operation (so no barrier can come between them). A
///    dependency that cannot be adopted fails the operation only once its add succeeded; if the add fails, what
///    was produced is taken off it again (`gateUnclaimedIfGated`).
/// 3. **Arm or open** (`gateEnqueued`, on the adding thread after the add succeeded, no lock held): a gated
///    operation that its queue holds behind a barrier first depends on that barrier (`waitForBarrierAhead`: taking
///    a category before the barrier ran could deadlock it, and a condition would be evaluated too early); a child of a group that
///    has not started waits for the start (`SpindleGroupOperation.deferGateUntilStart`; the group's start goes on
///    from here, `gateGroupStarted`). Then, if real
///    dependencies are still pending, the adding thread sets `gateArmedBit` and leaves;
///    the `dependencyFinished` decrement that leaves the hold alone clears the bit in the same compare-and-swap and
///    opens the gate on its thread (exactly one thread opens it). Otherwise the adding thread opens it at once.
/// 4. **Acquire** (`openGate`): the exclusivity categories, in sorted order, from `ExclusivityController`; if one
///    is held, the operation waits in its line and the thread that releases it continues from step 5. If one is
///    held by a group the operation is inside (which lets go only after its children), it is refused instead: the
///    operation finishes unrun as after a failed condition (`failGate`), its error's `underlying` a
///    `SpindleError.categoryHeldByEnclosingGroup`.
/// 5. **Evaluate** (`gateCategoriesAcquired`): the conditions, in order, outside every lock; the first failure
///    finishes the operation unrun (`failGate`: `error` = `SpindleError.conditionFailed`, then `cancel()`).
/// 6. **Release the hold** (`releaseGateHold`): the operation becomes ready and goes to its queue as usual.
/// 7. Its categories are **released** when it finishes (however it ended: after its completion block, before its
///    dependents are told), or as soon as it is cancelled if it had not begun executing (`cancel()`): a cancelled
///    or failed operation never holds one, and a cancelled waiter leaves its line at once.
///
/// A cancelled operation skips what is left of steps 2–5 (it is ready anyway, ready = cancelled || pending == 0)
/// and only gives its hold back. Races, and why each is safe:
/// - cancel vs. opening: the cancel bit is set before `cancel()` tells the controller; `acquire` refuses a
///   cancelled operation under the controller's lock, and a release hands nothing to a cancelled waiter, so
///   whichever comes second sees the first; a grant that lost to a cancel is released by that cancel.
/// - cancel vs. running: the controller lets go of a cancelled operation only if `cancel()` found it not yet
///   executing, and then it can never execute (starting requires the cancel bit clear); one cancelled while `main`
///   runs keeps its categories until it finishes.
/// - the last dependency vs. arming: both are compare-and-swaps on the state word; arming requires more pending
///   than the hold, opening requires the armed bit, so exactly one of the two threads opens the gate.
/// - the finish of the holder vs. a new acquirer: both under the controller's lock; a release hands the category
///   to the first waiter before unlocking, so a category is never free while someone waits for it.
/// - a barrier added by another thread during the add: the produced dependencies are in the queue before the
///   operation, so the barrier is behind both, ahead of both, or between them in that order (then it waits for
///   the dependency, not the other way round); an operation with categories behind a barrier waits for it before
///   taking them, so the barrier's predecessors never wait for a category it holds.
/// - a line of waiters whose conditions fail: each failure cancels, whose release grants the next, on the same
///   thread; past depth 8 the grants are queued for the outermost call (`continueGates`), so the stack is bounded.
///
/// An operation started by hand (`start()`, `perform`) that is gated and not cancelled is refused with
/// `gatedOperationNeedsQueue`: its dependencies would have no queue to run on, and a busy category could only be
/// waited for by blocking the caller. Conditions and categories are added only while the operation is idle.
extension SpindleOperation {
    // MARK: - Public API

    /// Attaches a condition (see `SpindleOperationCondition`): once the operation is in a queue, the condition
    /// may produce a dependency that runs first, and it is evaluated when the dependencies have finished, before
    /// the operation starts; a failure finishes the operation unrun, with `error` a `SpindleError.conditionFailed`
    /// and `cancellationReason` `.conditionFailed` (dependents with `cancelsOnFailedDependency` see it as failed).
    /// A mutually exclusive condition also adds its `name` as an exclusivity category. Any thread.
    ///
    /// - Throws: `conditionAddedTooLate` once the operation was added to a queue, started or finished. Nothing
    ///   changes then.
    public final func addCondition(_ condition: any SpindleOperationCondition) throws(SpindleError) {
        let name = condition.name  // user code: read before taking our lock
        let exclusive = condition.isMutuallyExclusive
        try self.editGate { gate in
            gate.conditions.append(condition)
            if exclusive { gate.insertCategory(name) }
        }
    }

    /// Makes the operation mutually exclusive in `category`, across every queue of the process: at most one
    /// operation of a category runs at a time (the sample's `MutuallyExclusive`, "one alert on screen"). The next
    /// one is the first whose dependencies and conditions' dependencies had finished (first come, first served).
    /// An operation in several categories takes them in sorted order, so no two ever wait for each other. It holds
    /// a category from the moment it got it until it finishes (a cancelled one that has not started lets go at
    /// once); meanwhile others of the category wait, even if its queue is suspended. Added to a queue behind a
    /// barrier, it also depends on that barrier (and lists it in `dependencies`), so that it takes its categories
    /// only after the barrier ran. Adding a category twice changes nothing. Any thread.
    ///
    /// - Throws: `conditionAddedTooLate` once the operation was added to a queue, started or finished. Nothing
    ///   changes then.
    public final func addExclusivityCategory(_ category: String) throws(SpindleError) {
        try self.editGate { $0.insertCategory(category) }
    }

    /// The conditions attached, in the order they were added. Any thread.
    public final var conditions: [any SpindleOperationCondition] { self.withLocked { $0.extras?.gate?.conditions ?? [] } }

    /// The exclusivity categories (those added directly and the names of mutually exclusive conditions), sorted:
    /// the order in which they are acquired. Any thread.
    public final var exclusivityCategories: [String] { self.withLocked { $0.extras?.gate?.categories ?? [] } }

    // MARK: - Steps (see the notes above)

    /// Step 3 for an operation just added, if it is gated. Called by every add path once the add succeeded, on the
    /// adding thread, no lock held. A plain operation pays one relaxed load and a bit test.
    @inline(__always)
    final func gateEnqueuedIfGated() {
        if self.state.load(ordering: .relaxed) & OperationState.gatedBit != 0 { self.gateEnqueued() }
    }

    @inline(never)
    private func gateEnqueued() {
        let taken = self.withLocked {
            l -> (OperationGate, SpindleOperationQueue?, Bool, (condition: String, error: any Error)?)? in
            guard let gate = l.extras?.gate else { return nil }
            defer {
                gate.enqueuedUnready = false
                gate.produced = []
                gate.produceFailure = nil
            }
            return (gate, l.queue?.takeUnretainedValue(), gate.enqueuedUnready, gate.produceFailure)
        }
        guard let (gate, queue, unready, failure) = taken, self.currentState.hasGateHold else { return }
        if unready { self.emitReadinessFlags() }  // the hold made it not ready (reconciled with the state word)
        if let failure { self.failGate(condition: failure.condition, error: failure.error) }
        if let queue, !self.isCancelled { self.waitForBarrierAhead(in: queue, gate) }
        // A child of a group that has not started cannot run before it does: taking its categories or evaluating
        // its conditions now could deadlock what the group waits for, or see too early a state. Its group opens
        // it at the start (`gateGroupStarted`).
        if !self.isCancelled, let group = self.parentGroup, group.deferGateUntilStart(self) { return }
        self.armOrOpenGate(gate)
    }

    /// Step 3's end: arms the gate if real dependencies are pending (the last to finish opens it), else opens it.
    private func armOrOpenGate(_ gate: OperationGate) {
        let (moved, armed) = self.advanceState { $0.gateArmingOrOpening() }
        if moved && armed.isGateArmed { return }  // the last dependency to finish opens it
        self.openGate(gate)
    }

    /// Step 3, continued for a child whose gate waited for its group's start (see `gateEnqueued`). The group's
    /// starting thread, no lock held.
    final func gateGroupStarted() {
        guard let gate = self.withLocked({ $0.extras?.gate }), self.currentState.hasGateHold else { return }
        self.armOrOpenGate(gate)
    }

    /// Step 2 for an operation `queue` has just claimed (enqueued, its hold taken) and not yet published: its
    /// conditions' dependencies go to the queue *before* it does. Were they added after it, a barrier added by
    /// another thread in between would wait for the operation, which would wait for a dependency held behind that
    /// barrier: a deadlock. Called by every add path, on the adding thread, no lock held. A failure to adopt one
    /// fails the operation only once the add succeeded (`gateEnqueued`); if the add fails instead (a queue shut
    /// down meanwhile, a bounded queue's refusal), `gateUnclaimedIfGated` takes the produced dependencies off the
    /// operation again (those the queue accepted stay there and run). A plain operation pays one relaxed load
    /// and a bit test.
    @inline(__always)
    final func gateClaimedIfGated(on queue: SpindleOperationQueue) {
        if self.state.load(ordering: .relaxed) & OperationState.gatedBit != 0 { self.gateClaimed(on: queue) }
    }

    @inline(never)
    private func gateClaimed(on queue: SpindleOperationQueue) {
        guard let gate = self.withLocked({ $0.extras?.gate }) else { return }
        let conditions = self.withLocked { _ -> [any SpindleOperationCondition] in
            gate.produced = []
            gate.produceFailure = nil
            return gate.conditions
        }
        guard self.currentState.hasGateHold, !self.isCancelled else { return }
        for condition in conditions {
            guard let dependency = condition.dependency(for: self) else { continue }
            let (listed, failure) = self.adopt(dependency, on: queue)
            self.withLocked { _ in
                if listed { gate.produced.append(dependency) }
                if let failure { gate.produceFailure = (condition.name, failure) }
            }
            if failure != nil { return }
        }
    }

    /// The add of a claimed operation failed after `gateClaimedIfGated`: the dependencies its conditions produced
    /// are taken off it again, so the failed add leaves it as it was. Called by `unclaim`, with no lock held
    /// whenever something was produced (a batch refused while claiming, under the queue's lock, produced nothing).
    @inline(__always)
    final func gateUnclaimedIfGated() {
        if self.state.load(ordering: .relaxed) & OperationState.gatedBit != 0 { self.gateUnclaimed() }
    }

    @inline(never)
    private func gateUnclaimed() {
        let produced = self.withLocked { l -> [SpindleOperation] in
            guard let gate = l.extras?.gate else { return [] }
            defer {
                gate.produced = []
                gate.produceFailure = nil
            }
            return gate.produced
        }
        for dependency in produced { self.removeDependency(dependency) }
    }

    /// A gated operation held behind a barrier must not open its gate before the barrier has run: taking its
    /// categories could deadlock the barrier (which waits for operations added before it, which may be waiting for
    /// one of those categories), and its conditions would see the state before the barrier (as Apple's sample, where
    /// a condition is evaluated by an operation added behind it, does not). So it depends on that barrier, recorded
    /// when its queue admitted it (admitted now, if the add left it in the inbox). Its gate then opens only once the
    /// barrier finished.
    private func waitForBarrierAhead(in queue: SpindleOperationQueue, _ gate: OperationGate) {
        queue.core.withAdmittedLock {}
        guard let barrier = self.withLocked({ _ -> SpindleOperation? in
            defer { gate.barrierAhead = nil }
            return gate.barrierAhead
        }) else { return }
        try? self.addDependency(barrier)  // a barrier made to depend on this operation already deadlocks: ignored
    }

    /// Called by the queue (under its lock) when it admits the operation held behind `barrier`: a gated one
    /// remembers it (see `waitForBarrierAhead`). A plain operation: one load and a bit test.
    final func noteHeldBehind(_ barrier: Unmanaged<SpindleOperation>) {
        guard self.currentState.isGated else { return }
        self.withLocked { l in
            guard let gate = l.extras?.gate else { return }
            gate.barrierAhead = barrier.takeUnretainedValue()
        }
    }

    /// Makes `dependency` (produced by a condition) a dependency, and adds it to `queue` if it is in no queue; for
    /// an operation inside a group, to the group (whose inner queue `queue` is), so the group counts it as a child
    /// and does not finish before it. Returns whether it is now listed as a dependency, and the error that
    /// prevented either step, if any.
    private func adopt(_ dependency: SpindleOperation, on queue: SpindleOperationQueue) -> (Bool, (any Error)?) {
        do {
            try self.addDependency(dependency)
        } catch {
            return (false, error)
        }
        guard dependency.currentState.lifecycle == .idle else { return (true, nil) }  // queued, running or done
        do {
            if let group = self.parentGroup {
                try group.addOperation(dependency)
            } else {
                try queue.addPastCapacity(dependency)  // never waits or is refused for room: see `addPastCapacity`
            }
        } catch {
            switch error {
            case .operationAlreadyInQueue, .operationExecuting, .operationFinished: return (true, nil)  // taken meanwhile
            default: return (true, error)
            }
        }
        return (true, nil)
    }

    /// Step 4, on the thread that opened the gate (see `dependencyFinished` for the other opener).
    final func openGate() {
        guard let gate = self.withLocked({ $0.extras?.gate }) else { return }
        self.openGate(gate)
    }

    private func openGate(_ gate: OperationGate) {
        if !self.gateMayProceed {
            self.releaseGateHold()
            return
        }
        let categories = self.withLocked { _ in gate.categories }
        if !categories.isEmpty {
            let groups = self.enclosingGroups  // each holds its categories until this one finished
            let controller = ExclusivityController.shared
            switch controller.acquire(gate, for: self, categories: categories, enclosingGroups: groups) {
            case .acquired: break
            case .waiting: return  // the release that hands it its last category continues it
            case .abandoned:
                self.releaseGateHold()
                return
            case .heldByEnclosingGroup(let category, let group):
                let refusal = SpindleError.categoryHeldByEnclosingGroup(
                    operation: self.displayName, category: category, group: group.displayName)
                self.failGate(condition: "exclusivity '\(category)'", error: refusal)
                self.releaseGateHold()
                return
            }
        }
        self.gateCategoriesAcquired(gate)
    }

    /// Steps 5 and 6: evaluates the conditions (user code, no lock held), then releases the hold.
    private func gateCategoriesAcquired(_ gate: OperationGate) {
        let conditions = self.withLocked { _ in gate.conditions }
        if self.gateMayProceed {
            for condition in conditions {
                if case .failed(let error) = condition.evaluate(for: self) {
                    self.failGate(condition: condition.name, error: error)
                    break
                }
            }
        }
        self.releaseGateHold()
    }

    /// Neither cancelled nor finishing.
    private var gateMayProceed: Bool {
        let s = self.currentState
        return !s.isCancelled && s.lifecycle < .finishing
    }

    /// Step 6: gives the gate's hold back; the operation becomes ready unless something else holds it back.
    private func releaseGateHold() {
        var current = self.currentState
        while let next = current.releasingGateHold() {
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                if !current.isReady && next.isReady { self.becameReady() }
                return
            }
            current = OperationState(raw: seen)
        }
    }

    /// Finishes it unrun because `condition` failed with `error` (unless it is already cancelled or finishing):
    /// the error first, so its finish marks it failed, then the reason and `cancel()`.
    private func failGate(condition: String, error: any Error) {
        let failure = SpindleError.conditionFailed(operation: self.displayName, condition: condition, underlying: error)
        var replaced: (any Error)? = nil  // released after the lock (a class error's deinit is user code)
        let proceed = self.withLocked { l -> Bool in
            let s = self.currentState
            guard s.lifecycle < .finishing, !s.isCancelled else { return false }
            replaced = l.error
            l.error = failure
            if l.cancellationReason == nil { l.cancellationReason = .conditionFailed }
            return true
        }
        _ = replaced
        guard proceed else { return }
        self.cancel()
        // An override of cancel() that did not call super's left it uncancelled: cancel it here, or the gate, given
        // back, would let the queue run `main` past its failed condition.
        if !self.currentState.isCancelled { self.markCancelled() }
    }

    /// Step 7: lets go of its categories (finished, or cancelled before executing) and continues the gates of the
    /// operations that got their last category from it. No lock held.
    final func releaseExclusivity() {
        guard let gate = self.withLocked({ l in l.extras?.gate.flatMap { $0.categories.isEmpty ? nil : $0 } }) else {
            return
        }
        SpindleOperation.continueGates(ExclusivityController.shared.release(gate))
    }

    /// Continues the gates a release granted (step 5 for each), on this thread. A condition that fails cancels its
    /// operation, whose release grants the next waiter, whose conditions may fail in turn: past a few levels of
    /// that, grants are left to the outermost call on this thread, which takes them in order, so a long line of
    /// failing operations cannot overflow the stack.
    private static func continueGates(_ granted: [(gate: OperationGate, operation: SpindleOperation)]) {
        if granted.isEmpty { return }
        let context = ThreadContext.current
        if context.gateDepth >= 8 {
            context.deferredGates.append(contentsOf: granted)
            return
        }
        context.gateDepth += 1
        for (gate, operation) in granted { operation.gateCategoriesAcquired(gate) }
        if context.gateDepth == 1 {
            var index = 0
            while index < context.deferredGates.count {
                let (gate, operation) = context.deferredGates[index]
                index += 1
                operation.gateCategoriesAcquired(gate)
            }
            context.deferredGates = []
        }
        context.gateDepth -= 1
    }

    /// For diagnostics: where the gate of an operation that it still holds back stands.
    final var gateSummary: String {
        guard let gate = self.withLocked({ $0.extras?.gate }) else { return "no gate" }
        if let place = ExclusivityController.shared.describe(gate) { return "gate: \(place)" }
        return self.currentState.isGateArmed ? "gate: opens when its dependencies finish" : "gate: opening"
    }

    /// Runs `body` on the gate (created if needed) under the operation's lock, marking it gated, if it is idle.
    private func editGate(_ body: (OperationGate) -> Void) throws(SpindleError) {
        try self.withLocked { l throws(SpindleError) in
            guard self.advanceState({ $0.gating() }).moved else {
                throw .conditionAddedTooLate(name: l.name ?? self.defaultName)
            }
            let extras = l.more
            if extras.gate == nil { extras.gate = OperationGate() }
            body(extras.gate!)
        }
    }
}
