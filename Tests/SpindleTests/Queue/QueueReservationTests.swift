import Testing

@testable import Spindle

/// Reservations (`FastPath/Reservations`): with a long backlog a worker reserves the next few ready block operations
/// and runs them without the lock in between. None of that may be visible: reserved work is taken back by an idle
/// worker, gives way to higher priorities, and stops on suspension or a width change.
@Suite(qtOwnThreadsOnly) struct QueueReservationTests {
    typealias Priority = SpindleOperation.QueuePriority
    final class NotABlock: SpindleOperation, @unchecked Sendable {}

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
    /// this one reserved would wait behind all it runs); a take that wakes nobody reserves as before, unless what it
    /// took is not a plain block operation (it may hold its slot after `start()` returns). Decided
    /// directly on a suspended backlog, under the lock, so no worker takes part.
    @Test func aTakeThatWakesAnotherWorkerReservesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ran = QTCounter()
        for _ in 0..<100 { queue.addOperation { ran.increment() } }
        let core = queue.core
        let reservation = Reservation()
        let taken = SpindleBlockOperation {}  // stands for the operation the take took
        let notABlock = NotABlock()  // one that may not finish on the worker: nothing is reserved behind it
        let reserved: [Int] = core.withAdmittedLock {
            var counts: [Int] = []
            for wake: IdleWorkers.WakeAction in [.signal(ThreadParker()), .spawn(1), .performOnRunLoop, .none] {
                core.reserveLocked(reservation, behind: Unmanaged.passUnretained(taken), afterWaking: wake)
                counts.append(reservation.count - reservation.next.load(ordering: .relaxed))
                core.returnReservationLocked(reservation)
            }
            core.reserveLocked(reservation, behind: Unmanaged.passUnretained(notABlock), afterWaking: .none)
            counts.append(reservation.count - reservation.next.load(ordering: .relaxed))
            core.returnReservationLocked(reservation)
            return counts
        }
        #expect(reserved == [0, 0, 0, QueueCore.batchSize - 1, 0])
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

    /// A blocked worker that reserved the operation its blocker waits for (X), and a concurrent operation started
    /// last, whose slot is held until it finishes. Returns the queue, the gate the blocker opens once X ran, and
    /// that concurrent operation.
    ///
    /// These tests were written for reserved work stranded with a slot free and nobody looking (the other worker
    /// parked with nothing ready and both slots taken, then one freed by a finish elsewhere, a resume or a
    /// shutdown's resume: `reclaimForFreeSlotLocked`). Since stalled reservations are reclaimed on the other
    /// worker's second take (`reclaimStalledReservationsLocked`), that state is no longer reached here: X comes back
    /// while the other worker still takes the backlog. They check the outcome either way: X runs.
    private func queueWithReservedWorkAndNoFreeSlot() throws
        -> (SpindleOperationQueue, blockerSawX: QTGate, late: QTDeferredFinishOperation)
    {
        let queue = try SpindleOperationQueue(name: "stranded-reservations", maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let x = QTGate(), blockerSawX = QTGate()
        queue.addOperation { if x.wait() { blockerSawX.open() } }
        queue.addOperation { x.open() }  // X: reserved behind the blocker
        for _ in 0..<38 { queue.addOperation {} }
        let late = QTDeferredFinishOperation()
        try queue.addOperation(late)
        queue.isSuspended = false
        #expect(late.mainEntered.wait())
        return (queue, blockerSawX, late)
    }

    /// A concurrent operation finishing on another thread frees a slot while the only work left is reserved behind
    /// a blocked worker: the reserved operations come back and run (before, they waited for the blocked worker, and
    /// here the blocker waits for one of them: a deadlock).
    @Test func aSlotFreedElsewhereRunsOperationsReservedBehindABlockedWorker() throws {
        let (queue, blockerSawX, late) = try self.queueWithReservedWorkAndNoFreeSlot()
        try late.complete()
        #expect(blockerSawX.wait(), "the operation reserved behind the blocked worker never ran")
        qtDrain(queue)
    }

    /// The same with the slot freed while suspended: resuming brings the reserved operations back.
    @Test func resumingRunsOperationsReservedBehindABlockedWorker() throws {
        let (queue, blockerSawX, late) = try self.queueWithReservedWorkAndNoFreeSlot()
        queue.isSuspended = true
        try late.complete()
        queue.isSuspended = false
        #expect(blockerSawX.wait(), "the operation reserved behind the blocked worker never ran")
        qtDrain(queue)
    }

    /// The same with the resume a shutdown does (`shutdown(.drain)` of a suspended queue).
    @Test func aShutdownsResumeRunsOperationsReservedBehindABlockedWorker() throws {
        let (queue, blockerSawX, late) = try self.queueWithReservedWorkAndNoFreeSlot()
        queue.isSuspended = true
        try late.complete()
        queue.shutdown(.drain)
        let ran = blockerSawX.wait()
        #expect(ran, "the operation reserved behind the blocked worker never ran")
        if !ran { try? queue.setMaxConcurrentOperationCount(3) }  // unstick
        #expect(try queue.awaitTermination(timeout: .seconds(qtDeadline)))
    }

    /// The same from a block on a helper thread: a reserved block operation's second block (run by a helper while
    /// the first holds the operation's own thread) waits for the previous operation of the batch.
    @Test func aHelperThreadsWaitForAnEarlierOperationOfTheBatchReturns() throws {
        final class Ops: @unchecked Sendable { var all: [SpindleOperation] = [] }
        let queue = try SpindleOperationQueue(name: "batch-wait-helper", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ops = Ops()
        let waits = QTLog<Bool>()
        for i in 0..<40 {
            let helperDone = QTGate()
            let op = SpindleBlockOperation { _ = helperDone.wait() }  // holds its own thread: a helper runs the next
            try op.addExecutionBlock {
                if i > 0 { waits.append((try? ops.all[i - 1].waitUntilFinished(timeout: .seconds(2))) == true) }
                helperDone.open()
            }
            ops.all.append(op)
        }
        for op in ops.all { try queue.addOperation(op) }
        queue.isSuspended = false
        qtDrain(queue)
        #expect(self.reservedTotal(queue) > 0)
        #expect(waits.count == 39 && waits.all.allSatisfy { $0 }, "\(waits.all)")
        ops.all = []
    }

    /// Within a worker's batch (the operation it took and the ones it reserved, run back to back, their bookkeeping
    /// done together afterwards), an operation waiting for an earlier one of the batch, already finished, returns at
    /// once: the release it would wait for is its own thread's to do after the batch.
    @Test func waitingForAFinishedOperationEarlierInTheSameBatchReturns() throws {
        final class Ops: @unchecked Sendable { var all: [SpindleOperation] = [] }
        let queue = try SpindleOperationQueue(name: "batch-wait", maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ops = Ops()
        let waits = QTLog<Bool>()
        for i in 0..<40 {
            ops.all.append(SpindleBlockOperation {
                guard i > 0 else { return }
                let previous = ops.all[i - 1]  // finished: the queue is serial
                waits.append((try? previous.waitUntilFinished(timeout: .seconds(2))) == true)  // was a deadlock
            })
        }
        for op in ops.all { try queue.addOperation(op) }
        queue.isSuspended = false
        qtDrain(queue)
        #expect(self.reservedTotal(queue) > 0)
        #expect(waits.count == 39 && waits.all.allSatisfy { $0 }, "\(waits.all)")
        ops.all = []
    }
}
