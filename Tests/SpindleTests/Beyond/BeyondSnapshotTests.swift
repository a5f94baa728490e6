import Testing

@testable import Spindle

/// `snapshot()` figures against what the test did; wait times (opt-in); the debug description.
@Suite struct BeyondSnapshotTests {
    @Test func figuresMatchWhatTheTestDid() throws {
        let queue = try SpindleOperationQueue(name: "bt-snapshot", maxConcurrentOperationCount: 2)
        let running = QTRendezvous(parties: 3)
        let release = QTGate()
        let external = qtNamed("external")  // never added: its dependents wait
        var all: [SpindleOperation] = []
        for i in 0..<2 {
            all.append(qtNamed("busy\(i)") {
                _ = running.arrive()
                release.wait()
            })
        }
        try queue.addOperations(all)
        #expect(running.arrive())  // both slots taken
        for i in 0..<3 { all.append(qtNamed("ready\(i)")) }
        let high = qtNamed("waiting-high"), low = qtNamed("waiting-low"), low2 = qtNamed("waiting-low2")
        high.queuePriority = .high
        low.queuePriority = .low
        low2.queuePriority = .low
        for op in [high, low, low2] { try op.addDependency(external) }
        let failing = BTThrowingOp(code: 9, name: "failing")
        let cancelled = qtNamed("cancelled")
        try queue.addOperations(Array(all[2...]) + [high, low, low2])

        var s = queue.snapshot()
        #expect(s.name == "bt-snapshot" && s.maxConcurrentOperationCount == 2 && !s.isSuspended)
        #expect(s.operationCount == 8)
        #expect(s.executing == 2)
        #expect(s.ready == 3)
        #expect(s.waiting == 3)
        #expect(s.waitingByPriority == [.high: 1, .low: 2])
        #expect(s.finished == 0 && s.highWaterExecuting == 2 && s.highWaterOperationCount == 8)
        #expect(s.capacity == nil && s.blockedProducers == 0 && s.waitTimeSamples == 0)

        release.open(2)
        try external.start()
        qtDrain(queue)
        #expect(queue.snapshot().finished == 8)
        cancelled.cancel()
        try queue.addOperations([failing, cancelled])
        qtDrain(queue)
        s = queue.snapshot()
        #expect(s.operationCount == 0 && s.executing == 0 && s.ready == 0 && s.waiting == 0)
        #expect(s.finished == 10)
        #expect(s.cancelled == 1)
        #expect(s.failed == 1)
        #expect(s.highWaterExecuting == 2)
        #expect(s.highWaterOperationCount == 8)
    }

    @Test func waitTimesAreCollectedOnlyWhenAskedFor() throws {
        let queue = try SpindleOperationQueue(name: "bt-wait-times", maxConcurrentOperationCount: 1)
        for i in 0..<5 { try queue.addOperation(qtNamed("off\(i)")) }
        qtDrain(queue)
        #expect(queue.snapshot().waitTimeSamples == 0)
        #expect(queue.snapshot().averageWaitTime == nil)

        queue.collectsWaitTimes = true
        #expect(queue.collectsWaitTimes)
        queue.isSuspended = true
        for i in 0..<5 { try queue.addOperation(qtNamed("on\(i)")) }
        queue.isSuspended = false
        qtDrain(queue)
        let s = queue.snapshot()
        #expect(s.waitTimeSamples == 5)
        #expect(s.maxWaitTime > .zero)
        // Five operations all admitted while suspended each waited a while: the total is their sum, more than the
        // longest alone, and at most five times it.
        #expect(s.totalWaitTime > s.maxWaitTime)
        #expect(s.totalWaitTime <= s.maxWaitTime * 5)
        #expect(s.averageWaitTime! <= s.maxWaitTime)
    }

    @Test func debugDescriptionShowsWhatEachWaitingOperationWaitsOn() throws {
        let queue = try SpindleOperationQueue(name: "bt-debug", maxConcurrentOperationCount: 1, capacity: 2)
        queue.isSuspended = true
        let dependency = qtNamed("dependency")
        let waiting = qtNamed("waiting")
        try waiting.addDependency(dependency)
        waiting.cancelsOnFailedDependency = true
        waiting.cancel(after: .seconds(3600))
        try queue.addOperation(waiting)
        try queue.addOperation(qtNamed("second"))
        let extra = qtNamed("extra")
        let producer = try BTThread { try! queue.addOperation(extra) }
        btWaitForBlockedProducers(queue, 1)
        let text = queue.debugDescription
        #expect(text.contains("capacity 2 (block)"))
        #expect(text.contains("waiting: enqueued, waits on 1: dependency"))
        #expect(text.contains("cancels on a failed dependency"))
        #expect(text.contains("deadline in"))
        #expect(text.contains("blocked producer adding 1: extra"))
        #expect(queue.snapshot().description.contains("blocked producers 1"))
        #expect(queue.snapshot().blockedProducers == 1 && queue.snapshot().blockedOperations == 1,
                "one producer blocked adding one operation")
        try dependency.start()
        queue.isSuspended = false
        #expect(producer.join())
        qtDrain(queue)
    }
}
