import Testing

@testable import Spindle

/// Reservations (`FastPath/Reservations`): with a long backlog a worker reserves the next few ready block operations
/// and runs them without the lock in between. None of that may be visible: reserved work is taken back by an idle
/// worker, gives way to higher priorities, and stops on suspension or a width change.
@Suite(qtOwnThreadsOnly) struct QueueReservationTests {
    typealias Priority = SpindleOperation.QueuePriority

    /// A queue, suspended, holding a blocking first operation and `count` more after it; resumed, it returns once
    /// the blocker runs. Its worker reserved operations when it took the blocker (the backlog is long enough).
    private func queueBlockedWithBacklog(
        width: Int, count: Int, op: (Int) -> SpindleOperation
    ) throws -> (SpindleOperationQueue, release: QTGate) {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: width)
        queue.isSuspended = true
        let started = QTGate(), release = QTGate()
        queue.addOperation {
            started.open()
            release.wait(seconds: 6 * qtDeadline)  // outlasts any deadline of the tests below
        }
        for i in 0..<count { try queue.addOperation(op(i)) }
        queue.isSuspended = false
        #expect(started.wait())
        return (queue, release)
    }

    private func reservedTotal(_ queue: SpindleOperationQueue) -> Int {
        queue.core.withAdmittedLock { queue.core.reservedTotal }
    }

    @Test func operationsReservedBehindABlockedWorkerRunOnAnIdleOne() throws {
        let done = QTGate()
        let (queue, release) = try self.queueBlockedWithBacklog(width: 2, count: 200) { _ in
            SpindleBlockOperation { done.open() }
        }
        #expect(self.reservedTotal(queue) > 0)
        // Every one of them finishes while the first operation still blocks its worker: the other worker takes
        // back what that one reserved once it has nothing else to do.
        var finished = 0
        while finished < 200 && done.wait() { finished += 1 }
        #expect(finished == 200)
        release.open()
        qtDrain(queue)
    }

    @Test func aHigherPriorityOperationOvertakesReservedOnes() throws {
        let log = QTLog<String>()
        let (queue, release) = try self.queueBlockedWithBacklog(width: 1, count: 100) { i in
            qtNamed("\(i)") { log.append("\(i)") }
        }
        #expect(self.reservedTotal(queue) > 0)
        let urgent = qtNamed("urgent") { log.append("urgent") }
        urgent.queuePriority = .veryHigh
        try queue.addOperation(urgent)
        release.open()
        qtDrain(queue)
        #expect(log.all == ["urgent"] + (0..<100).map { "\($0)" })
    }

    @Test func aNormalBlockOvertakesReservedLowPriorityOnes() throws {
        let log = QTLog<String>()
        let (queue, release) = try self.queueBlockedWithBacklog(width: 1, count: 100) { i in
            let op = qtNamed("\(i)") { log.append("\(i)") }
            op.queuePriority = .low
            return op
        }
        #expect(self.reservedTotal(queue) > 0)
        queue.addOperation { log.append("normal") }
        release.open()
        qtDrain(queue)
        #expect(log.all == ["normal"] + (0..<100).map { "\($0)" })
    }

    /// With reservations made behind a blocking operation: `stop` (while it blocks) keeps every reserved
    /// operation from starting once it returns; `resume` lets them all run.
    private func expectStoppingHoldsReservedOperations(
        stop: (SpindleOperationQueue) throws -> Void, resume: (SpindleOperationQueue) throws -> Void
    ) throws {
        let ran = QTCounter()
        let (queue, release) = try self.queueBlockedWithBacklog(width: 1, count: 100) { _ in
            SpindleBlockOperation { ran.increment() }
        }
        #expect(self.reservedTotal(queue) > 0)
        let blocker = queue.operations.first!
        try stop(queue)
        release.open()
        try blocker.waitUntilFinished()
        // The worker did the blocker's bookkeeping (which comes before its waiters) after its reserved operations
        // would have run: none did, and all wait, ready, in the queue.
        #expect(ran.count == 0)
        #expect(queue.operationCount == 100)
        #expect(queue.snapshot().ready == 100)
        try resume(queue)
        qtDrain(queue)
        #expect(ran.count == 100)
    }

    @Test func suspendingStopsReservedOperationsFromStarting() throws {
        try self.expectStoppingHoldsReservedOperations(
            stop: { $0.isSuspended = true }, resume: { $0.isSuspended = false })
    }

    @Test func narrowingToZeroStopsReservedOperationsFromStarting() throws {
        try self.expectStoppingHoldsReservedOperations(
            stop: { try $0.setMaxConcurrentOperationCount(0) }, resume: { try $0.setMaxConcurrentOperationCount(2) })
    }

    @Test func reservedOperationsAreListedReadyAndCancellable() throws {
        let ran = QTCounter()
        let (queue, release) = try self.queueBlockedWithBacklog(width: 1, count: 100) { _ in
            SpindleBlockOperation { ran.increment() }
        }
        #expect(self.reservedTotal(queue) > 0)
        let snapshot = queue.snapshot()
        #expect(snapshot.ready == 100)
        #expect(snapshot.executing == 1)
        #expect(queue.operations.count == 101)
        let waiting = Array(queue.operations.dropFirst())
        queue.cancelAllOperations()
        release.open()
        qtDrain(queue)
        #expect(ran.count == 0)
        #expect(waiting.allSatisfy { $0.isCancelled && $0.isFinished })
    }

    /// The take that wakes or starts another worker reserves nothing (that worker may take this one's CPU, and what
    /// this one reserved would wait behind all it runs); a take that wakes nobody reserves as before. Decided
    /// directly on a suspended backlog, under the lock, so no worker takes part.
    @Test func aTakeThatWakesAnotherWorkerReservesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ran = QTCounter()
        for _ in 0..<100 { queue.addOperation { ran.increment() } }
        let core = queue.core
        let reservation = Reservation()
        let reserved: [Int] = core.withAdmittedLock {
            var counts: [Int] = []
            for wake: IdleWorkers.WakeAction in [.signal(ThreadParker()), .spawn(1), .performOnRunLoop, .none] {
                core.reserveLocked(reservation, afterWaking: wake)
                counts.append(reservation.count - reservation.next.load(ordering: .relaxed))
                core.returnReservationLocked(reservation)
            }
            return counts
        }
        #expect(reserved == [0, 0, 0, QueueCore.batchSize - 1])
        #expect(queue.snapshot().ready == 100)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(ran.count == 100)
    }

    @Test func aLongStreamRunsInOrderOnASerialQueue() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<Int>()
        for i in 0..<5_000 { queue.addOperation { log.append(i) } }
        qtDrain(queue)
        #expect(log.all == Array(0..<5_000))
    }
}
