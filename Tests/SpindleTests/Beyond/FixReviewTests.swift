import Glibc
import Synchronization
import Testing

@testable import Spindle

// A review of the seventh round's fixes (cbc91e8..0a2b987): each test below failed (or hung, bounded by a deadline)
// on that code. Two are open, documented in the README, and kept as known issues (they fail once fixed).

@Suite(.serialized) struct FixReviewTests {
    /// The enclosing-group refusal looks only at a category's holder. A group holding category `high` also blocks,
    /// through the sorted-order acquisition, anything an outsider holds while it waits for `high`: the outsider
    /// needs `low` and `high`, takes `low` and waits in `high`'s line; a child of the group that needs `low` then
    /// waits for the outsider, which waits for the group, which waits for the child: for ever.
    @Test(.timeLimit(.minutes(1)))
    func aChildNeedingACategoryHeldByAnOutsiderWaitingForTheGroupIsNotLeftWaitingForEver() throws {
        let low = ctCategory("fr-a")
        let high = ctCategory("fr-c")
        #expect(low < high)
        let queue = try SpindleOperationQueue(name: "fr-excl", maxConcurrentOperationCount: 4)
        let other = try SpindleOperationQueue(name: "fr-excl-out", maxConcurrentOperationCount: 4)
        let releaseBlocker = QTGate()
        let blocker = CTOp("fr-blocker") { releaseBlocker.wait() }  // holds the child's gate shut for a while
        let started = QTGate()
        let first = CTOp("fr-first") { started.open() }
        let child = CTOp("fr-child")
        try child.addExclusivityCategory(low)
        try child.addDependency(blocker)
        let group = try SpindleGroupOperation(operations: [first, child])
        group.name = "fr-group"
        try group.addExclusivityCategory(high)
        try other.addOperation(blocker)
        try queue.addOperation(group)
        #expect(started.wait(seconds: qtDeadline))  // the group runs: it holds `high`
        let outsider = CTOp("fr-outsider")
        try outsider.addExclusivityCategory(low)
        try outsider.addExclusivityCategory(high)
        try other.addOperation(outsider)
        // The outsider took `low` and waits in `high`'s line (no signal for that: polled).
        #expect(btWaitUntil { ExclusivityController.shared.isHeld(low) })
        releaseBlocker.open()  // the child's gate opens now: it needs `low`
        // Open (README, "Conditions and exclusivity"): only a category an enclosing group holds itself is refused.
        var childDone = false
        withKnownIssue("a wait chain through another operation's category line back to the group is not refused") {
            // Short: the cycle is certain once the gate opened, and a long wait would hold a cooperative thread.
            childDone = (try? child.waitUntilFinished(timeout: .seconds(1))) ?? false
            #expect(childDone, "fr-child did not finish")
        }
        if !childDone { child.cancel() }  // unsticks the cycle, so the run goes on
        let groupDone = ctFinish(group)
        #expect(ctFinish(outsider))
        if groupDone {
            qtDrain(queue)
            qtDrain(other)
        }
    }

    /// `adopt` now adds a condition's produced dependency past the capacity, before the bounded add has decided.
    /// When the add is then refused (`.reject`, a timed add that times out, `waitOnOwnQueue`), the operation is
    /// given back but its produced dependency stays in the queue, past the capacity: each refused add of a gated
    /// operation grows a full queue by one. Before the fix the dependency's own add was refused too.
    @Test(.timeLimit(.minutes(1)))
    func aRefusedGatedAddLeavesNothingPastTheCapacity() throws {
        let queue = try SpindleOperationQueue(name: "fr-leak", maxConcurrentOperationCount: 1, capacity: 1,
                                              whenFull: .reject)
        queue.isSuspended = true
        try queue.addOperation(BTCountingOp(name: "fr-filler"))
        #expect(queue.operationCount == 1)
        var refused = 0
        for i in 0..<3 {
            let dependency = BTCountingOp(name: "fr-dep\(i)")
            let gated = BTCountingOp(name: "fr-gated\(i)")
            try gated.addCondition(CTCondition("fr-produce", produce: { _ in dependency }))
            do {
                try queue.addOperation(gated)
            } catch {
                if case .queueFull = error { refused += 1 }
            }
        }
        #expect(refused == 3)
        let count = queue.operationCount
        #expect(count == 1, "three refused adds left \(count - 1) produced dependencies in a full queue of capacity 1")
        queue.isSuspended = false
        qtDrain(queue)
    }

    /// A batch wait from a running member of a bounded queue checks for a pending barrier only in `beginBatchWait`;
    /// a barrier that arrives between that check and the batch's admission (here from the batch's own condition,
    /// which the add calls on the adding thread with no lock held; in general any other thread) holds the batch
    /// behind it, and the barrier waits for the caller: for ever. The unbounded path checks again at admission and
    /// refuses (`waitOnOwnQueue`).
    /// Note: on the buggy code the queue's worker is left blocked for ever (nothing can unstick that cycle).
    @Test(.timeLimit(.minutes(1)))
    func aBoundedBatchWaitRefusesABarrierThatArrivesBeforeItsAdmission() throws {
        let queue = try SpindleOperationQueue(name: "fr-bwait", maxConcurrentOperationCount: 2, capacity: 10,
                                              whenFull: .block)
        let outcome = try Self.batchWaitBehindABarrierItsConditionAdds(on: queue, tag: "")
        #expect(outcome != nil, "the batch wait behind a barrier that waits for its caller never returned")
        if outcome != nil {
            #expect(outcome == "refused")
            qtDrain(queue)
        }
    }

    /// Control for the test above: the same batch wait on an unbounded queue is refused (`waitOnOwnQueue`), as the
    /// fix intends; only the bounded path misses the barrier.
    @Test(.timeLimit(.minutes(1)))
    func anUnboundedBatchWaitRefusesABarrierThatArrivesBeforeItsAdmission() throws {
        let queue = try SpindleOperationQueue(name: "fr-bwait-u", maxConcurrentOperationCount: 2)
        let outcome = try Self.batchWaitBehindABarrierItsConditionAdds(on: queue, tag: "-u")
        #expect(outcome != nil)
        if outcome != nil {
            #expect(outcome == "refused")
            qtDrain(queue)
        }
    }

    /// From an operation of `queue`: a batch wait (`addOperations(_:waitUntilFinished: true)`) for one operation
    /// whose condition adds a barrier to `queue`, which then waits for the caller. Returns "refused"
    /// (`waitOnOwnQueue`), "waited", another error's description, or nil if the wait did not return in time.
    static func batchWaitBehindABarrierItsConditionAdds(on queue: SpindleOperationQueue, tag: String) throws
        -> String?
    {
        let outcome = SpindleLockedValue<String?>(nil)
        let done = QTGate()
        let caller = CTOp("fr-caller\(tag)") {
            let batch = BTCountingOp(name: "fr-batch\(tag)")
            try? batch.addCondition(CTCondition("fr-barrier-maker\(tag)", produce: { _ in
                queue.addBarrierBlock {}  // a barrier now pending: it waits for the caller
                return nil
            }))
            do {
                try queue.addOperations([batch], waitUntilFinished: true)
                outcome.withLockedValue { $0 = "waited" }
            } catch {
                if case .waitOnOwnQueue? = error as? SpindleError {
                    outcome.withLockedValue { $0 = "refused" }
                } else {
                    outcome.withLockedValue { $0 = "\(error)" }
                }
            }
            done.open()
        }
        try queue.addOperation(caller)
        return done.wait(seconds: qtDeadline) ? outcome.value : nil
    }

    /// The enclosing-group refusal looks only at the child's own categories: a dependency of the child, outside
    /// the group, that needs the group's category waits for the group, which waits for the child, which waits for
    /// the dependency.
    @Test(.timeLimit(.minutes(1)))
    func aChildsOutsideDependencyInTheGroupsCategoryIsNotLeftWaitingForEver() throws {
        let category = ctCategory("fr-dep-cat")
        let queue = try SpindleOperationQueue(name: "fr-excl-dep", maxConcurrentOperationCount: 4)
        let other = try SpindleOperationQueue(name: "fr-excl-dep-out", maxConcurrentOperationCount: 4)
        let releaseBlocker = QTGate()
        let blocker = CTOp("fr-dep-blocker") { releaseBlocker.wait() }
        let dependency = CTOp("fr-dep")
        try dependency.addExclusivityCategory(category)
        try dependency.addDependency(blocker)  // its gate opens only once the group holds the category
        let started = QTGate()
        let first = CTOp("fr-dep-first") { started.open() }
        let child = CTOp("fr-dep-child")
        try child.addDependency(dependency)
        let group = try SpindleGroupOperation(operations: [first, child])
        try group.addExclusivityCategory(category)
        try other.addOperation(blocker)
        try other.addOperation(dependency)
        try queue.addOperation(group)
        #expect(started.wait(seconds: qtDeadline))  // the group holds the category
        releaseBlocker.open()
        // Open (README, "Conditions and exclusivity"): a child's dependency outside the group is not checked.
        var dependencyDone = false
        withKnownIssue("a child's dependency needing the group's category is not refused") {
            dependencyDone = (try? dependency.waitUntilFinished(timeout: .seconds(1))) ?? false
            #expect(dependencyDone, "fr-dep did not finish")
        }
        if !dependencyDone { dependency.cancel() }  // unsticks the cycle
        if ctFinish(group) {
            qtDrain(queue)
            qtDrain(other)
        }
    }

    /// `isOwnQueueOfCallingThread` now counts a pool thread serving the queue (`workerOf`) as the queue's own
    /// thread while it runs user code outside any operation (the serve's releases). On a pool the wait there can
    /// end: the room is made by an operation another pool thread runs (and the wait is a `blocking` one the pool
    /// sees). A blocking add from such a deinit, valid before, now throws `waitOnOwnQueue`.
    @Test(.timeLimit(.minutes(1)))
    func aBlockingAddFromADeinitOnAPoolServeWaitsForRoomAnotherThreadMakes() throws {
        let pool = try SpindleThreadPool(name: "fr-pool", threadCount: 2)
        let queue = try SpindleOperationQueue(name: "fr-pool-q", maxConcurrentOperationCount: 2, pool: pool)
        try queue.setCapacity(1, whenFull: .block)
        let go = QTGate()
        let release = QTGate()
        let finished = QTGate()
        let outcome = SpindleLockedValue<String?>(nil)
        do {
            let token = FRDeinitToken {
                do {
                    try queue.addOperation(BTCountingOp(name: "fr-x1") { release.wait() })  // fits: the queue is full
                    try queue.addOperation(BTCountingOp(name: "fr-x2"))  // waits until fr-x1 finished
                    outcome.withLockedValue { $0 = "added" }
                } catch {
                    outcome.withLockedValue { $0 = "\(error)" }
                }
                finished.open()
            }
            // The token lives in the operation (its body), freed with it by the serving pool thread.
            try queue.addOperation(BTCountingOp(name: "fr-holder") {
                go.wait()
                withExtendedLifetime(token) {}
            })
        }
        go.open()  // only now: this thread holds no reference to the operation any more
        // The deinit blocks in the second add (a blocked producer), or was refused (no signal to wait on: polled).
        #expect(btWaitUntil { outcome.value != nil || queue.snapshot().blockedProducers == 1 })
        release.open()
        #expect(finished.wait(seconds: qtDeadline))
        #expect(outcome.value == "added")
        qtDrain(queue)
    }
}

/// Runs `onDeinit` when freed.
final class FRDeinitToken: @unchecked Sendable {
    let onDeinit: @Sendable () -> Void
    init(_ onDeinit: @escaping @Sendable () -> Void) { self.onDeinit = onDeinit }
    deinit { self.onDeinit() }
}
