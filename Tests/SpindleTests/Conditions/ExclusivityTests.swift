import Synchronization
import Testing

@testable import Spindle

/// Mutual exclusivity by category, across queues: never two at once, first come first served in the order they
/// became ready, no deadlock with several categories, nothing held by a cancelled or failed operation.
///
/// Most tests are deterministic: an operation added while its category is held, with nothing else holding it back,
/// is in that category's line when `addOperation` returns (its gate opens on the adding thread), so it is not
/// ready; the tests check that, then let the holder go.
@Suite struct ExclusivityTests {
    @Test func aSecondOperationOfTheCategoryOnAnotherQueueWaitsForTheFirst() throws {
        let category = ctCategory("one-at-a-time")
        let first = SpindleOperationQueue(name: "ex-1")
        let second = SpindleOperationQueue(name: "ex-2")
        let (holder, started, release) = try ctBlockingHolder("holder", category: category)
        try first.addOperation(holder)
        #expect(started.wait())
        let waiter = CTOp("waiter")
        try waiter.addExclusivityCategory(category)
        try second.addOperation(waiter)
        #expect(!waiter.isReady && waiter.runs.count == 0)
        #expect(second.debugDescription.contains("waits for exclusivity '\(category)'"))
        release.open()
        ctFinish(waiter)
        #expect(holder.runs.count == 1 && waiter.runs.count == 1)
        qtDrain(first)
        qtDrain(second)
        #expect(!ExclusivityController.shared.isHeld(category))
    }

    /// A dependency added to an operation that is already in its category's line is listed but does not hold it
    /// back (its gate has opened): otherwise it would hold the category while waiting for a dependency that waits
    /// for the category (found by review: both never finished).
    @Test func aDependencyAddedWhileInLineDoesNotHoldTheCategory() throws {
        let category = ctCategory("late-dependency")
        let queue = SpindleOperationQueue(name: "ex-late-dep")
        let (holder, started, release) = try ctBlockingHolder("holder", category: category)
        try queue.addOperation(holder)
        #expect(started.wait())
        let waiter = CTOp("waiter")
        try waiter.addExclusivityCategory(category)
        try queue.addOperation(waiter)
        #expect(!waiter.isReady)
        let late = CTOp("late")
        try late.addExclusivityCategory(category)
        try waiter.addDependency(late)
        #expect(waiter.dependencies.map(\.displayName) == ["late"])
        try queue.addOperation(late)
        release.open()
        ctFinish(waiter)
        ctFinish(late)
        #expect(waiter.runs.count == 1 && late.runs.count == 1)
        qtDrain(queue)
        #expect(!ExclusivityController.shared.isHeld(category))
    }

    @Test func manyOperationsOfOneCategoryOnTwoWideQueuesNeverOverlap() throws {
        let category = ctCategory("never-overlap")
        let queues = [try SpindleOperationQueue(name: "ex-wide-1", maxConcurrentOperationCount: 4),
                      try SpindleOperationQueue(name: "ex-wide-2", maxConcurrentOperationCount: 4)]
        let inside = QTHighWater()
        let ops = try (0..<60).map { i -> CTOp in
            let op = CTOp("op\(i)", inside: inside) {
                let end = qtMonotonicSeconds() + 0.0005  // stay inside a while, so an overlap would be seen
                while qtMonotonicSeconds() < end {}
            }
            try op.addExclusivityCategory(category)
            return op
        }
        for (i, op) in ops.enumerated() { try queues[i % 2].addOperation(op) }
        for queue in queues { qtDrain(queue) }
        #expect(inside.maximum == 1)
        #expect(ops.allSatisfy { $0.runs.count == 1 && $0.completions.count == 1 })
        #expect(!ExclusivityController.shared.isHeld(category))
    }

    @Test func withoutTheCategoryTheSameOperationsDoOverlap() throws {
        // The control for the test above: the same queues let two operations meet when no category stops them.
        let queues = [try SpindleOperationQueue(name: "ex-ctl-1", maxConcurrentOperationCount: 4),
                      try SpindleOperationQueue(name: "ex-ctl-2", maxConcurrentOperationCount: 4)]
        let meet = QTRendezvous(parties: 2)
        let met = QTCounter()
        for i in 0..<2 { try queues[i].addOperation(CTOp("free\(i)") { if meet.arrive() { met.increment() } }) }
        for queue in queues { qtDrain(queue) }
        #expect(met.count == 2)
    }

    @Test func waitersAreAdmittedFirstComeFirstServedWhateverTheirQueueAndPriority() throws {
        let category = ctCategory("fifo")
        let queues = [try SpindleOperationQueue(name: "ex-fifo-1", maxConcurrentOperationCount: 8),
                      try SpindleOperationQueue(name: "ex-fifo-2", maxConcurrentOperationCount: 8)]
        let log = QTLog<String>()
        let (holder, started, release) = try ctBlockingHolder("holder", category: category, log: log)
        try queues[0].addOperation(holder)
        #expect(started.wait())
        let priorities: [SpindleOperation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh, .veryHigh]
        var waiters: [CTOp] = []
        for (i, priority) in priorities.enumerated() {
            let waiter = CTOp("w\(i)", log: log)
            waiter.queuePriority = priority
            try waiter.addExclusivityCategory(category)
            try queues[i % 2].addOperation(waiter)
            #expect(!waiter.isReady)  // in line, behind the ones added before
            waiters.append(waiter)
        }
        release.open()
        for queue in queues { qtDrain(queue) }
        #expect(log.all == ["holder", "w0", "w1", "w2", "w3", "w4", "w5"])
    }

    @Test func theLineIsInTheOrderOperationsBecameReadyNotTheOrderTheyWereAdded() throws {
        let category = ctCategory("ready-order")
        let queue = try SpindleOperationQueue(name: "ex-ready-order", maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let (holder, started, release) = try ctBlockingHolder("holder", category: category, log: log)
        try queue.addOperation(holder)
        #expect(started.wait())
        let unblock = QTGate()
        let upstream = CTOp("upstream") { unblock.wait() }
        let early = CTOp("added-first", log: log)
        try early.addDependency(upstream)
        try early.addExclusivityCategory(category)
        let late = CTOp("added-second", log: log)
        try late.addExclusivityCategory(category)
        try queue.addOperation(early)  // not ready yet: its gate stays closed
        try queue.addOperation(upstream)
        try queue.addOperation(late)  // ready: first in line
        unblock.open()
        ctFinish(upstream)  // returns after its dependents were told: `early` is in line now, behind `late`
        #expect(!early.isReady && !late.isReady)
        release.open()
        qtDrain(queue)
        #expect(log.all == ["holder", "added-second", "added-first"])
    }

    @Test func severalCategoriesDeclaredInOppositeOrdersDoNotDeadlock() throws {
        let a = ctCategory("a")
        let b = ctCategory("b")
        let queues = [try SpindleOperationQueue(name: "ex-ab-1", maxConcurrentOperationCount: 4),
                      try SpindleOperationQueue(name: "ex-ab-2", maxConcurrentOperationCount: 4)]
        let insideA = QTHighWater()
        let insideB = QTHighWater()
        let ops = try (0..<80).map { i -> CTOp in
            let both = i % 2 == 0
            let op = CTOp("op\(i)") {
                insideA.enter()
                if both { insideB.enter() }
                let end = qtMonotonicSeconds() + 0.0002
                while qtMonotonicSeconds() < end {}
                if both { insideB.leave() }
                insideA.leave()
            }
            if both {
                // Half declare a then b, half b then a: acquired in sorted order anyway.
                for category in i % 4 == 0 ? [a, b] : [b, a] { try op.addExclusivityCategory(category) }
                #expect(op.exclusivityCategories == [a, b].sorted())
            } else {
                try op.addExclusivityCategory(a)
            }
            return op
        }
        for (i, op) in ops.enumerated() { try queues[i % 2].addOperation(op) }
        for queue in queues { qtDrain(queue) }
        #expect(ops.allSatisfy { $0.runs.count == 1 })
        #expect(insideA.maximum == 1 && insideB.maximum == 1)
        #expect(!ExclusivityController.shared.isHeld(a) && !ExclusivityController.shared.isHeld(b))
    }

    @Test func aCancelledWaiterInASuspendedQueueDoesNotBlockTheCategory() throws {
        let category = ctCategory("cancelled-waiter")
        let running = SpindleOperationQueue(name: "ex-running")
        let stuck = SpindleOperationQueue(name: "ex-stuck")
        let (holder, started, release) = try ctBlockingHolder("holder", category: category)
        try running.addOperation(holder)
        #expect(started.wait())
        stuck.isSuspended = true  // the cancelled waiter can never finish while we look
        let cancelled = CTOp("cancelled")
        try cancelled.addExclusivityCategory(category)
        try stuck.addOperation(cancelled)
        let next = CTOp("next")
        try next.addExclusivityCategory(category)
        try running.addOperation(next)  // in line behind `cancelled`
        cancelled.cancel()
        #expect(!cancelled.isFinished)
        release.open()
        ctFinish(next)  // handed on past the cancelled waiter although its queue is suspended
        #expect(next.runs.count == 1 && cancelled.runs.count == 0)
        stuck.isSuspended = false
        ctFinish(cancelled)
        qtDrain(running)
        qtDrain(stuck)
        #expect(!ExclusivityController.shared.isHeld(category))
    }

    @Test func aCancelledHolderThatHasNotStartedLetsGoAtOnce() throws {
        let category = ctCategory("cancelled-holder")
        let stuck = SpindleOperationQueue(name: "ex-holder-stuck")
        let running = SpindleOperationQueue(name: "ex-holder-running")
        stuck.isSuspended = true
        let holder = CTOp("holder")
        try holder.addExclusivityCategory(category)
        try stuck.addOperation(holder)  // its gate opened: it holds the category, though its queue starts nothing
        let waiter = CTOp("waiter")
        try waiter.addExclusivityCategory(category)
        try running.addOperation(waiter)
        #expect(!waiter.isReady)  // a suspended queue's operation keeps its category
        holder.cancel()
        ctFinish(waiter)
        #expect(waiter.runs.count == 1 && !holder.isFinished)
        stuck.isSuspended = false
        ctFinish(holder)
        #expect(holder.runs.count == 0)
        qtDrain(stuck)
        qtDrain(running)
    }

    @Test func aHolderCancelledWhileRunningKeepsTheCategoryUntilItReturns() throws {
        let category = ctCategory("cancel-running")
        let queue = try SpindleOperationQueue(name: "ex-cancel-running", maxConcurrentOperationCount: 2)
        let (holder, started, release) = try ctBlockingHolder("holder", category: category)
        try queue.addOperation(holder)
        #expect(started.wait())
        let waiter = CTOp("waiter")
        try waiter.addExclusivityCategory(category)
        try queue.addOperation(waiter)
        holder.cancel()
        #expect(!waiter.isReady && waiter.runs.count == 0)  // main is still running
        release.open()
        ctFinish(waiter)
        #expect(waiter.runs.count == 1)
        qtDrain(queue)
    }

    @Test func failedHoldersLetGo() throws {
        let category = ctCategory("failed-holder")
        let queue = try SpindleOperationQueue(name: "ex-failed", maxConcurrentOperationCount: 4)
        let throwing = CTOp("throws") { throw CTError(code: 9) }
        try throwing.addExclusivityCategory(category)
        let refused = CTOp("refused")
        try refused.addExclusivityCategory(category)
        try refused.addCondition(CTCondition("no", decide: { _ in .failed(CTError(code: 10)) }))
        let last = CTOp("last")
        try last.addExclusivityCategory(category)
        try queue.addOperations([throwing, refused, last])
        qtDrain(queue)
        #expect(throwing.hasFailed && refused.hasFailed && refused.runs.count == 0 && last.runs.count == 1)
        #expect(!ExclusivityController.shared.isHeld(category))
    }

    @Test func aLongLineOfOperationsWhoseConditionsFailIsHandedOnWithoutDeepRecursion() throws {
        // Each failure cancels its operation, whose release grants the next in line, on the same thread.
        let category = ctCategory("failing-line")
        let queue = try SpindleOperationQueue(name: "ex-failing-line", maxConcurrentOperationCount: 2)
        let (holder, started, release) = try ctBlockingHolder("holder", category: category)
        try queue.addOperation(holder)
        #expect(started.wait())
        let refusing = CTCondition("refuses", decide: { _ in .failed(CTError(code: 0)) })
        let line = try (0..<20_000).map { i -> CTOp in
            let op = CTOp("f\(i)")
            try op.addExclusivityCategory(category)
            try op.addCondition(refusing)
            return op
        }
        try queue.addOperations(line)
        let last = CTOp("last")
        try last.addExclusivityCategory(category)
        try queue.addOperation(last)
        release.open()
        ctFinish(last)
        qtDrain(queue)
        #expect(refusing.evaluated.count == line.count && line.allSatisfy { $0.runs.count == 0 && $0.hasFailed })
        #expect(last.runs.count == 1 && !ExclusivityController.shared.isHeld(category))
    }

    @Test func anOperationHeldBehindABarrierTakesItsCategoryOnlyAfterTheBarrier() throws {
        // `before` (added before the barrier) waits for its category; the barrier waits for `before`; `after`
        // (behind the barrier) must not hold the category meanwhile, or nothing would ever move.
        let category = ctCategory("barrier")
        let queue = try SpindleOperationQueue(name: "ex-barrier", maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let unblock = QTGate()
        let upstream = CTOp("upstream") { unblock.wait() }
        let before = CTOp("before", log: log)
        try before.addDependency(upstream)
        try before.addExclusivityCategory(category)
        try queue.addOperation(before)
        try queue.addOperation(upstream)
        let barrier = queue.addBarrierBlock { log.append("barrier") }
        let after = CTOp("after", log: log)
        try after.addExclusivityCategory(category)
        try queue.addOperation(after)
        #expect(after.dependencies.contains { $0 === barrier } && !ExclusivityController.shared.isHeld(category))
        unblock.open()
        qtDrain(queue)
        #expect(log.all == ["before", "barrier", "after"])
    }

    @Test func aProducedDependencyInTheSameCategoryRunsFirstWithoutDeadlock() throws {
        let category = ctCategory("alert")
        let queue = try SpindleOperationQueue(name: "ex-produce-same", maxConcurrentOperationCount: 2)
        let log = QTLog<String>()
        let inside = QTHighWater()
        let login = CTOp("login-alert", log: log, inside: inside)
        try login.addExclusivityCategory(category)
        let op = CTOp("op", log: log, inside: inside)
        try op.addCondition(CTCondition(category, exclusive: true, produce: { _ in login }))
        try queue.addOperation(op)
        qtDrain(queue)
        #expect(log.all == ["login-alert", "op"] && inside.maximum == 1)
    }

    @Test func cancellingAQueueOnShutdownReleasesItsHolders() throws {
        let category = ctCategory("shutdown")
        let stuck = SpindleOperationQueue(name: "ex-shutdown-stuck")
        let other = SpindleOperationQueue(name: "ex-shutdown-other")
        stuck.isSuspended = true
        let holder = CTOp("holder")
        try holder.addExclusivityCategory(category)
        try stuck.addOperation(holder)
        let waiter = CTOp("waiter")
        try waiter.addExclusivityCategory(category)
        try other.addOperation(waiter)
        #expect(!waiter.isReady)
        stuck.shutdown(.cancel)
        ctFinish(waiter)
        #expect(try stuck.awaitTermination(timeout: .seconds(qtDeadline)))
        #expect(holder.runs.count == 0 && holder.isCancelled && waiter.runs.count == 1)
        qtDrain(other)
    }
}
