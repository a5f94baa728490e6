import Synchronization
import Testing

@testable import Spindle

/// Toolkit review (conditions, exclusivity, groups, retries): each test failed (or hung, bounded by a deadline) on
/// the code it was written against. A test that detects a hang unsticks it afterwards, so the run goes on.
@Suite(.serialized) struct ToolkitReviewTests {
    // MARK: - A failed condition and a cancel() override

    /// An operation whose `cancel()` override does not call `super.cancel()`. The failed-dependency gate
    /// (`claimExecution`) copes with such an override by falling back on `markCancelled()`; the condition gate
    /// (`failGate`) only calls `cancel()`.
    final class NoSuperCancelOp: SpindleOperation, @unchecked Sendable {
        let runs = QTCounter()
        let cancels = QTCounter()
        override func cancel() { self.cancels.increment() }  // does not call super.cancel()
        override func main() throws { self.runs.increment() }
    }

    /// A failed condition "finishes the operation unrun" (README, `SpindleOperationCondition.evaluate`): `main` must
    /// not run. With a `cancel()` override that does not call super, `failGate` sets the error and calls `cancel()`,
    /// which does nothing; the gate's hold is then released and the queue runs `main`, which "succeeds" with a
    /// `conditionFailed` error left in place.
    @Test(.timeLimit(.minutes(1))) func aFailedConditionNeverRunsMainWhenCancelIsOverriddenWithoutSuper() throws {
        let queue = try SpindleOperationQueue(name: "tr-nosuper", maxConcurrentOperationCount: 1)
        let op = NoSuperCancelOp()
        op.name = "nosuper"
        let condition = CTCondition("Never", decide: { _ in .failed(CTError(code: 7)) })
        try op.addCondition(condition)
        try queue.addOperation(op)
        ctFinish(op)
        qtDrain(queue)
        #expect(condition.evaluated.count == 1)
        #expect(ctConditionFailure(op) != nil, "the operation does not carry conditionFailed")
        #expect(op.runs.count == 0, "main ran although its condition failed")
        #expect(op.isCancelled, "an operation whose condition failed did not end cancelled")
    }

    // MARK: - Categories taken by the children of a group that has not started

    /// A child of a group takes its categories when it is added, even though it cannot run before the group
    /// starts (the inner queue is suspended): the group waits for its dependency `first`, which waits for the
    /// category the child holds. A hold-and-wait deadlock that no cycle check sees (the same one
    /// `waitForBarrierAhead` avoids for an operation held behind a barrier).
    @Test(.timeLimit(.minutes(1))) func aChildOfAGroupWaitingForADependencyDoesNotHoldItsCategoryMeanwhile() throws {
        let category = ctCategory("tr-group-dep")
        let queue = try SpindleOperationQueue(name: "tr-group-dep", maxConcurrentOperationCount: 2)
        let child = CTOp("child")
        try child.addExclusivityCategory(category)
        let group = try SpindleGroupOperation(operations: [child])
        let first = CTOp("first")
        try first.addExclusivityCategory(category)
        try group.addDependency(first)
        try queue.addOperation(first)
        try queue.addOperation(group)
        let done = (try? group.waitUntilFinished(timeout: .seconds(qtDeadline))) ?? false
        #expect(done, "deadlock: the group waits for 'first', which waits for the category its child holds")
        if !done {
            #expect(ExclusivityController.shared.isHeld(category), "held by the child of the unstarted group")
            group.cancel()  // unsticks it: the cancelled child lets the category go
            ctFinish(group)
        }
        qtDrain(queue)
        #expect(first.runs.count == 1)
        #expect(!done || child.runs.count == 1)
    }

    /// The same through a barrier: the group is added behind a barrier, which waits for an operation added before
    /// it, which waits for the category the group's child took when it was added to the group.
    @Test(.timeLimit(.minutes(1))) func aGroupHeldBehindABarrierDoesNotLetItsChildBlockTheBarrier() throws {
        let category = ctCategory("tr-group-barrier")
        let queue = try SpindleOperationQueue(name: "tr-group-barrier", maxConcurrentOperationCount: 2)
        let child = CTOp("child")
        try child.addExclusivityCategory(category)
        let group = try SpindleGroupOperation(operations: [child])  // the child holds the category from here
        let before = CTOp("before")
        try before.addExclusivityCategory(category)
        try queue.addOperation(before)  // waits in the category's line
        let barrier = queue.addBarrierBlock {}
        try queue.addOperation(group)  // behind the barrier, which waits for 'before'
        let done = (try? group.waitUntilFinished(timeout: .seconds(qtDeadline))) ?? false
        #expect(done, "deadlock: group behind barrier, barrier waits for 'before', 'before' waits for the child")
        if !done {
            group.cancel()
            ctFinish(group)
        }
        ctFinish(barrier)
        qtDrain(queue)
        #expect(before.runs.count == 1)
    }

    /// The same root cause, seen through a condition: a child's condition is evaluated when the child is added to
    /// a group that has not started, not when what the child waits for has finished. The group depends on
    /// `login`; the child's condition checks what `login` does. Its children run only once the group starts, i.e.
    /// after `login` (the cycle search itself says so: a child of an unstarted group waits for what the group
    /// waits for), yet the condition is asked at once, fails, and the child never runs.
    @Test(.timeLimit(.minutes(1))) func aChildsConditionIsEvaluatedOnlyOnceTheGroupCanStart() throws {
        let queue = try SpindleOperationQueue(name: "tr-group-cond", maxConcurrentOperationCount: 2)
        let loggedIn = QTFlag()
        let login = CTOp("login") { loggedIn.set() }
        let condition = CTCondition("LoggedIn", decide: { _ in loggedIn.isSet ? .satisfied : .failed(CTError(code: 1)) })
        let child = CTOp("child")
        try child.addCondition(condition)
        let group = try SpindleGroupOperation(operations: [child])
        try group.addDependency(login)
        let evaluatedBeforeLogin = condition.evaluated.count
        try queue.addOperations([login, group])
        ctFinish(group)
        qtDrain(queue)
        #expect(evaluatedBeforeLogin == 0, "the child's condition was evaluated before the group could start")
        #expect(child.runs.count == 1, "the child did not run: its condition was evaluated before 'login' ran")
        #expect(ctConditionFailure(child) == nil)
    }

    // MARK: - A condition-only operation behind a barrier

    /// An operation with a condition (and no category) added behind a barrier had its condition evaluated at once,
    /// on the adding thread, before the barrier ran: only operations with categories got the implicit dependency
    /// on the barrier (`waitForBarrierAhead`). Apple's sample evaluates conditions in an operation of the same
    /// queue, i.e. behind the barrier.
    @Test(.timeLimit(.minutes(1))) func aConditionBehindABarrierIsEvaluatedAfterTheBarrierRan() throws {
        let queue = try SpindleOperationQueue(name: "tr-barrier-cond", maxConcurrentOperationCount: 2)
        let barrierRan = QTFlag()
        let hold = QTGate()
        try queue.addOperation(CTOp("before") { hold.wait() })
        let barrier = queue.addBarrierBlock { barrierRan.set() }
        let condition = CTCondition("AfterBarrier", decide: { _ in
            barrierRan.isSet ? .satisfied : .failed(CTError(code: 3))
        })
        let op = CTOp("op")
        try op.addCondition(condition)
        try queue.addOperation(op)
        let evaluatedBeforeBarrier = condition.evaluated.count
        hold.open()
        ctFinish(op)
        ctFinish(barrier)
        qtDrain(queue)
        #expect(evaluatedBeforeBarrier == 0, "the condition was evaluated before the barrier ahead of it ran")
        #expect(op.runs.count == 1, "the operation did not run: its condition was evaluated before the barrier")
    }
}
