import Testing

@testable import Spindle

/// `cancelsOnFailedDependency` at the gate: a dependency that was *cancelled* and had finished before
/// `addDependency` (so it was never counted) still stops the dependent, on a queue and when started by hand.
@Suite struct MutationAuditFailureGateTests {
    @Test func aCancelledDependencyThatFinishedBeforeItWasAddedStopsTheDependentAtStart() throws {
        let upstream = BTCountingOp(name: "upstream")
        upstream.cancel()
        try upstream.start()  // finishes unrun
        #expect(upstream.isFinished && upstream.isCancelled && !upstream.hasFailed)
        let dependent = BTCountingOp(name: "dependent")
        try dependent.addDependency(upstream)  // finished already: not counted
        dependent.cancelsOnFailedDependency = true
        #expect(dependent.isReady && !dependent.isCancelled)
        try dependent.start()
        #expect(dependent.isFinished && dependent.runs.count == 0)
        #expect(dependent.cancellationReason == .dependencyFailed)
    }

    @Test func aCancelledDependencyThatFinishedBeforeItWasAddedStopsTheDependentOnAQueue() throws {
        let queue = SpindleOperationQueue(name: "bt-cancelled-gate")
        let upstream = BTCountingOp(name: "upstream")
        upstream.cancel()
        try queue.addOperation(upstream)
        qtDrain(queue)
        #expect(upstream.isFinished && upstream.runs.count == 0)
        let dependent = BTCountingOp(name: "dependent")
        try dependent.addDependency(upstream)
        dependent.cancelsOnFailedDependency = true
        try queue.addOperation(dependent)
        qtDrain(queue)
        #expect(dependent.isFinished && dependent.isCancelled && dependent.runs.count == 0)
        #expect(dependent.cancellationReason == .dependencyFailed)
    }
}
