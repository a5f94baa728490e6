import Testing

@testable import Spindle

/// Cancellation of queued operations (contract item 6; catalogue H57–H61).
@Suite struct QueueCancellationTests {
    @Test func cancelAllCancelsQueuedAndRunningAndQueuedOnesFinishWithoutMain() throws {
        // H57.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let started = QTGate(), release = QTGate()
        let runningSawCancel = QTFlag()
        let mains = QTLog<String>()
        let completions = QTLog<String>()
        let running = qtNamed("running") {
            mains.append("running")
            started.open()
            release.wait()
            if SpindleOperation.current?.isCancelled == true { runningSawCancel.set() }
        }
        running.completionBlock = { completions.append("running") }
        var queued: [SpindleBlockOperation] = []
        for i in 0..<4 {
            let op = qtNamed("q\(i)") { mains.append("q\(i)") }
            op.completionBlock = { completions.append("q\(i)") }
            queued.append(op)
        }
        try queue.addOperation(running)
        try queue.addOperations(queued)
        #expect(started.wait())
        queue.cancelAllOperations()
        #expect(running.isCancelled && running.isExecuting)
        #expect(queued.allSatisfy { $0.isCancelled && !$0.isFinished })
        #expect(queue.operationCount == 5, "cancelling removes nothing at once")
        release.open()
        qtDrain(queue)
        #expect(runningSawCancel.isSet, "a running operation sees isCancelled and finishes normally")
        #expect(mains.all == ["running"])
        #expect(Set(completions.all) == ["running", "q0", "q1", "q2", "q3"])
        #expect(completions.count == 5)
        #expect(queued.allSatisfy { $0.isFinished && $0.isCancelled && !$0.isExecuting })
        #expect(queue.operationCount == 0)
    }

    @Test func cancellingOneQueuedOperationSkipsOnlyItsMain() throws {
        // H58.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = QTLog<Int>()
        let ops = (0..<5).map { i in SpindleBlockOperation { log.append(i) } }
        try queue.addOperations(ops)
        ops[2].cancel()
        queue.isSuspended = false
        qtDrain(queue)
        #expect(log.all == [0, 1, 3, 4])
        #expect(ops[2].isFinished && ops[2].isCancelled)
    }

    @Test func cancelledWhileSuspendedStayQueuedThenFinishUnrunOnResume() throws {
        // H59.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let mains = QTCounter()
        let completions = QTCounter()
        let ops = (0..<6).map { _ -> SpindleBlockOperation in
            let op = SpindleBlockOperation { mains.increment() }
            op.completionBlock = { completions.increment() }
            return op
        }
        try queue.addOperations(ops)
        queue.cancelAllOperations()
        #expect(queue.operationCount == 6)
        #expect(ops.allSatisfy { $0.isCancelled && $0.isReady && !$0.isFinished && !$0.isExecuting })
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .milliseconds(50)) == false)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(mains.count == 0)
        #expect(completions.count == 6)
        #expect(ops.allSatisfy { $0.isFinished && $0.isCancelled && !$0.isExecuting })
    }

    @Test func cancelAllFromInsideAnOperationOnItsOwnQueueDoesNotCrash() throws {
        // H60.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let mains = QTLog<String>()
        let sawOwnQueue = QTFlag()
        let canceller = qtNamed("canceller") {
            mains.append("canceller")
            guard let own = SpindleOperationQueue.current else { return }
            sawOwnQueue.set()
            own.cancelAllOperations()
        }
        let later = (0..<3).map { i in qtNamed("later\(i)") { mains.append("later\(i)") } }
        try queue.addOperations([canceller] + later)
        qtDrain(queue)
        #expect(sawOwnQueue.isSet)
        #expect(mains.all == ["canceller"])
        #expect(canceller.isCancelled && canceller.isFinished)
        #expect(later.allSatisfy { $0.isCancelled && $0.isFinished })
    }

    @Test func aCancelledOperationWithUnfinishedDependenciesRunsEarly() throws {
        // H61 and contract item 6: ready at once, dependencies unchanged, the queue finishes it early.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let upstreamQueue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        upstreamQueue.isSuspended = true
        let upstream = qtNamed("upstream")
        try upstreamQueue.addOperation(upstream)
        let mainRan = QTFlag()
        let completed = QTGate()
        let b = qtNamed("b") { mainRan.set() }
        b.completionBlock = { completed.open() }
        try b.addDependency(upstream)
        try queue.addOperation(b)
        #expect(!b.isReady)
        b.cancel()
        #expect(b.isReady)
        #expect(completed.wait())
        #expect(try b.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(b.isFinished && b.isCancelled)
        #expect(!mainRan.isSet)
        #expect(!upstream.isFinished)
        #expect(b.dependencies.map { ObjectIdentifier($0) } == [ObjectIdentifier(upstream)])
        qtDrain(queue)
        // The upstream finishing later does not disturb the finished dependent.
        upstreamQueue.isSuspended = false
        qtDrain(upstreamQueue)
        #expect(b.isFinished && b.isCancelled)
    }

    @Test func cancellingARunningOperationDoesNotStopItsMain() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let started = QTGate(), release = QTGate()
        let reachedEnd = QTFlag()
        let op = queue.addOperation {
            started.open()
            release.wait()
            reachedEnd.set()
        }
        #expect(started.wait())
        op.cancel()
        #expect(op.isCancelled && op.isExecuting)
        release.open()
        qtDrain(queue)
        #expect(reachedEnd.isSet)
        #expect(op.isFinished)
    }

    @Test func cancellingAFinishedOperationHasNoEffect() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let op = queue.addOperation {}
        qtDrain(queue)
        op.cancel()
        #expect(!op.isCancelled)
        #expect(op.isFinished)
    }

    @Test func cancelAllOnAnEmptyQueueDoesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.cancelAllOperations()
        let ran = QTFlag()
        queue.addOperation { ran.set() }
        qtDrain(queue)
        #expect(ran.isSet, "operations added after cancelAll are not cancelled")
    }
}
