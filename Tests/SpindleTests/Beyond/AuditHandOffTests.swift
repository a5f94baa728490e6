import Testing

@testable import Spindle

/// The hand-off rule (`IdleWorkers.wakeOrSpawn`): an add that finds a woken worker still on its way wakes nobody,
/// and that worker, when it takes its operation, must wake another for what is left. Two operations that wait for
/// each other, added one by one to a width-2 queue whose two workers are parked, must both run at once.
@Suite struct MutationAuditHandOffTests {
    @Test(qtOwnThreadsOnly) func aWokenWorkerWakesAnotherForWhatIsLeft() throws {
        let queue = try SpindleOperationQueue(name: "hand-off", maxConcurrentOperationCount: 2)
        // Two workers exist: two operations that meet run on two threads.
        let warm = QTRendezvous(parties: 2)
        for _ in 0..<2 { queue.addOperation { _ = warm.arrive() } }
        qtDrain(queue)
        for round in 0..<20 {
            // Both workers in the idle line (a fact with no signal to wait on: polled, as qtWaitUntil allows).
            #expect(qtWaitUntil { queue.core.lock.withLock { queue.core.idle.idleCount == 2 } })
            let meet = QTRendezvous(parties: 2)
            let met = QTCounter()
            // One by one: the second add usually finds the first one's woken worker still on its way.
            queue.addOperation { if meet.arrive() { met.increment() } }
            queue.addOperation { if meet.arrive() { met.increment() } }
            qtDrain(queue)
            #expect(met.count == 2, "round \(round): the two operations did not run at the same time")
            if met.count != 2 { break }
        }
    }
}
