import Testing

@testable import Spindle

/// `SpindleOperationQueue.run`: the result comes back, errors are rethrown, and cancelling the awaiting task
/// cancels the operation (before, during and after the body).
@Suite struct AsyncRunTests {
    @Test func theResultComesBackFromAQueueThread() async throws {
        let queue = try SpindleOperationQueue(name: "at-run", maxConcurrentOperationCount: 2)
        let (value, ranOnQueue) = try await queue.run { (6 * 7, SpindleOperationQueue.current === queue) }
        #expect(value == 42)
        #expect(ranOnQueue)
        #expect(queue.operationCount == 0, "the operation has left the queue when run returns")
    }

    @Test func anErrorThrownByTheBodyIsRethrown() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        await #expect(throws: ATError(code: 3)) {
            try await queue.run { () throws -> Int in throw ATError(code: 3) }
        }
        #expect(try await queue.run { 1 } == 1, "the queue goes on")
    }

    @Test func aTaskCancelledBeforeRunningNeverEnqueuesTheBody() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let ran = QTCounter()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await ATOutcome { try await queue.run { ran.increment() } }
        }
        #expect(await task.value == .cancelled)
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(ran.count == 0)
    }

    @Test func cancellingBeforeTheBodyStartsThrowsAtOnceAndTheBodyNeverRuns() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true  // nothing can start: the throw must not wait for the queue
        let ran = QTCounter()
        let task = Task { await ATOutcome { try await queue.run { ran.increment() } } }
        #expect(await atEventually { queue.operationCount == 1 })
        let op = queue.operations[0]
        task.cancel()
        #expect(await task.value == .cancelled)
        #expect(op.isCancelled, "cancelling the task cancelled the operation")
        queue.isSuspended = false
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(ran.count == 0)
    }

    @Test func cancellingDuringTheBodyTellsItAndWaitsForItToReturn() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let started = QTGate(), proceed = QTGate()
        let order = QTLog<String>()
        let task = Task {
            let outcome = await ATOutcome {
                try await queue.run { () -> Bool in
                    started.open()
                    proceed.wait(seconds: atDeadline)
                    let told = SpindleOperation.current?.isCancelled ?? false
                    order.append("body returned")
                    return told
                }
            }
            order.append("run returned")
            return outcome
        }
        #expect(await atEventually { started.tryWait() })
        task.cancel()
        #expect(await atEventually { queue.operations.first?.isCancelled ?? false })
        #expect(order.all.isEmpty, "run does not return while the body runs")
        proceed.open()
        #expect(await task.value == .cancelled, "a cancelled operation's value is dropped")
        #expect(order.all == ["body returned", "run returned"])
    }

    @Test func cancellingTheQueuesOperationsEndsAPendingRun() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        queue.addOperation { gate.wait(seconds: atDeadline) }
        let task = Task { await ATOutcome { try await queue.run { 1 } } }
        #expect(await atEventually { queue.operationCount == 2 })
        queue.cancelAllOperations()
        gate.open()
        #expect(await task.value == .cancelled)
    }

    @Test func cancellingAfterRunReturnedChangesNothing() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let task = Task { () async throws -> Int in
            let value = try await queue.run { 5 }
            withUnsafeCurrentTask { $0?.cancel() }
            return value
        }
        #expect(try await task.value == 5)
        #expect(queue.operationCount == 0)
    }

    @Test func manyConcurrentRunsRespectTheWidthAndAllReturn() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        let inside = QTHighWater()
        let sum = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<300 {
                group.addTask {
                    try await queue.run {
                        inside.enter()
                        defer { inside.leave() }
                        return i
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(sum == (0..<300).reduce(0, +))
        #expect(inside.maximum <= 3)
        #expect(queue.operationCount == 0)
    }

    @Test func thePriorityOrdersRunsAmongWaitingOperations() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let order = QTLog<String>()
        let low = Task { try await queue.run(priority: .veryLow) { order.append("low") } }
        #expect(await atEventually { queue.operationCount == 1 })
        let high = Task { try await queue.run(priority: .veryHigh) { order.append("high") } }
        #expect(await atEventually { queue.operationCount == 2 })
        queue.isSuspended = false
        try await low.value
        try await high.value
        #expect(order.all == ["high", "low"])
    }

    /// Issue 19: `run` on a shut-down queue throws `queueShutDown` (its documentation listed only `queueFull` and
    /// `forkedChild`), and the body never runs.
    @Test func aShutDownQueueRefusesTheRunAndTheBodyNeverRuns() async throws {
        let queue = try SpindleOperationQueue(name: "at-closed", maxConcurrentOperationCount: 1)
        queue.shutdown()
        let ran = QTCounter()
        let outcome = await ATOutcome { try await queue.run { ran.increment() } }
        #expect(outcome == .failed(SpindleError.queueShutDown(name: "at-closed").description))
        #expect(ran.count == 0)
        #expect(try await queue.awaitTermination(timeout: .seconds(atDeadline)))
    }
}
