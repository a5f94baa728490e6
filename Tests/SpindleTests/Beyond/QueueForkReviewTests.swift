import Testing

@_spi(Faults) @testable import Spindle

/// Review finding R4: a queue of a parent process (after `fork()`) must not take its lock, which a parent thread
/// may have held at the fork (`SpindleOperationQueue+Fork`).
@Suite("Review: a parent queue in a forked child") struct QueueForkReviewTests {
    @Test func settingTheNameOfAQueueFromTheParentDoesNotTakeItsLock() throws {
        let queue = try SpindleOperationQueue(name: "parent", maxConcurrentOperationCount: 1)
        SpindleFaults.simulateForkedChild(queue, true)
        let held = QTGate(), release = QTGate(), renamed = QTGate()
        try runJoinableThreads(2, name: "review-fork", { index in
            if index == 0 {
                // A parent thread that held the queue's lock at the fork: in the child it is never released.
                queue.core.lock.lock()
                held.open()
                _ = release.wait()
                queue.core.lock.unlock()
            } else {
                _ = held.wait()
                queue.name = "renamed"  // the child's code
                renamed.open()
            }
        }, beforeJoining: {
            let done = renamed.wait(seconds: 3)
            #expect(done, "setting the name of a queue from the parent blocked on the queue's lock")
            release.open()
            if !done { _ = renamed.wait() }
        })
        SpindleFaults.simulateForkedChild(queue, false)
    }
}
