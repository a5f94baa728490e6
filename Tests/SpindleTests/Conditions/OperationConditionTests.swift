import Synchronization
import Testing

@testable import Spindle

/// Conditions: pass, fail with a typed error, produce a dependency that runs first; evaluated after the
/// dependencies (across queues too), once, in order, outside every lock.
@Suite struct OperationConditionTests {
    @Test func aSatisfiedConditionIsEvaluatedOnceAndTheOperationRuns() throws {
        let queue = SpindleOperationQueue(name: "ct-pass")
        let condition = CTCondition("always")
        let op = CTOp("op")
        try op.addCondition(condition)
        #expect(op.conditions.count == 1 && op.conditions.first?.name == "always")
        #expect(op.exclusivityCategories.isEmpty)
        try queue.addOperation(op)
        ctFinish(op)
        #expect(op.runs.count == 1 && op.completions.count == 1)
        #expect(condition.produced.count == 1 && condition.evaluated.count == 1)
        #expect(op.error == nil && !op.isCancelled && !op.hasFailed && op.cancellationReason == nil)
        qtDrain(queue)
    }

    @Test func aFailedConditionFinishesTheOperationUnrunWithATypedError() throws {
        let queue = SpindleOperationQueue(name: "ct-fail")
        let op = CTOp("op")
        try op.addCondition(CTCondition("never", decide: { _ in .failed(CTError(code: 4)) }))
        try queue.addOperation(op)
        ctFinish(op)
        #expect(op.runs.count == 0 && op.completions.count == 1)
        #expect(op.isFinished && op.isCancelled && op.hasFailed)
        #expect(op.cancellationReason == .conditionFailed)
        let failure = try #require(ctConditionFailure(op))
        #expect(failure.condition == "never" && (failure.underlying as? CTError) == CTError(code: 4))
        #expect("\(op.error!)".contains("condition 'never' failed"))
        qtDrain(queue)
        #expect(queue.snapshot().failed == 1)
    }

    @Test func theFailureReachesDependentsAsAFailedDependency() throws {
        let queue = try SpindleOperationQueue(name: "ct-fail-dependents", maxConcurrentOperationCount: 2)
        let gated = CTOp("gated")
        try gated.addCondition(CTCondition("never", decide: { _ in .failed(CTError(code: 5)) }))
        let optedIn = CTOp("opted-in")
        optedIn.cancelsOnFailedDependency = true
        try optedIn.addDependency(gated)
        let plain = CTOp("plain")
        try plain.addDependency(gated)
        try queue.addOperations([optedIn, plain, gated])
        qtDrain(queue)
        #expect(optedIn.runs.count == 0 && optedIn.cancellationReason == .dependencyFailed)
        #expect(optedIn.dependencyErrors.count == 1 && ctConditionFailure(gated) != nil)
        #expect(plain.runs.count == 1)  // Apple's rule without the opt-in: a dependency is done however it ended
    }

    @Test func aProducedDependencyJoinsTheQueueAndRunsFirst() throws {
        let queue = try SpindleOperationQueue(name: "ct-produce", maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let login = CTOp("login", log: log)
        let condition = CTCondition("logged-in", produce: { _ in login }, decide: { _ in
            log.append("evaluate")
            return login.isFinished ? .satisfied : .failed(CTError(code: 1))
        })
        let op = CTOp("upload", log: log)
        try op.addCondition(condition)
        try queue.addOperation(op)
        ctFinish(op)
        qtDrain(queue)
        #expect(log.all == ["login", "evaluate", "upload"])
        #expect(op.dependencies.first === login && login.runs.count == 1 && op.runs.count == 1)
        #expect(condition.produced.count == 1 && condition.evaluated.count == 1)
    }

    @Test func aBarrierAddedWhileTheConditionIsAskedCannotComeBetweenTheOperationAndItsDependency() throws {
        // The dependency joins the queue before the operation: a barrier added meanwhile (here by the condition
        // itself, as another thread could) is ahead of both, instead of waiting for the operation while the
        // dependency waits behind it.
        let queue = try SpindleOperationQueue(name: "ct-barrier", maxConcurrentOperationCount: 2)
        let log = QTLog<String>()
        let login = CTOp("login", log: log)
        let condition = CTCondition("needs-login", produce: { _ in
            queue.addBarrierBlock { log.append("barrier") }
            return login
        })
        let op = CTOp("op", log: log)
        try op.addCondition(condition)
        try queue.addOperation(op)
        qtDrain(queue)
        #expect(log.all == ["barrier", "login", "op"])
    }

    @Test func theConditionIsEvaluatedOnlyAfterDependenciesOnAnotherQueueFinished() throws {
        let first = SpindleOperationQueue(name: "ct-across-1")
        let second = SpindleOperationQueue(name: "ct-across-2")
        let release = QTGate()
        let started = QTGate()
        let upstream = CTOp("upstream") {
            started.open()
            release.wait()
        }
        let sawUpstreamFinished = QTFlag()
        let condition = CTCondition("after-upstream", decide: { _ in
            if upstream.isFinished { sawUpstreamFinished.set() }
            return .satisfied
        })
        let op = CTOp("op")
        try op.addDependency(upstream)
        try op.addCondition(condition)
        try second.addOperation(upstream)
        try first.addOperation(op)
        #expect(started.wait())
        #expect(!op.isReady && condition.evaluated.count == 0)  // upstream is still running
        release.open()
        ctFinish(op)
        #expect(condition.evaluated.count == 1 && sawUpstreamFinished.isSet && op.runs.count == 1)
        qtDrain(first)
        qtDrain(second)
    }

    @Test func aProducedDependencyAlreadyInAQueueIsWaitedForNotAddedAgain() throws {
        let mine = SpindleOperationQueue(name: "ct-mine")
        let other = SpindleOperationQueue(name: "ct-other")
        other.isSuspended = true
        let elsewhere = CTOp("elsewhere")
        try other.addOperation(elsewhere)
        let op = CTOp("op")
        let condition = CTCondition("needs-elsewhere", produce: { _ in elsewhere })
        try op.addCondition(condition)
        try mine.addOperation(op)
        #expect(!op.isReady && op.dependencies.first === elsewhere && mine.operationCount == 1)
        other.isSuspended = false
        ctFinish(op)
        #expect(elsewhere.runs.count == 1 && op.runs.count == 1 && op.error == nil)
        qtDrain(mine)
        qtDrain(other)
    }

    @Test func aProducedDependencyThatCannotBeAddedFailsTheOperation() throws {
        let queue = SpindleOperationQueue(name: "ct-produce-self")
        let op = CTOp("op")
        let condition = CTCondition("depends-on-itself", produce: { $0 })  // addDependency(self) is refused
        try op.addCondition(condition)
        try queue.addOperation(op)
        ctFinish(op)
        #expect(op.runs.count == 0 && op.cancellationReason == .conditionFailed && condition.evaluated.count == 0)
        let failure = try #require(ctConditionFailure(op))
        #expect(failure.condition == "depends-on-itself")
        #expect((failure.underlying as? SpindleError)?.description == SpindleError.selfDependency(name: "op").description)
        qtDrain(queue)
    }

    @Test func aQueueShutDownWhileTheConditionIsAskedRefusesTheAddAndLeavesTheOperationAsItWas() throws {
        let queue = SpindleOperationQueue(name: "ct-shutdown")
        let login = CTOp("login")
        let condition = CTCondition("shuts-down", produce: { _ in
            queue.shutdown(.drain)  // during the add: the operation is refused, and so is what it produced
            return login
        })
        let op = CTOp("op")
        try op.addCondition(condition)
        qtExpectError(.queueShutDown(name: "ct-shutdown")) { try queue.addOperation(op) }
        #expect(op.currentState.lifecycle == .idle && op.isReady && !op.isCancelled && op.error == nil)
        #expect(op.dependencies.isEmpty && login.currentState.lifecycle == .idle)  // taken back off it
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
        let other = SpindleOperationQueue(name: "ct-after-shutdown")
        try other.addOperation(op)  // asked again: this time the login joins `other`, and runs first
        ctFinish(op)
        #expect(login.runs.count == 1 && op.runs.count == 1 && condition.produced.count == 2)
        qtDrain(other)
    }

    @Test func conditionsAreEvaluatedInOrderAndTheFirstFailureDecides() throws {
        let queue = SpindleOperationQueue(name: "ct-order")
        let log = QTLog<String>()
        let first = CTCondition("first", decide: { _ in log.append("first"); return .satisfied })
        let second = CTCondition("second", decide: { _ in log.append("second"); return .failed(CTError(code: 2)) })
        let third = CTCondition("third", decide: { _ in log.append("third"); return .satisfied })
        let op = CTOp("op")
        for condition in [first, second, third] { try op.addCondition(condition) }
        try queue.addOperation(op)
        ctFinish(op)
        #expect(log.all == ["first", "second"] && third.evaluated.count == 0)
        #expect(ctConditionFailure(op)?.condition == "second")
        qtDrain(queue)
    }

    @Test func aMutuallyExclusiveConditionPutsTheOperationInItsNamedCategory() throws {
        let category = ctCategory("alert")
        let op = CTOp("op")
        try op.addCondition(CTCondition(category, exclusive: true))
        try op.addCondition(CTCondition("not-exclusive"))
        try op.addExclusivityCategory("zzz-\(category)")
        try op.addExclusivityCategory(category)  // twice: once
        #expect(op.exclusivityCategories == [category, "zzz-\(category)"])
    }

    @Test func aCancelledOperationIsNeitherAskedNorEvaluated() throws {
        let queue = SpindleOperationQueue(name: "ct-cancelled")
        let condition = CTCondition("never-asked")
        let op = CTOp("op")
        try op.addCondition(condition)
        op.cancel()
        try queue.addOperation(op)
        ctFinish(op)
        #expect(condition.produced.count == 0 && condition.evaluated.count == 0)
        #expect(op.runs.count == 0 && op.completions.count == 1 && op.cancellationReason == .cancelled)
        qtDrain(queue)
    }

    /// The dependency a condition produces for a group's child joins the group (counted as its child): the group
    /// finishes only after it (found by review: it joined the inner queue uncounted, and could outlive the group).
    @Test func aDependencyProducedInsideAGroupIsAChildOfTheGroup() throws {
        let release = QTGate()
        let began = QTGate()
        let login = CTOp("login") { began.open(); release.wait() }
        let upload = CTOp("upload")
        try upload.addCondition(CTCondition("logged-in", produce: { _ in login }))
        let group = try SpindleGroupOperation(operations: [upload])
        let queue = SpindleOperationQueue(name: "ct-group")
        try queue.addOperation(group)
        began.wait()
        #expect(login.parentGroup === group)
        #expect(group.unfinishedChildCount == 2 && !group.isFinished)
        release.open()
        ctFinish(group)
        #expect(login.isFinished && upload.runs.count == 1)
        qtDrain(queue)
    }

    @Test func isReadyTurnsFalseWhenEnqueuedAndTrueWhenTheGatePasses() throws {
        let queue = SpindleOperationQueue(name: "ct-ready")
        queue.isSuspended = true
        let release = QTGate()
        let blocker = CTOp("blocker") { release.wait() }
        let op = CTOp("op")
        try op.addCondition(CTCondition("after-blocker", produce: { _ in blocker }))
        let changes = QTLog<Bool>()
        op.observe([.isReady]) { _, change in
            if change.phase == .did, let value = change.newValue.boolValue { changes.append(value) }
        }
        #expect(op.isReady)
        try queue.addOperation(op)
        #expect(!op.isReady)
        queue.isSuspended = false
        release.open()
        ctFinish(op)
        #expect(changes.all == [false, true])
        qtDrain(queue)
    }

    @Test func conditionsRunOutsideSpindlesLocks() throws {
        let queue = try SpindleOperationQueue(name: "ct-no-locks", maxConcurrentOperationCount: 2)
        let category = ctCategory("no-locks")
        let extra = CTOp("extra")
        // Each callback takes the operation's lock (name, dependencies), the queue's (operationCount, add) and
        // asks about the category: any of these under one of our locks would deadlock.
        let condition = CTCondition("reentrant", produce: { op in
            _ = (op.name, op.dependencies, queue.operationCount, op.exclusivityCategories)
            return nil
        }, decide: { op in
            _ = (op.name, op.dependencies, queue.operationCount, op.isReady, queue.debugDescription)
            try? queue.addOperation(extra)
            return .satisfied
        })
        let op = CTOp("op")
        try op.addCondition(condition)
        try op.addExclusivityCategory(category)
        let adder = try BTThread("ct-adder") { try? queue.addOperation(op) }
        #expect(adder.join(), "the add (which evaluates the condition) deadlocked")
        ctFinish(op)
        ctFinish(extra)
        #expect(op.runs.count == 1 && extra.runs.count == 1)
        qtDrain(queue)
    }
}
