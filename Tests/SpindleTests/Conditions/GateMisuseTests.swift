import Testing

@testable import Spindle

/// Misuse of conditions and categories: a typed error, nothing changed.
@Suite struct GateMisuseTests {
    @Test func conditionsAndCategoriesCannotBeAddedOnceTheOperationIsInAQueueOrStarted() throws {
        let queue = SpindleOperationQueue(name: "gm-late")
        queue.isSuspended = true
        let category = ctCategory("late")
        let queued = CTOp("queued")
        try queued.addCondition(CTCondition("first"))
        try queue.addOperation(queued)
        qtExpectError(.conditionAddedTooLate(name: "queued")) { try queued.addCondition(CTCondition("second")) }
        qtExpectError(.conditionAddedTooLate(name: "queued")) { try queued.addExclusivityCategory(category) }
        #expect(queued.conditions.map(\.name) == ["first"] && queued.exclusivityCategories.isEmpty)
        queue.isSuspended = false
        ctFinish(queued)

        let plain = CTOp("plain")  // no gate: started by hand, then too late
        try plain.start()
        qtExpectError(.conditionAddedTooLate(name: "plain")) { try plain.addExclusivityCategory(category) }
        #expect(plain.exclusivityCategories.isEmpty && !plain.currentState.isGated)
        qtDrain(queue)
    }

    @Test func aGatedOperationStartedByHandIsRefusedAndUnchanged() throws {
        let op = CTOp("by-hand")
        let condition = CTCondition("any")
        try op.addCondition(condition)
        qtExpectError(.gatedOperationNeedsQueue(name: "by-hand")) { try op.start() }
        #expect(op.currentState.lifecycle == .idle && op.isReady && op.runs.count == 0)
        #expect(condition.produced.count == 0 && condition.evaluated.count == 0)
        #expect(!SpindleOperation.perform(op) && op.currentState.lifecycle == .idle)
        // Still usable: a queue runs it.
        let queue = SpindleOperationQueue(name: "gm-by-hand")
        try queue.addOperation(op)
        ctFinish(op)
        #expect(op.runs.count == 1 && condition.evaluated.count == 1)
        qtDrain(queue)
    }

    @Test func aCancelledGatedOperationStartedByHandFinishesUnrun() throws {
        let op = CTOp("cancelled-by-hand")
        try op.addExclusivityCategory(ctCategory("by-hand"))
        op.cancel()
        try op.start()
        #expect(op.isFinished && op.runs.count == 0 && op.completions.count == 1)
    }

    @Test func aRefusedBatchGivesTheGateHoldBack() throws {
        let queue = SpindleOperationQueue(name: "gm-batch")
        let finished = CTOp("finished")
        try finished.start()
        let gated = CTOp("gated")
        let condition = CTCondition("once")
        try gated.addCondition(condition)
        qtExpectError(.operationFinished(name: "finished")) { try queue.addOperations([gated, finished]) }
        #expect(gated.currentState.lifecycle == .idle && gated.isReady && !gated.currentState.hasGateHold)
        #expect(gated.currentState.pendingDependencies == 0 && condition.produced.count == 0)
        try queue.addOperation(gated)
        ctFinish(gated)
        #expect(gated.runs.count == 1 && condition.produced.count == 1 && condition.evaluated.count == 1)
        qtDrain(queue)
    }

    @Test func aFullCallerRunsQueueRefusesAGatedOperationRatherThanRunItOnTheCaller() throws {
        let queue = try SpindleOperationQueue(name: "gm-caller-runs", maxConcurrentOperationCount: 1,
                                              capacity: 1, whenFull: .callerRuns)
        let release = QTGate()
        let started = QTGate()
        try queue.addOperation(CTOp("filler") {
            started.open()
            release.wait()
        })
        #expect(started.wait())
        let gated = CTOp("gated")
        try gated.addExclusivityCategory(ctCategory("caller-runs"))
        qtExpectError(.queueFull(name: "gm-caller-runs", capacity: 1)) { try queue.addOperation(gated) }
        #expect(gated.currentState.lifecycle == .idle && gated.isReady && gated.runs.count == 0)
        release.open()
        qtDrain(queue)
        try queue.addOperation(gated)  // nothing changed: it can be added once there is room
        ctFinish(gated)
        #expect(gated.runs.count == 1)
        qtDrain(queue)
    }

    @Test func aBoundedQueueThatMakesTheProducerWaitArmsTheGateOnceAdmitted() throws {
        let queue = try SpindleOperationQueue(name: "gm-bounded", maxConcurrentOperationCount: 1, capacity: 1)
        let release = QTGate()
        let started = QTGate()
        try queue.addOperation(CTOp("filler") {
            started.open()
            release.wait()
        })
        #expect(started.wait())
        let gated = CTOp("gated")
        let condition = CTCondition("after-room")
        try gated.addCondition(condition)
        let producer = try BTThread("gm-producer") { try? queue.addOperation(gated) }  // blocks: no room
        btWaitForBlockedProducers(queue, 1)
        #expect(condition.produced.count == 1 && condition.evaluated.count == 0)  // asked during the add, not run
        release.open()
        #expect(producer.join())
        ctFinish(gated)
        #expect(gated.runs.count == 1 && condition.produced.count == 1 && condition.evaluated.count == 1)
        qtDrain(queue)
    }

    @Test func theNewErrorsDescribeTheMisuse() {
        #expect(SpindleError.conditionAddedTooLate(name: "x").description.contains("'x' was already added"))
        #expect(SpindleError.gatedOperationNeedsQueue(name: "x").description.contains("only a queue can start it"))
        let failed = SpindleError.conditionFailed(operation: "x", condition: "c", underlying: CTError(code: 1))
        #expect(failed.description == "operation 'x' did not run: its condition 'c' failed: CTError(code: 1)")
        #expect(SpindleCancellationReason.conditionFailed.description == "condition failed")
    }
}
