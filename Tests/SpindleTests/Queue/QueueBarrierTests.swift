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

    // MARK: - Suspension

    @Test func newQueueIsNotSuspendedAndTheFlagRoundTrips() throws {
        let queue = try SpindleOperationQueue()
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
}
