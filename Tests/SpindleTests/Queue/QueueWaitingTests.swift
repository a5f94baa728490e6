import Testing

@testable import Spindle

/// Waiting on queues and on queued operations (contract items 3 and 9; catalogue I66–I70).
@Suite struct QueueWaitingTests {
    @Test func waitingOnAnEmptyQueueReturnsAtOnce() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .zero))
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(-1)))
        #expect(try queue.waitUntilAllOperationsAreFinished(until: .now))
        try queue.waitUntilAllOperationsAreFinished()
        // Also a suspended empty queue: nothing to wait for.
        queue.isSuspended = true
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .zero))
    }

    @Test func aWaitCoversOperationsAddedWhileWaiting() throws {
        // I67.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let releaseA = QTGate(), releaseB = QTGate()
        let a = queue.addOperation { releaseA.wait() }
        let waiterTid = QTLog<Int32>()
        let bFinishedWhenWaiterReturned = QTLog<Bool>()
        let b = SpindleBlockOperation { releaseB.wait() }
        let waiterDone = QTGate()
        let waiter = try SpindleThread.spawnJoinable(name: "qt-waiter") {
            waiterTid.append(qtTid())
            try? queue.waitUntilAllOperationsAreFinished()
            bFinishedWhenWaiterReturned.append(b.isFinished)
            waiterDone.open()
        }
        // Let the waiter be asleep in its wait (a /proc fact) before adding more work.
        #expect(qtWaitUntil { waiterTid.all.first.map { qtThreadState($0) == "S" } ?? false })
        try queue.addOperation(b)
        releaseA.open()
        #expect(try a.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(waiterDone.wait(seconds: 0.05) == false, "the waiter must still wait for b")
        releaseB.open()
        #expect(waiterDone.wait())
        try waiter.join()
        #expect(bFinishedWhenWaiterReturned.all == [true])
        qtDrain(queue)
    }

    @Test func afterWaitingTheQueueIsEmpty() throws {
        // I68.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        for _ in 0..<300 { queue.addOperation {} }
        let chainHead = SpindleBlockOperation {}
        let chainTail = SpindleBlockOperation {}
        try chainTail.addDependency(chainHead)
        try queue.addOperations([chainTail, chainHead])
        try queue.waitUntilAllOperationsAreFinished()
        #expect(queue.operationCount == 0)
        #expect(queue.operations.isEmpty)
    }

    @Test func afterAnOperationsWaitReturnsItIsNoLongerInTheQueue() throws {
        // I69, Spindle's contract (item 9): finished operations leave the queue before their waiters are released.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        for _ in 0..<300 {
            let op = queue.addOperation {}
            try op.waitUntilFinished()
            #expect(!queue.operations.contains { $0 === op })
            #expect(queue.operationCount == 0)
        }
        // With company: the others still running do not hide it.
        let release = QTGate()
        let blocker = queue.addOperation { release.wait() }
        for _ in 0..<100 {
            let op = queue.addOperation {}
            #expect(try op.waitUntilFinished(timeout: .seconds(qtDeadline)))
            #expect(!queue.operations.contains { $0 === op })
            #expect(queue.operationCount == 1)
        }
        release.open()
        try blocker.waitUntilFinished()
        #expect(queue.operationCount == 0)
        qtDrain(queue)
    }

    @Test func addOperationsWaitingReturnsOnceItsBatchFinishedWhileAnotherStillRuns() throws {
        // I70.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let xStarted = QTGate(), releaseX = QTGate()
        let x = queue.addOperation {
            xStarted.open()
            releaseX.wait()
        }
        #expect(xStarted.wait())
        let y = SpindleBlockOperation {}
        let z = SpindleBlockOperation {}
        try queue.addOperations([y, z], waitUntilFinished: true)
        #expect(y.isFinished && z.isFinished)
        #expect(x.isExecuting)
        #expect(queue.operationCount == 1)
        releaseX.open()
        qtDrain(queue)
    }

    @Test func waitingOnItsOwnQueueFromAnOperationThrows() throws {
        // Contract item 3.
        let queue = try SpindleOperationQueue(name: "self-wait", maxConcurrentOperationCount: 2)
        let errors = QTLog<String>()
        let timedErrors = QTLog<String>()
        let selfWaitErrors = QTLog<String>()
        let op = qtNamed("inner") {
            do { try SpindleOperationQueue.current?.waitUntilAllOperationsAreFinished() } catch {
                errors.append("\(error)")
            }
            do { _ = try SpindleOperationQueue.current?.waitUntilAllOperationsAreFinished(timeout: .seconds(1)) } catch {
                timedErrors.append("\(error)")
            }
            do { try SpindleOperation.current?.waitUntilFinished() } catch {
                selfWaitErrors.append("\(error)")
            }
        }
        try queue.addOperation(op)
        qtDrain(queue)
        let expected = SpindleError.waitOnOwnQueue(name: "self-wait").description
        #expect(errors.all == [expected])
        #expect(timedErrors.all == [expected])
        #expect(selfWaitErrors.all == [SpindleError.waitOnSelf(name: "inner").description])
    }

    /// Found by the stress binary (selfwait): a concurrent operation's completion block runs on the thread that
    /// called finish(), not a worker; waiting there for its own queue could never end (the queue still counts the
    /// operation until the block returns) and used to time out instead of throwing.
    @Test func waitingOnItsOwnQueueFromAnAsyncOperationsCompletionThrows() throws {
        final class Async: SpindleConcurrentOperation, @unchecked Sendable {
            override func main() throws {
                try SpindleThread.detach(name: "finisher") { [self] in try? self.finish() }
            }
        }
        let queue = try SpindleOperationQueue(name: "async-self-wait", maxConcurrentOperationCount: 1)
        let outcome = QTLog<String>()
        let op = Async()
        op.completionBlock = {
            do {
                let drained = try queue.waitUntilAllOperationsAreFinished(timeout: .milliseconds(200))
                outcome.append("returned \(drained)")
            } catch {
                outcome.append("\(error)")
            }
        }
        try queue.addOperation(op)
        qtDrain(queue)
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: "async-self-wait").description])
    }

    @Test func waitingOnAnotherQueueFromAnOperationIsAllowed() throws {
        let outer = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let inner = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let innerRan = QTFlag()
        let outcome = QTLog<Bool>()
        inner.isSuspended = true
        inner.addOperation { innerRan.set() }
        outer.addOperation {
            outcome.append((try? inner.waitUntilAllOperationsAreFinished(timeout: .seconds(qtDeadline))) ?? false)
        }
        inner.isSuspended = false
        qtDrain(outer)
        qtDrain(inner)
        #expect(outcome.all == [true])
        #expect(innerRan.isSet)
    }

    @Test func theTimedWaitReturnsFalseWhileWorkIsBlocked() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let started = QTGate(), release = QTGate()
        queue.addOperation {
            started.open()
            release.wait()
        }
        #expect(started.wait())
        let before = qtMonotonicSeconds()
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .milliseconds(100)) == false)
        #expect(qtMonotonicSeconds() - before >= 0.099, "a timed wait must not give up early")
        #expect(try queue.waitUntilAllOperationsAreFinished(until: .after(.milliseconds(20))) == false)
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .zero) == false)
        release.open()
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(qtDeadline)))
    }

    @Test func severalThreadsWaitingOnOneQueueAreAllReleased() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let release = QTGate()
        queue.addOperation { release.wait() }
        let released = QTCounter()
        let done = QTGate()
        let tids = QTLog<Int32>()
        let waiters = try (0..<4).map { _ in
            try SpindleThread.spawnJoinable(name: "qt-waiter") {
                tids.append(qtTid())
                // Longer than the deadline below: a waiter the drain did not wake is seen there, not saved by its
                // own timeout (which returns true too, the queue being drained by then).
                if (try? queue.waitUntilAllOperationsAreFinished(timeout: .seconds(3 * qtDeadline))) == true {
                    released.increment()
                }
                done.open()
            }
        }
        // All four asleep in their wait (a /proc fact) before the queue drains, so the drain must wake each.
        #expect(qtWaitUntil { tids.all.count == 4 && tids.all.allSatisfy { qtThreadState($0) == "S" } })
        release.open()
        for _ in 0..<4 { #expect(done.wait(), "a waiter parked before the drain was not woken by it") }
        for waiter in waiters { try waiter.join() }
        #expect(released.count == 4)
        qtDrain(queue)
    }
}
