import Testing

@testable import Spindle

/// A pool keeps `threadCount` threads once a wait is over: the stand-in that served meanwhile and went idle is woken
/// to retire at once, not left parked (where the next request would wake it, two threads then serving a pool of one).
@Suite struct MutationAuditPoolRetireTests {
    @Test func anIdleStandInRetiresAsSoonAsTheWaitEndsWhileTheWaiterStillRuns() throws {
        let pool = try SpindleThreadPool(name: "retire-idle", threadCount: 1)
        let outer = SpindleOperationQueue(name: "outer", pool: pool)
        let inner = SpindleOperationQueue(name: "inner", pool: pool)
        let semaphore = try SpindleSemaphore(value: 0)
        let started = QTGate()
        let backToOne = QTFlag()
        outer.addOperation {
            started.open()
            semaphore.wait()  // a Spindle wait on the pool's only thread: a stand-in may serve meanwhile
            // Still running on the pool's thread: the idle stand-in must go now, not when this operation ends.
            if qtWaitUntil({ pool.liveThreadCount == 1 }) { backToOne.set() }
        }
        #expect(started.wait())
        inner.addOperation {}  // served by the stand-in
        qtDrain(inner)
        // The stand-in is parked in the pool's idle line (a fact with no signal: polled).
        #expect(qtWaitUntil { pool.idleThreadCount == 1 && pool.liveThreadCount == 2 })
        semaphore.signal()
        qtDrain(outer)
        #expect(backToOne.isSet)
    }
}
