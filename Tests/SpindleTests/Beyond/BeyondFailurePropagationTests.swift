import Testing

@testable import Spindle

/// Failure propagation: opt-in per dependent; dependency errors readable; Apple's default unchanged.
@Suite struct BeyondFailurePropagationTests {
    @Test func dependentOfAFailedOperationIsCancelledUnderTheOptIn() throws {
        let queue = try SpindleOperationQueue(name: "bt-fail", maxConcurrentOperationCount: 2)
        let failing = BTThrowingOp(code: 7, name: "failing")
        let dependent = BTCountingOp(name: "dependent")
        dependent.cancelsOnFailedDependency = true
        try dependent.addDependency(failing)
        try queue.addOperations([dependent, failing])
        qtDrain(queue)
        #expect(failing.runs.count == 1 && failing.hasFailed)
        #expect(dependent.isFinished && dependent.isCancelled)
        #expect(dependent.runs.count == 0)
        #expect(dependent.cancellationReason == .dependencyFailed)
        #expect(dependent.dependencyErrors.compactMap { $0 as? BTError } == [BTError(code: 7)])
        let snapshot = queue.snapshot()
        #expect(snapshot.failed == 1 && snapshot.cancelled == 1 && snapshot.finished == 2)
    }

    @Test func dependentOfACancelledOperationIsCancelledUnderTheOptIn() throws {
        let queue = SpindleOperationQueue(name: "bt-cancelled-dep")
        let upstream = BTCountingOp(name: "upstream")
        upstream.cancel()
        let dependent = BTCountingOp(name: "dependent")
        dependent.cancelsOnFailedDependency = true
        try dependent.addDependency(upstream)
        try queue.addOperations([upstream, dependent])
        qtDrain(queue)
        #expect(upstream.runs.count == 0 && dependent.runs.count == 0)
        #expect(dependent.cancellationReason == .dependencyFailed)
        #expect(dependent.dependencyErrors.isEmpty)  // cancelled, not failed: no error
    }

    @Test func withoutTheOptInDependentsRunAsWithApple() throws {
        let queue = SpindleOperationQueue(name: "bt-default")
        let failing = BTThrowingOp(code: 1, name: "failing")
        let cancelled = BTCountingOp(name: "cancelled")
        cancelled.cancel()
        let dependent = BTCountingOp(name: "dependent")
        #expect(!dependent.cancelsOnFailedDependency)
        try dependent.addDependency(failing)
        try dependent.addDependency(cancelled)
        try queue.addOperations([failing, cancelled, dependent])
        qtDrain(queue)
        #expect(dependent.runs.count == 1 && !dependent.isCancelled)
        #expect(dependent.cancellationReason == nil)
        #expect(dependent.dependencyErrors.compactMap { $0 as? BTError } == [BTError(code: 1)])
    }

    @Test func failureIsCaughtAtStartWhenTheDependencyFailedBeforeItWasAdded() throws {
        let failing = BTThrowingOp(code: 2, name: "failing")
        try failing.start()
        #expect(failing.hasFailed)
        let dependent = BTCountingOp(name: "dependent")
        try dependent.addDependency(failing)  // finished already: not counted, the dependent is ready
        dependent.cancelsOnFailedDependency = true
        #expect(dependent.isReady && !dependent.isCancelled)
        try dependent.start()
        #expect(dependent.isFinished && dependent.runs.count == 0)
        #expect(dependent.cancellationReason == .dependencyFailed)
    }

    @Test func concurrentOperationFinishingWithAnErrorCountsAsFailed() throws {
        let queue = SpindleOperationQueue(name: "bt-concurrent-fail")
        let upstream = BTFinishingConcurrentOp(error: BTError(code: 3))
        let dependent = BTCountingOp(name: "dependent")
        dependent.cancelsOnFailedDependency = true
        try dependent.addDependency(upstream)
        try queue.addOperations([upstream, dependent])
        qtDrain(queue)
        #expect(upstream.hasFailed)
        #expect(dependent.runs.count == 0 && dependent.cancellationReason == .dependencyFailed)
    }

    @Test func cancellationPropagatesAlongAChainOfOptedInDependents() throws {
        let queue = try SpindleOperationQueue(name: "bt-chain", maxConcurrentOperationCount: 3)
        let head = BTThrowingOp(code: 4, name: "head")
        var chain: [BTCountingOp] = []
        var previous: SpindleOperation = head
        for i in 0..<10 {
            let op = BTCountingOp(name: "link\(i)")
            op.cancelsOnFailedDependency = true
            try op.addDependency(previous)
            chain.append(op)
            previous = op
        }
        var batch: [SpindleOperation] = Array(chain.reversed())
        batch.append(head)
        try queue.addOperations(batch)
        qtDrain(queue)
        #expect(chain.allSatisfy { $0.runs.count == 0 && $0.cancellationReason == .dependencyFailed })
    }

    /// The dependency fails on one queue while its dependent waits on another, many times: the dependent never
    /// runs `main`, and an opted-out twin of it always does.
    @Test func noDependentEverSlipsPastAFailure() throws {
        let upstreamQueue = try SpindleOperationQueue(name: "bt-up", maxConcurrentOperationCount: 2)
        let downstreamQueue = try SpindleOperationQueue(name: "bt-down", maxConcurrentOperationCount: 2)
        var guarded: [BTCountingOp] = [], unguarded: [BTCountingOp] = []
        for i in 0..<300 {
            let failing = BTThrowingOp(code: i, name: "f\(i)")
            let a = BTCountingOp(name: "g\(i)")
            a.cancelsOnFailedDependency = true
            let b = BTCountingOp(name: "u\(i)")
            try a.addDependency(failing)
            try b.addDependency(failing)
            try downstreamQueue.addOperations([a, b])
            try upstreamQueue.addOperation(failing)
            guarded.append(a)
            unguarded.append(b)
        }
        qtDrain(upstreamQueue)
        qtDrain(downstreamQueue)
        #expect(guarded.allSatisfy { $0.runs.count == 0 && $0.isCancelled })
        #expect(unguarded.allSatisfy { $0.runs.count == 1 && !$0.isCancelled })
    }
}

/// A concurrent operation that reports its end with `error` (not by throwing from `main`).
final class BTFinishingConcurrentOp: SpindleConcurrentOperation, @unchecked Sendable {
    let failure: BTError
    init(error: BTError) {
        self.failure = error
        super.init()
    }
    override func main() throws {
        try self.finish(throwing: self.failure)  // main runs on the operation's own thread
    }
}
