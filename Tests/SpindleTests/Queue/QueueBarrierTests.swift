import Testing

@testable import Spindle

/// Barrier blocks (catalogue J82, J83) and suspension (K85, K86).
@Suite struct QueueBarrierTests {
    // MARK: - Barriers

    @Test func barrierOnASuspendedEmptyQueueWaitsForResume() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let ran = QTFlag()
        let done = QTGate()
        queue.addBarrierBlock {
            ran.set()
            done.open()
        }
        // The barrier is pending work: the queue cannot drain while suspended, and the block has not run.
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .milliseconds(100)) == false)
        #expect(!ran.isSet)
        queue.isSuspended = false
        #expect(done.wait())
        qtDrain(queue)
        #expect(ran.isSet)
    }

    @Test func barrierRunsAfterEarlierOperationsAndLaterOnesStartAfterItReturns() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let bothStarted = QTRendezvous(parties: 2)
        let release = QTGate()
        let met = QTCounter()
        let a = queue.addOperation {
            if bothStarted.arrive() { met.increment() }
            release.wait()
            log.append("a-end")
        }
        let b = queue.addOperation {
            if bothStarted.arrive() { met.increment() }
            release.wait()
            log.append("b-end")
        }
        let barrierRunning = QTGate()
        queue.addBarrierBlock {
            log.append("barrier-start")
            barrierRunning.open()
            log.append("barrier-end")
        }
        let c = queue.addOperation { log.append("c-start") }
        #expect(try c.waitUntilFinished(timeout: .milliseconds(50)) == false)
        #expect(!c.isExecuting)
        release.open(2)
        #expect(barrierRunning.wait())
        qtDrain(queue)
        #expect(met.count == 2)
        #expect(a.isFinished && b.isFinished && c.isFinished)
        let events = log.all
        #expect(events.count == 5)
        #expect(Set(events.prefix(2)) == ["a-end", "b-end"])
        #expect(Array(events.suffix(3)) == ["barrier-start", "barrier-end", "c-start"])
    }

    @Test func barrierRunsAloneEvenOnAWideQueue() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 8)
        let active = QTHighWater()
        let barrierInside = QTHighWater()
        let violations = QTCounter()
        let barriersRun = QTCounter()
        for _ in 0..<20 {
            for _ in 0..<4 {
                queue.addOperation {
                    active.enter()
                    if barrierInside.inside != 0 { violations.increment() }
                    active.leave()
                }
            }
            queue.addBarrierBlock {
                barrierInside.enter()
                if active.inside != 0 { violations.increment() }
                barriersRun.increment()
                barrierInside.leave()
            }
        }
        // The last barrier sees every earlier operation gone from the queue.
        let countSeenByLastBarrier = QTLog<Int>()
        queue.addBarrierBlock { countSeenByLastBarrier.append(SpindleOperationQueue.current?.operationCount ?? -1) }
        qtDrain(queue)
        #expect(barriersRun.count == 20)
        #expect(violations.count == 0)
        #expect(barrierInside.maximum == 1)
        #expect(countSeenByLastBarrier.all == [0])
    }

    @Test func barriersAreNotCountedInOperationsOrOperationCount() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let a = qtNamed("a")
        try queue.addOperation(a)
        queue.addBarrierBlock {}
        let b = qtNamed("b")
        try queue.addOperation(b)
        queue.addBarrierBlock {}
        #expect(queue.operationCount == 2)
        #expect(queue.operations.map { ObjectIdentifier($0) } == [a, b].map { ObjectIdentifier($0) })
        queue.isSuspended = false
        qtDrain(queue)
        #expect(queue.operationCount == 0)
        #expect(queue.operations.isEmpty)
    }

    @Test func operationsBehindABarrierAreOrderedByPriorityOnceReleased() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        let started = QTGate(), release = QTGate()
        queue.addOperation {
            started.open()
            release.wait()
        }
        #expect(started.wait())
        queue.addBarrierBlock { log.append("barrier") }
        let low = qtNamed("low") { log.append("low") }
        low.queuePriority = .low
        let high = qtNamed("high") { log.append("high") }
        high.queuePriority = .veryHigh
        try queue.addOperations([low, high])
        release.open()
        qtDrain(queue)
        #expect(log.all == ["barrier", "high", "low"])
    }

    // MARK: - The barrier's operation (issue 19)

    @Test func addBarrierBlockReturnsTheBarrierToWaitOnAndObserve() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let release = QTGate()
        let bothStarted = QTGate()
        for name in ["a", "b"] {
            queue.addOperation {
                bothStarted.open()
                release.wait()
                log.append("\(name)-end")
            }
        }
        #expect(bothStarted.wait() && bothStarted.wait())
        let barrier = queue.addBarrierBlock { log.append("barrier") }
        #expect(barrier.name == "barrier")
        let changes = QTLog<String>()
        barrier.observe([.isExecuting, .isFinished]) { _, change in
            changes.append(change.phaseAndKey)
            if change.phase == .did && change.key == .isFinished { log.append("observed did isFinished") }
        }
        barrier.completionBlock = { log.append("barrier-completion") }
        let barrierWasFinishedWhenCStarted = QTLog<Bool>()
        let c = queue.addOperation {
            barrierWasFinishedWhenCStarted.append(barrier.isFinished)
            log.append("c")
        }
        // Held behind a and b: the wait on it times out, and c waits behind it.
        #expect(try barrier.waitUntilFinished(timeout: .milliseconds(50)) == false)
        #expect(!barrier.isExecuting && !barrier.isFinished && !c.isExecuting && !c.isFinished)
        release.open(2)
        try barrier.waitUntilFinished()  // returns once the block and the completion block have returned
        #expect(barrier.isFinished && !barrier.isCancelled && barrier.error == nil)
        let atReturn = log.all
        #expect(Set(atReturn.prefix(2)) == ["a-end", "b-end"])
        #expect(Array(atReturn.dropFirst(2).prefix(3)) == ["barrier", "observed did isFinished", "barrier-completion"])
        #expect(try c.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(Array(log.all.suffix(1)) == ["c"])
        #expect(barrierWasFinishedWhenCStarted.all == [true])
        let events = changes.all  // started, then finished: what observing any operation run by a queue sees
        #expect(Array(events.prefix(2)) == ["will isExecuting", "did isExecuting"], "\(events)")
        #expect(events.count == 6 && events.last == "did isFinished", "\(events)")
        qtDrain(queue)
    }

    @Test func addBarrierBlockOnAShutDownQueueReturnsItFinishedAndCancelled() throws {
        let queue = try SpindleOperationQueue(name: "closed", maxConcurrentOperationCount: 2)
        queue.shutdown()
        let ran = QTFlag()
        let barrier = queue.addBarrierBlock { ran.set() }
        #expect(barrier.isFinished && barrier.isCancelled && !barrier.isExecuting)
        #expect(try barrier.waitUntilFinished(timeout: .zero))
        #expect(barrier.name == "barrier")
        let observed = QTLog<String>()
        barrier.observe([.isFinished]) { _, change in observed.append(change.phaseAndKey) }
        #expect(observed.all == ["did isFinished"])  // an observer registered after the end is told once
        #expect(!ran.isSet)
        #expect(queue.operationCount == 0)
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    @Test func aCancelledBarrierSkipsItsBlockButKeepsItsPlace() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        queue.isSuspended = true
        let log = QTLog<String>()
        let a = queue.addOperation { log.append("a") }
        let barrierRan = QTFlag()
        let barrier = queue.addBarrierBlock { barrierRan.set() }
        let aWasFinishedWhenCStarted = QTLog<Bool>()
        let c = queue.addOperation {
            aWasFinishedWhenCStarted.append(a.isFinished)
            log.append("c")
        }
        barrier.cancel()
        queue.isSuspended = false
        try barrier.waitUntilFinished()
        #expect(barrier.isFinished && barrier.isCancelled && !barrierRan.isSet)
        qtDrain(queue)
        #expect(c.isFinished && !c.isCancelled)
        #expect(log.all == ["a", "c"])
        #expect(aWasFinishedWhenCStarted.all == [true])
    }

    // MARK: - Suspension

    @Test func newQueueIsNotSuspendedAndTheFlagRoundTrips() throws {
        let queue = SpindleOperationQueue()
        #expect(queue.isSuspended == false)
        queue.isSuspended = true
        #expect(queue.isSuspended == true)
        queue.isSuspended = false
        #expect(queue.isSuspended == false)
    }

    @Test func suspendedQueueStartsNothingUntilResumed() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        queue.isSuspended = true
        let ran = QTCounter()
        let ops = (0..<5).map { _ in SpindleBlockOperation { ran.increment() } }
        try queue.addOperations(ops)
        #expect(try ops[0].waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(ran.count == 0)
        #expect(queue.operationCount == 5)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(ran.count == 5)
    }

    @Test func suspendingASerialQueueLetsTheRunningOperationFinishAndHoldsTheNext() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let started = QTGate(), release = QTGate()
        let a = queue.addOperation {
            started.open()
            release.wait()
        }
        let bRan = QTFlag()
        let b = queue.addOperation { bRan.set() }
        #expect(started.wait())
        queue.isSuspended = true
        release.open()
        #expect(try a.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(try b.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!bRan.isSet)
        #expect(queue.operationCount == 1)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(bRan.isSet)
    }

    /// An operation with an exclusivity category added behind a barrier depends on that barrier; a cancel-all that
    /// cancelled the barrier earlier is no failed dependency to it (`cancelsOnFailedDependency`): it runs, as a
    /// plain operation added with it does.
    @Test func aBarrierCancelledByACancelAllIsNoFailedDependency() throws {
        let queue = try SpindleOperationQueue(name: "barrier-cancelled", maxConcurrentOperationCount: 2)
        let gate = QTGate()
        queue.addOperation { _ = gate.wait() }
        _ = queue.addBarrierBlock {}
        queue.cancelAllOperations()
        let ran = QTLog<String>()
        let plain = SpindleBlockOperation { ran.append("plain") }
        plain.cancelsOnFailedDependency = true
        let gated = SpindleBlockOperation { ran.append("gated") }
        try gated.addExclusivityCategory("barrier-cancelled")
        gated.cancelsOnFailedDependency = true
        try queue.addOperation(plain)
        try queue.addOperation(gated)
        gate.open()
        qtDrain(queue)
        #expect(Set(ran.all) == ["plain", "gated"], "gated: \(String(describing: gated.cancellationReason))")
    }
}
