import Synchronization
import Testing

@testable import Spindle

/// A concurrent operation whose `main` returns without finishing; the test (or a callback thread) calls
/// `finish()` later. Records how often `main` ran and on which thread.
final class QTDeferredFinishOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let mainEntered = QTGate()
    let mainRuns = QTCounter()
    let mainTid = QTLog<Int32>()
    private let high: QTHighWater?

    init(high: QTHighWater? = nil) {
        self.high = high
        super.init()
    }

    override func main() throws {
        self.high?.enter()
        self.mainRuns.increment()
        self.mainTid.append(qtTid())
        self.mainEntered.open()
    }

    /// Reports the end from the calling thread.
    func complete() throws {
        self.high?.leave()
        try self.finish()
    }
}

/// A concurrent operation that hands its end to a callback thread, as an asynchronous API would.
final class QTCallbackOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let runs: QTCounter
    let high: QTHighWater
    let finishErrors: QTCounter
    init(runs: QTCounter, high: QTHighWater, finishErrors: QTCounter) {
        self.runs = runs
        self.high = high
        self.finishErrors = finishErrors
        super.init()
    }
    override func main() throws {
        self.high.enter()
        self.runs.increment()
        let me = self
        try SpindleThread.detach(name: "qt-callback") {
            me.high.leave()
            do { try me.finish() } catch { me.finishErrors.increment() }
        }
    }
}

/// Concurrent (asynchronous) operations on a queue hold a slot until they report finished (contract item 7;
/// catalogue B12–B19).
@Suite struct QueueConcurrentOperationTests {
    @Test func aConcurrentOperationHoldsItsSlotUntilFinishIsCalledFromAnotherThread() throws {
        // B14 on width 1.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let first = QTDeferredFinishOperation()
        let secondRan = QTFlag()
        let second = SpindleBlockOperation { secondRan.set() }
        try queue.addOperation(first)
        try queue.addOperation(second)
        #expect(first.mainEntered.wait())
        // `main` has returned or is about to: the operation stays executing and keeps the only slot.
        #expect(try second.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!secondRan.isSet && !second.isExecuting)
        #expect(first.isExecuting && !first.isFinished)
        #expect(queue.operationCount == 2)
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .milliseconds(20)) == false)
        // finish() from this thread, which is neither the worker nor main's thread.
        #expect(!first.mainTid.all.contains(qtTid()))
        try first.complete()
        #expect(first.isFinished && !first.isExecuting)
        #expect(try second.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(secondRan.isSet)
        qtDrain(queue)
        qtExpectError(.operationAlreadyFinished(name: first.displayName)) { try first.finish() }
    }

    @Test func finishFromACallbackThreadReleasesTheSlotAndTheDependents() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let runs = QTCounter(), errors = QTCounter()
        let high = QTHighWater()
        let upstream = QTCallbackOperation(runs: runs, high: high, finishErrors: errors)
        let completed = QTFlag()
        upstream.completionBlock = { completed.set() }
        let sawUpstreamFinished = QTLog<Bool>()
        let downstream = SpindleBlockOperation {
            sawUpstreamFinished.append(upstream.isFinished)
            sawUpstreamFinished.append(completed.isSet)
        }
        try downstream.addDependency(upstream)
        try queue.addOperations([downstream, upstream])
        qtDrain(queue)
        #expect(runs.count == 1 && errors.count == 0)
        #expect(sawUpstreamFinished.all == [true, true])
    }

    @Test func twoHundredConcurrentOperationsOnWidthTenEachRunExactlyOnce() throws {
        // B19.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 10)
        let high = QTHighWater()
        let errors = QTCounter()
        let counters = (0..<200).map { _ in QTCounter() }
        let ops = counters.map { QTCallbackOperation(runs: $0, high: high, finishErrors: errors) }
        try queue.addOperations(Array(ops[0..<100]))
        for op in ops[100...] { try queue.addOperation(op) }
        qtDrain(queue)
        #expect(counters.allSatisfy { $0.count == 1 })
        #expect(ops.allSatisfy { $0.isFinished && !$0.isExecuting })
        #expect(errors.count == 0)
        #expect(high.maximum <= 10, "at most ten hold a slot at once (saw \(high.maximum))")
        #expect(queue.operationCount == 0)
    }

    @Test func slotsHeldByConcurrentOperationsBlockTheWidthButNotThePool() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let a = QTDeferredFinishOperation(), b = QTDeferredFinishOperation()
        let plainRan = QTFlag()
        let plain = SpindleBlockOperation { plainRan.set() }
        try queue.addOperations([a, b, plain])
        #expect(a.mainEntered.wait() && b.mainEntered.wait())
        #expect(try plain.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!plainRan.isSet)
        try a.complete()
        #expect(try plain.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(b.isExecuting)
        try b.complete()
        qtDrain(queue)
        #expect(qtWorkerThreadCount(queue) <= 2)
    }

    @Test func aConcurrentOperationCancelledBeforeItsQueueStartsItFinishesUnrun() throws {
        // B18.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let op = QTDeferredFinishOperation()
        let completed = QTFlag()
        op.completionBlock = { completed.set() }
        try queue.addOperation(op)
        op.cancel()
        queue.isSuspended = false
        qtDrain(queue)
        #expect(op.isFinished && op.isCancelled)
        #expect(op.mainRuns.count == 0)
        #expect(completed.isSet)
    }

    @Test func aConcurrentOperationWhoseMainThrowsFinishesAndFreesItsSlot() throws {
        struct Boom: Error {}
        final class Throwing: SpindleConcurrentOperation, @unchecked Sendable {
            override func main() throws { throw Boom() }
        }
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let op = Throwing()
        let after = SpindleBlockOperation {}
        try queue.addOperations([op, after])
        qtDrain(queue)
        #expect(op.isFinished)
        #expect(op.error is Boom)
        #expect(after.isFinished)
    }

    @Test func currentInsideAConcurrentOperationsStartIsItsQueue() throws {
        final class Probe: SpindleConcurrentOperation, @unchecked Sendable {
            let seen = QTLog<Bool>()
            weak var expected: SpindleOperationQueue?
            override func start() throws {
                self.seen.append(SpindleOperationQueue.current === self.expected && self.expected != nil)
                try super.start()
            }
            override func main() throws { try self.finish() }
        }
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let probe = Probe()
        probe.expected = queue
        try queue.addOperation(probe)
        qtDrain(queue)
        #expect(probe.seen.all == [true])
    }

    @Test func waitingOnItsOwnQueueFromAConcurrentOperationsMainThrows() throws {
        // Contract item 3: `main` of a concurrent operation runs on its own thread, but the operation is still
        // running on (and holding a slot of) the queue; waiting for that queue from there must throw.
        final class SelfWaiter: SpindleConcurrentOperation, @unchecked Sendable {
            weak var queue: SpindleOperationQueue?
            let outcome = QTLog<String>()
            override func main() throws {
                do {
                    let drained = try self.queue?.waitUntilAllOperationsAreFinished(timeout: .seconds(1))
                    self.outcome.append("returned \(String(describing: drained))")
                } catch {
                    self.outcome.append("\(error)")
                }
                try self.finish()
            }
        }
        let queue = try SpindleOperationQueue(name: "async-self-wait", maxConcurrentOperationCount: 2)
        let op = SelfWaiter()
        op.queue = queue
        try queue.addOperation(op)
        qtDrain(queue)
        #expect(op.outcome.all == [SpindleError.waitOnOwnQueue(name: "async-self-wait").description])
    }

    /// Issue 19: `finish()` on a cancelled operation that still waits in its queue throws `operationNotExecuting`
    /// (the documentation said a cancelled operation could always be finished this way) and changes nothing: the
    /// queue finishes it, unrun, once it reaches it.
    @Test func finishOnACancelledOperationStillWaitingInItsQueueThrowsAndTheQueueFinishesIt() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let op = QTDeferredFinishOperation()
        op.name = "waiting"
        try queue.addOperation(op)
        op.cancel()
        qtExpectError(.operationNotExecuting(name: "waiting")) { try op.finish() }
        #expect(!op.isFinished && op.isCancelled && queue.operationCount == 1)
        queue.isSuspended = false
        #expect(try op.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(op.isFinished && op.mainRuns.count == 0)
        qtDrain(queue)
    }
}
