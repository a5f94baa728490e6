import Testing

@testable import Spindle

/// A group holds its exclusivity categories until its last child finished, so a child that needs one of them
/// could never run: it is refused (finishes unrun, as after a failed condition) instead of waiting for ever. Only
/// a category held by a group the operation is inside is refused; any other holder is waited for as usual.
@Suite(.serialized) struct ExclusivityGroupRefusalTests {
    /// The child's refusal, as its error says it: (the category, the group named).
    private func refusal(of op: SpindleOperation) -> (category: String, group: String)? {
        guard let failure = ctConditionFailure(op),
              case .categoryHeldByEnclosingGroup(_, let category, let group)? = failure.underlying as? SpindleError
        else { return nil }
        #expect(failure.condition == "exclusivity '\(category)'")
        return (category, group)
    }

    /// Added to a running group that holds the category: refused, and the group finishes.
    @Test(.timeLimit(.minutes(1))) func aChildAddedToARunningGroupInItsCategoryIsRefused() throws {
        let category = ctCategory("eg-running")
        let queue = try SpindleOperationQueue(name: "eg-running", maxConcurrentOperationCount: 2)
        let started = QTGate()
        let release = QTGate()
        let first = CTOp("first") {
            started.open()
            release.wait()
        }
        // Room for the refused child beside `first`, whatever the CPU count (its refusal comes when it gets a slot):
        // width 2, on threads of its own (the shared pool has one thread per CPU, and `first` blocks where it
        // cannot see).
        let group = try SpindleGroupOperation(operations: [first], maxConcurrentOperationCount: 2, pool: nil)
        group.name = "eg-group"
        try group.addExclusivityCategory(category)
        try queue.addOperation(group)
        #expect(started.wait(seconds: qtDeadline))  // the group runs: it holds the category
        let child = CTOp("child")
        try child.addExclusivityCategory(category)
        try group.addOperation(child)
        let childDone = ctFinish(child)
        release.open()
        let groupDone = ctFinish(group)
        if !childDone { child.cancel() }  // unsticks a hang, so the run goes on
        if !groupDone { release.open() }
        qtDrain(queue)
        #expect(child.runs.count == 0)
        #expect(child.isCancelled)
        #expect(child.cancellationReason == .conditionFailed)
        let seen = self.refusal(of: child)
        #expect(seen?.category == category)
        #expect(seen?.group == "eg-group")
        #expect(first.runs.count == 1)
        #expect(!ExclusivityController.shared.isHeld(category), "the group let its category go when it finished")
    }

    /// A child given to the group before it started: the group takes the category at its start, and the child's
    /// gate, which opens only then, is refused.
    @Test(.timeLimit(.minutes(1))) func aChildGivenBeforeTheGroupStartedIsRefusedAtTheStart() throws {
        let category = ctCategory("eg-initial")
        let queue = try SpindleOperationQueue(name: "eg-initial", maxConcurrentOperationCount: 2)
        let sibling = CTOp("sibling")
        let child = CTOp("child")
        try child.addExclusivityCategory(category)
        let group = try SpindleGroupOperation(operations: [sibling, child])
        try group.addExclusivityCategory(category)
        try queue.addOperation(group)
        let childDone = ctFinish(child)
        let groupDone = ctFinish(group)
        if !childDone { child.cancel() }
        if groupDone { qtDrain(queue) }
        #expect(child.runs.count == 0)
        #expect(self.refusal(of: child)?.category == category)
        #expect(sibling.runs.count == 1)
    }

    /// Two levels down: the outer group holds the category, the inner one does not; the grandchild is refused.
    @Test(.timeLimit(.minutes(1))) func aGrandchildOfAGroupInItsCategoryIsRefused() throws {
        let category = ctCategory("eg-nested")
        let queue = try SpindleOperationQueue(name: "eg-nested", maxConcurrentOperationCount: 2)
        let grandchild = CTOp("grandchild")
        try grandchild.addExclusivityCategory(category)
        let inner = try SpindleGroupOperation(operations: [grandchild])
        let outer = try SpindleGroupOperation(operations: [inner])
        outer.name = "eg-outer"
        try outer.addExclusivityCategory(category)
        try queue.addOperation(outer)
        let grandchildDone = ctFinish(grandchild)
        let outerDone = ctFinish(outer)
        if !grandchildDone { grandchild.cancel() }
        if outerDone { qtDrain(queue) }
        #expect(grandchild.runs.count == 0)
        #expect(self.refusal(of: grandchild)?.group == "eg-outer")
    }

    /// A category held by an operation outside the group is waited for, not refused: the child runs once it is
    /// free. And two children of a group that is not in the category take it in turn.
    @Test(.timeLimit(.minutes(1))) func aCategoryHeldOutsideTheGroupIsWaitedFor() throws {
        let category = ctCategory("eg-outside")
        let queue = try SpindleOperationQueue(name: "eg-outside", maxConcurrentOperationCount: 4)
        let inside = QTHighWater()
        let (holder, started, release) = try ctBlockingHolder("holder", category: category, inside: inside)
        try queue.addOperation(holder)
        #expect(started.wait(seconds: qtDeadline))
        let first = CTOp("first", inside: inside)
        let second = CTOp("second", inside: inside)
        try first.addExclusivityCategory(category)
        try second.addExclusivityCategory(category)
        let group = try SpindleGroupOperation(operations: [first, second])
        try queue.addOperation(group)
        #expect(first.runs.count == 0 && second.runs.count == 0)  // the holder still holds it
        release.open()
        ctFinish(group)
        qtDrain(queue)
        #expect(first.runs.count == 1)
        #expect(second.runs.count == 1)
        #expect(first.error == nil && second.error == nil)
        #expect(inside.maximum == 1, "two operations of one category ran at once")
    }
}
