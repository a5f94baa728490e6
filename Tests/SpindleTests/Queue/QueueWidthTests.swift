import Synchronization
import Testing

@testable import Spindle

/// `maxConcurrentOperationCount` is real (contract item 7; catalogue J74–J79): a width-N queue runs N operations
/// at the same time, each on its own pthread, even when they block; it never runs more.
@Suite struct QueueWidthTests {
    // MARK: - The setting (J74)

    @Test func defaultIsTheSentinelAndResolvesToTheCPUCount() throws {
        let queue = SpindleOperationQueue()
        #expect(SpindleOperationQueue.defaultMaxConcurrentOperationCount == -1)
        #expect(queue.maxConcurrentOperationCount == -1)
        #expect(queue.core.lock.withLock { queue.core.slots.limit } == spindleActiveProcessorCount())
    }

    /// Workers started by one batch each get their own name (`spindle.w0`, `spindle.w1`): the index is taken when
    /// the thread's slot is reserved, not when it is created.
    @Test(qtOwnThreadsOnly) func workersStartedTogetherHaveDistinctNames() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let rendezvous = QTRendezvous(parties: 2)
        let names = QTLog<String>()
        let ops = (0..<2).map { _ in
            SpindleBlockOperation {
                names.append(SpindleThread.current.name)
                _ = rendezvous.arrive()  // both run at once, so they are on two threads
            }
        }
        try queue.addOperations(ops, waitUntilFinished: true)
        #expect(Set(names.all) == ["spindle.w0", "spindle.w1"])
    }

    @Test(arguments: [-1, 0, 1, 1_000_000])
    func limitRoundTrips(_ value: Int) throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        try queue.setMaxConcurrentOperationCount(value)
        #expect(queue.maxConcurrentOperationCount == value)
        let built = try SpindleOperationQueue(maxConcurrentOperationCount: value)
        #expect(built.maxConcurrentOperationCount == value)
    }

    @Test(arguments: [-2, -5, Int.min])
    func negativeLimitOtherThanTheSentinelThrowsAndChangesNothing(_ value: Int) throws {
        qtExpectError(.invalidConcurrencyLimit(value)) { _ = try SpindleOperationQueue(maxConcurrentOperationCount: value) }
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        qtExpectError(.invalidConcurrencyLimit(value)) { try queue.setMaxConcurrentOperationCount(value) }
        #expect(queue.maxConcurrentOperationCount == 2)
        #expect(queue.core.lock.withLock { queue.core.slots.limit } == 2)
        // The queue still works at its old width.
        let rendezvous = QTRendezvous(parties: 2)
        let met = QTCounter()
        for _ in 0..<2 { queue.addOperation { if rendezvous.arrive() { met.increment() } } }
        qtDrain(queue)
        #expect(met.count == 2)
    }

    // MARK: - Width N runs N at once (J76, J78, contract item 7)

    @Test func twoOperationsThatWaitForEachOtherBothProgressOnWidthTwo() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let firstStarted = QTGate(), secondStarted = QTGate()
        let progressed = QTCounter()
        queue.addOperation {
            firstStarted.open()
            if secondStarted.wait() { progressed.increment() }
        }
        queue.addOperation {
            secondStarted.open()
            if firstStarted.wait() { progressed.increment() }
        }
        qtDrain(queue)
        #expect(progressed.count == 2)
    }

    @Test(arguments: [3, 8])
    func widthNRunsNBlockingOperationsAtOnceEachOnItsOwnThread(_ width: Int) throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: width)
        let rendezvous = QTRendezvous(parties: width)
        let tids = QTLog<Int32>()
        let met = QTCounter()
        for _ in 0..<width {
            queue.addOperation {
                tids.append(qtTid())
                if rendezvous.arrive() { met.increment() }
            }
        }
        qtDrain(queue)
        #expect(met.count == width, "all \(width) must run at the same time (only \(met.count) met)")
        #expect(Set(tids.all).count == width, "each operation on its own thread")
        #expect(qtWorkerThreadCount(queue) <= width, "the pool never grows past the width")
    }

    @Test func raisingTheLimitFromOneToFourStartsThreeWaitingOperationsAtOnce() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let rendezvous = QTRendezvous(parties: 4)
        let firstStarted = QTGate()
        let met = QTCounter()
        let tids = QTLog<Int32>()
        var ops: [SpindleOperation] = []
        for i in 0..<4 {
            let op = SpindleBlockOperation {
                tids.append(qtTid())
                if i == 0 { firstStarted.open() }
                if rendezvous.arrive() { met.increment() }
            }
            ops.append(op)
        }
        try queue.addOperations(ops)
        #expect(firstStarted.wait())
        // Width 1: the three others must still be waiting.
        #expect(rendezvous.arrivals <= 1)
        #expect(ops[1...].allSatisfy { !$0.isExecuting && !$0.isFinished })
        try queue.setMaxConcurrentOperationCount(4)
        qtDrain(queue)
        #expect(met.count == 4, "all four must run simultaneously after raising the limit")
        #expect(Set(tids.all).count == 4)
    }

    @Test func limitZeroStartsNothingAndOneStartsIt() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 0)
        let ran = QTFlag()
        let op = queue.addOperation { ran.set() }
        #expect(try op.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!ran.isSet)
        #expect(!op.isExecuting)
        #expect(queue.operationCount == 1)
        try queue.setMaxConcurrentOperationCount(1)
        #expect(try op.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(ran.isSet)
        qtDrain(queue)
    }

    @Test func loweringTheLimitLetsRunningOperationsFinish() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        let rendezvous = QTRendezvous(parties: 3)
        let release = QTGate()
        let met = QTCounter()
        let allRunning = QTGate()
        let finishedMain = QTCounter()
        for _ in 0..<3 {
            queue.addOperation {
                if rendezvous.arrive() { met.increment() }
                allRunning.open()
                release.wait()
                finishedMain.increment()
            }
        }
        for _ in 0..<3 { #expect(allRunning.wait()) }
        #expect(met.count == 3)
        try queue.setMaxConcurrentOperationCount(1)
        let high = QTHighWater()
        let hold = QTGate(), holderStarted = QTGate()
        // The first new operation holds the one slot left: the others must not start beside it.
        queue.addOperation {
            high.enter()
            holderStarted.open()
            hold.wait()
            high.leave()
        }
        var others: [SpindleOperation] = []
        for _ in 0..<4 {
            others.append(queue.addOperation {
                high.enter()
                high.leave()
            })
        }
        release.open(3)
        #expect(holderStarted.wait())
        #expect(try others[0].waitUntilFinished(timeout: .milliseconds(100)) == false,
                "an operation started beside the holder after the width was lowered to 1")
        hold.open()
        qtDrain(queue)
        #expect(finishedMain.count == 3)
        #expect(high.maximum == 1)
    }

    // MARK: - Never more than the limit (J75)

    @Test(arguments: [1, 2, 3])
    func neverMoreThanTheLimitRunAtOnce(_ width: Int) throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: width)
        let high = QTHighWater()
        let ran = QTCounter()
        let sink = QTSink()
        var ops: [SpindleOperation] = []
        ops.reserveCapacity(2_000)
        for i in 0..<2_000 {
            let op = SpindleBlockOperation {
                high.enter()
                // A little work so that overlaps have a chance to show.
                var x = UInt64(i)
                for _ in 0..<200 { x = x &* 6364136223846793005 &+ 1442695040888963407 }
                ran.increment()
                sink.store(x)
                high.leave()
            }
            ops.append(op)
        }
        // Half in one batch, half one by one.
        try queue.addOperations(Array(ops[0..<1_000]))
        for op in ops[1_000...] { try queue.addOperation(op) }
        qtDrain(queue)
        #expect(ran.count == 2_000)
        #expect(high.maximum <= width, "saw \(high.maximum) running at once on width \(width)")
        #expect(high.maximum >= 1)
        #expect(qtWorkerThreadCount(queue) <= width)
    }

    @Test func widthOneIsOneAtATimeAcrossBlockingOperations() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let high = QTHighWater()
        let gate = QTGate()
        let started = QTGate()
        let first = queue.addOperation {
            high.enter()
            started.open()
            gate.wait()
            high.leave()
        }
        let second = queue.addOperation {
            high.enter()
            high.leave()
        }
        #expect(started.wait())
        #expect(try second.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!second.isExecuting)
        gate.open()
        qtDrain(queue)
        #expect(first.isFinished && second.isFinished)
        #expect(high.maximum == 1)
    }
}
