import Testing

@testable import Spindle

/// Dependencies of queued operations (catalogue E36–E42, contract items 2 and 6) and the queue's diagnostics.
@Suite struct QueueDependencyTests {
    @Test func removeDependencyReleasesAWaitingOperationInAQueue() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let upstream = qtNamed("upstream")  // never added to a queue: it never finishes
        let ran = QTFlag()
        let b = qtNamed("b") { ran.set() }
        try b.addDependency(upstream)
        try queue.addOperation(b)
        #expect(!b.isReady)
        #expect(try b.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(!ran.isSet)
        b.removeDependency(upstream)
        #expect(try b.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(ran.isSet)
        #expect(b.dependencies.isEmpty)
        qtDrain(queue)
    }

    @Test func removeDependencyLeavesAnOperationWaitingOnItsOtherDependencies() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let first = qtNamed("first"), second = qtNamed("second")
        let b = qtNamed("b")
        try b.addDependency(first)
        try b.addDependency(second)
        try queue.addOperation(b)
        b.removeDependency(first)
        #expect(!b.isReady)
        #expect(try b.waitUntilFinished(timeout: .milliseconds(100)) == false)
        b.removeDependency(second)
        qtDrain(queue)
        #expect(b.isFinished)
    }

    @Test func aCycleIsRejectedWhenMadeAndTheGraphStaysUnchanged() throws {
        // E42's graph: A waits for B, B for C; C waiting for A would close the cycle.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        let a = qtNamed("A") { log.append("A") }
        let b = qtNamed("B") { log.append("B") }
        let c = qtNamed("C") { log.append("C") }
        try a.addDependency(b)
        try b.addDependency(c)
        do {
            try c.addDependency(a)
            Issue.record("closing the cycle must throw")
        } catch {
            guard case .dependencyCycle(let cycle) = error else {
                Issue.record("expected dependencyCycle, got \(error)")
                return
            }
            #expect(Set(cycle) == ["A", "B", "C"])
            #expect(cycle.first == "C" && cycle.last == "C")
            #expect(error.description.contains("A") && error.description.contains("B"))
        }
        #expect(c.dependencies.isEmpty)
        #expect(a.dependencies.map(\.name) == ["B"])
        #expect(b.dependencies.map(\.name) == ["C"])
        #expect(c.isReady && !a.isReady && !b.isReady)
        // The graph still works: it runs C, B, A.
        try queue.addOperations([a, b, c])
        qtDrain(queue)
        #expect(log.all == ["C", "B", "A"])
    }

    @Test func aCancelledDependencyInAQueueFinishesUnrunThenTheDependentRuns() throws {
        // E38.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let log = QTLog<String>()
        let aCompletion = QTFlag()
        let a = qtNamed("A") { log.append("A-main") }
        a.completionBlock = { aCompletion.set() }
        let sawA = QTLog<Bool>()
        let b = qtNamed("B") {
            log.append("B-main")
            sawA.append(a.isFinished)
            sawA.append(a.isCancelled)
        }
        try b.addDependency(a)
        a.cancel()
        #expect(!b.isReady, "a cancelled but unstarted dependency still holds its dependent (E37)")
        try queue.addOperations([b, a])
        qtDrain(queue)
        #expect(a.isFinished && a.isCancelled && !a.isExecuting)
        #expect(aCompletion.isSet)
        #expect(log.all == ["B-main"])
        #expect(sawA.all == [true, true])
        #expect(b.isFinished && !b.isCancelled)
    }

    @Test func aDependencyOnAnotherQueueHoldsTheDependent() throws {
        // E39: A in queue 2, B (depends on A) in queue 1.
        let queue1 = try SpindleOperationQueue(name: "q1", maxConcurrentOperationCount: 2)
        let queue2 = try SpindleOperationQueue(name: "q2", maxConcurrentOperationCount: 2)
        let log = QTLog<String>()
        let aStarted = QTGate(), release = QTGate()
        let a = qtNamed("A") {
            aStarted.open()
            release.wait()
            log.append("A")
        }
        let b = qtNamed("B") { log.append("B") }
        try b.addDependency(a)
        try queue1.addOperation(b)
        try queue2.addOperation(a)
        #expect(aStarted.wait())
        #expect(try b.waitUntilFinished(timeout: .milliseconds(100)) == false)
        #expect(queue1.operationCount == 1)
        release.open()
        // Waiting on the dependent's queue covers the upstream operation on the other queue (I67).
        qtDrain(queue1)
        #expect(a.isFinished)
        #expect(log.all == ["A", "B"])
        qtDrain(queue2)
    }

    @Test func aBatchWithTheDependentFirstRunsTheDependencyFirst() throws {
        // E40: addOperations([B, A]) where B depends on A.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let log = QTLog<String>()
        let a = qtNamed("A") { log.append("A") }
        let b = qtNamed("B") { log.append("B") }
        try b.addDependency(a)
        try queue.addOperations([b, a])
        qtDrain(queue)
        #expect(log.all == ["A", "B"])
    }

    @Test func aSerialQueueWithTheDependencyAddedAfterTheDependentDoesNotDeadlock() throws {
        // E41 (SR-5361).
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        let a = qtNamed("A") { log.append("A") }
        let b = qtNamed("B") { log.append("B") }
        try b.addDependency(a)
        try queue.addOperation(b)
        try queue.addOperation(a)
        qtDrain(queue)
        #expect(log.all == ["A", "B"])
    }

    @Test func aLongChainAcrossTwoQueuesRunsInOrder() throws {
        let queues = [try SpindleOperationQueue(maxConcurrentOperationCount: 3),
                      try SpindleOperationQueue(maxConcurrentOperationCount: 1)]
        let log = QTLog<Int>()
        var previous: SpindleOperation? = nil
        var ops: [SpindleOperation] = []
        for i in 0..<200 {
            let op = SpindleBlockOperation { log.append(i) }
            if let previous { try op.addDependency(previous) }
            previous = op
            ops.append(op)
        }
        // Added in reverse, alternating queues.
        for (i, op) in ops.enumerated().reversed() { try queues[i % 2].addOperation(op) }
        for queue in queues { qtDrain(queue) }
        #expect(log.all == Array(0..<200))
    }

    @Test func aFanInRunsTheJoinAfterEveryBranch() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let branchesDone = QTCounter()
        let seenByJoin = QTLog<Int>()
        let join = SpindleBlockOperation { seenByJoin.append(branchesDone.count) }
        var branches: [SpindleOperation] = []
        for _ in 0..<32 {
            let branch = SpindleBlockOperation { branchesDone.increment() }
            try join.addDependency(branch)
            branches.append(branch)
        }
        try queue.addOperation(join)
        try queue.addOperations(branches)
        qtDrain(queue)
        #expect(seenByJoin.all == [32])
    }

    // MARK: - Diagnostics

    @Test func debugDescriptionListsAWaitingOperationAndWhatItWaitsOn() throws {
        let queue = try SpindleOperationQueue(name: "diag-queue", maxConcurrentOperationCount: 2)
        let upstream = qtNamed("upstream-op")
        let waiting = qtNamed("waiting-op")
        try waiting.addDependency(upstream)
        try queue.addOperation(waiting)
        let text = queue.debugDescription
        #expect(text.contains("diag-queue"))
        let line = text.split(separator: "\n").first { $0.contains("waiting-op") }
        #expect(line != nil, "debugDescription must list the waiting operation:\n\(text)")
        if let line {
            #expect(line.contains("waits on"), "\(line)")
            #expect(line.contains("upstream-op"), "\(line)")
        }
        #expect(queue.description.contains("diag-queue"))
        waiting.removeDependency(upstream)
        qtDrain(queue)
        #expect(!queue.debugDescription.contains("waiting-op"))
    }
}
