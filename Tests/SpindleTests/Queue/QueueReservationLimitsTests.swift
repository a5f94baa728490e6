import Synchronization
import Testing

@testable import Spindle

/// What reservations (`FastPath/Reservations`) may not change, found by a review: the width, priority changes, a
/// high-priority add racing the reservation, and progress for an operation that waits for one reserved behind it.
@Suite(qtOwnThreadsOnly) struct QueueReservationLimitsTests {
    /// A concurrent operation whose `main` holds it executing until released.
    final class HeldConcurrent: SpindleConcurrentOperation, @unchecked Sendable {
        let started = QTGate()
        let release = QTGate()
        override func main() throws {
            self.started.open()
            _ = self.release.wait()
            try self.finish()
        }
    }

    private func idleWorkers(_ queue: SpindleOperationQueue) -> Int {
        queue.core.withAdmittedLock { queue.core.idle.idleCount }
    }

    /// Width 1: a concurrent operation holds the only slot until it finishes. Before, the worker that started it had
    /// reserved the next seven block operations and ran them beside it, beyond the width.
    @Test func nothingIsReservedBehindAnOperationThatHoldsItsSlot() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let held = HeldConcurrent()
        try queue.addOperation(held)
        let overlapped = QTCounter()
        for _ in 0..<40 { queue.addOperation { if held.isExecuting { overlapped.increment() } } }
        queue.isSuspended = false
        #expect(held.started.wait())
        // The worker is done with `start()` once it parks (the slot is taken, so nothing else can start).
        #expect(qtWaitUntil { self.idleWorkers(queue) == 1 }, "the worker did not park")
        #expect(overlapped.count == 0, "\(overlapped.count) block operations ran while the only slot was held")
        held.release.open()
        qtDrain(queue)
        #expect(overlapped.count == 0)
    }

    /// A reserved operation whose priority is lowered while it waits runs after the others (it was ignored).
    @Test func loweringAReservedOperationsPriorityTakesEffect() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let started = QTGate(), release = QTGate()
        queue.addOperation {
            started.open()
            release.wait()
        }
        let log = QTLog<Int>()
        let ops = (0..<100).map { i in qtNamed("\(i)") { log.append(i) } }
        for op in ops { try queue.addOperation(op) }
        queue.isSuspended = false
        #expect(started.wait())
        #expect(queue.core.withAdmittedLock { queue.core.reservedTotal } > 0, "nothing was reserved")
        ops[2].queuePriority = .veryLow
        release.open()
        qtDrain(queue)
        #expect(log.all == (0..<100).filter { $0 != 2 } + [2])
    }

    /// Width 1, a long backlog, and a thread adding very-high-priority operations: once such an add has returned
    /// before a normal operation ended, no later normal operation starts before it. Before, an add whose push came
    /// just after the reserving worker drained the inbox, and whose floor check came before the worker lowered the
    /// floor, was overtaken by up to seven reserved operations (in 4 runs of 5 of one round, by 137–326 operations;
    /// three rounds here).
    @Test(arguments: 0..<3) func aHighPriorityAddRacingAReservationIsNotOvertaken(round: Int) throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let highAdded = Atomic<Int>(0), highStarted = Atomic<Int>(0), addedWhenLastEnded = Atomic<Int>(0)
        let overtaken = QTCounter()
        for _ in 0..<60_000 {
            queue.addOperation {
                if highStarted.load(ordering: .sequentiallyConsistent)
                    < addedWhenLastEnded.load(ordering: .sequentiallyConsistent)
                {
                    overtaken.increment()
                }
                addedWhenLastEnded.store(highAdded.load(ordering: .sequentiallyConsistent), ordering: .sequentiallyConsistent)
            }
        }
        queue.isSuspended = false
        let adderDone = QTGate()
        let sink = Atomic<Int>(0)
        try SpindleThread.detach(name: "high-adder") {
            for i in 0..<4_000 {
                let high = SpindleBlockOperation { highStarted.add(1, ordering: .sequentiallyConsistent) }
                high.queuePriority = .veryHigh
                try? queue.addOperation(high)
                highAdded.add(1, ordering: .sequentiallyConsistent)
                var x = 0
                for j in 0..<(200 + (i * 37) % 1_500) { x &+= j }  // vary where the next add lands
                sink.store(x, ordering: .relaxed)
            }
            adderDone.open()
        }
        #expect(adderDone.wait(seconds: 6 * qtDeadline))
        qtDrain(queue)
        #expect(overtaken.count == 0, "\(overtaken.count) normal operations started before a very-high one added earlier")
    }

    /// Width 2 with a stream of short operations: an operation that waits for the one added just after it (which
    /// its worker reserved) is not left waiting while the other worker serves the stream. Before, the wait ran
    /// into its 3 s deadline every time.
    @Test func anOperationWaitingForOneReservedBehindItIsNotStarved() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let stop = QTFlag(), timedOut = QTFlag(), waited = QTGate()
        let target = qtNamed("target")
        queue.addOperation {
            if !((try? target.waitUntilFinished(timeout: .seconds(3))) ?? false) { timedOut.set() }
            stop.set()
            waited.open()
        }
        try queue.addOperation(target)
        @Sendable func refill() {
            if !stop.isSet { queue.addOperation { refill() } }
        }
        for _ in 0..<200 { queue.addOperation { refill() } }
        queue.isSuspended = false
        #expect(waited.wait())
        qtDrain(queue)
        #expect(!timedOut.isSet, "the operation waited 3 s for the one reserved behind it")
    }
}
