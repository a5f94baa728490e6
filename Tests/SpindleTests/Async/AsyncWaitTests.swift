import Testing

@testable import Spindle

/// `SpindleOperation.waitUntilFinished() async` and `SpindleOperationQueue.waitUntilAllOperationsAreFinished()
/// async`: they suspend, end with `CancellationError` when the awaiting task is cancelled (before or during),
/// never cancel the operation, and leave no waiter behind.
@Suite struct AsyncWaitTests {
    // MARK: Operations

    @Test func waitingForAFinishedOperationReturnsAtOnce() async throws {
        let op = SpindleBlockOperation {}
        try op.start()
        try await op.waitUntilFinished()
        #expect(op.waiterCount == 0)
    }

    @Test func theWaitReturnsAfterTheCompletionBlockAndTheQueue() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let completed = QTFlag()
        let op = SpindleBlockOperation { gate.wait(seconds: atDeadline) }
        op.completionBlock = { completed.set() }
        try queue.addOperation(op)
        let waiter = Task { try await op.waitUntilFinished() }
        #expect(await atEventually { op.waiterCount == 1 })
        #expect(!op.isFinished)
        gate.open()
        try await waiter.value
        #expect(op.isFinished)
        #expect(completed.isSet)
        #expect(queue.operationCount == 0, "the queue was told before the waiters")
        #expect(op.waiterCount == 0)
    }

    @Test func aCancelledTaskStopsWaitingButTheOperationGoesOn() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let op = SpindleBlockOperation { gate.wait(seconds: atDeadline) }
        try queue.addOperation(op)
        let waiter = Task { await ATOutcome { try await op.waitUntilFinished(); return 0 } }
        #expect(await atEventually { op.waiterCount == 1 })
        waiter.cancel()
        #expect(await waiter.value == .cancelled)
        #expect(op.waiterCount == 0, "the cancelled wait withdrew its waiter")
        #expect(!op.isCancelled && !op.isFinished, "cancelling the waiter does not cancel the operation")
        gate.open()
        try await op.waitUntilFinished()
        #expect(op.isFinished && !op.isCancelled)
    }

    @Test func aTaskCancelledBeforeWaitingThrowsAtOnce() async throws {
        let gate = QTGate()
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let op = SpindleBlockOperation { gate.wait(seconds: atDeadline) }
        try queue.addOperation(op)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await ATOutcome { try await op.waitUntilFinished(); return 0 }
        }
        #expect(await waiter.value == .cancelled)
        #expect(op.waiterCount == 0)
        #expect(!op.isCancelled)
        gate.open()
        try await queue.waitUntilAllOperationsAreFinished()
    }

    @Test func cancellingAfterTheWaitReturnedDoesNotTouchTheOperation() async throws {
        let op = SpindleBlockOperation {}
        let waiter = Task { () async throws -> Bool in
            try await op.waitUntilFinished()
            withUnsafeCurrentTask { $0?.cancel() }
            return Task.isCancelled
        }
        try op.start()
        #expect(try await waiter.value)
        #expect(op.isFinished && !op.isCancelled)
    }

    @Test func manyAwaitersAreAllReleasedOnce() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let op = SpindleBlockOperation { gate.wait(seconds: atDeadline) }
        try queue.addOperation(op)
        let released = QTCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await op.waitUntilFinished()
                    released.increment()
                }
            }
            #expect(await atEventually { op.waiterCount == 100 })
            #expect(released.count == 0)
            gate.open()
            try await group.waitForAll()
        }
        #expect(released.count == 100)
        #expect(op.waiterCount == 0)
    }

    @Test func anAsyncOperationWaitingForItselfIsTold() async throws {
        let outcome = QTLog<String>()
        let body = SpindleAsyncOperation {
            do { try await SpindleAsyncOperation.currentInTask!.waitUntilFinished() } catch { outcome.append("\(error)") }
        }
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        try queue.addOperation(body)
        try await body.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnSelf(name: body.displayName).description])
    }

    /// The documented limit: a `Task { }` made in the body inherits the body's marker and is told `waitOnSelf`
    /// (Swift cannot tell it from a child the body awaits); a `Task.detached` made there waits for the end.
    @Test func aTaskMadeInTheBodyIsInsideItADetachedOneWaitsForTheEnd() async throws {
        let outcome = QTLog<String>()
        let after = QTLog<Task<Bool, Never>>()
        let body = SpindleAsyncOperation {
            let op = SpindleAsyncOperation.currentInTask!
            let inherited = Task { () -> String in
                do { try await op.waitUntilFinished(); return "waited" } catch { return "\(error)" }
            }
            outcome.append(await inherited.value)
            after.append(Task.detached { () -> Bool in
                (try? await op.waitUntilFinished()) != nil && op.isFinished
            })
        }
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        try queue.addOperation(body)
        try await body.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnSelf(name: body.displayName).description])
        #expect(after.all.count == 1)
        for task in after.all { #expect(await task.value) }
    }

    // MARK: Queues

    @Test func waitingForAnEmptyQueueReturnsAtOnce() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.isEmpty })
    }

    @Test func theDrainWaitCoversOperationsAddedWhileWaiting() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let gateA = QTGate(), gateB = QTGate()
        queue.addOperation { gateA.wait(seconds: atDeadline) }
        let waiter = Task { try await queue.waitUntilAllOperationsAreFinished() }
        #expect(await atEventually { queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 1 } })
        let b = queue.addOperation { gateB.wait(seconds: atDeadline) }
        gateA.open()
        #expect(await atEventually { queue.operationCount == 1 })
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 1 }, "still waiting for b")
        gateB.open()
        try await waiter.value
        #expect(b.isFinished)
        #expect(queue.operationCount == 0)
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.isEmpty })
    }

    @Test func aCancelledDrainWaitLeavesTheQueueAlone() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        let op = queue.addOperation { gate.wait(seconds: atDeadline) }
        let first = Task { await ATOutcome { try await queue.waitUntilAllOperationsAreFinished(); return 1 } }
        let second = Task { await ATOutcome { try await queue.waitUntilAllOperationsAreFinished(); return 2 } }
        #expect(await atEventually { queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 2 } })
        first.cancel()
        #expect(await first.value == .cancelled)
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 1 })
        #expect(!op.isCancelled)
        gate.open()
        #expect(await second.value == .value(2))
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.isEmpty })
        // A blocking waiter is unaffected by the async ones.
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(atDeadline)))
    }

    @Test func theLastCancelledDrainWaiterClearsTheField() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let gate = QTGate()
        queue.addOperation { gate.wait(seconds: atDeadline) }
        let waiter = Task { await ATOutcome { try await queue.waitUntilAllOperationsAreFinished(); return 0 } }
        #expect(await atEventually { queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 1 } })
        waiter.cancel()
        #expect(await waiter.value == .cancelled)
        #expect(queue.core.lock.withLock { queue.core.asyncDrainWaiters.isEmpty }, "back to the no-waiter fast path")
        gate.open()
        try await queue.waitUntilAllOperationsAreFinished()
    }

    @Test func aDrainWaitFromTheQueuesOwnAsyncOperationIsTold() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let outcome = QTLog<String>()
        let op = SpindleAsyncOperation {
            do { try await queue.waitUntilAllOperationsAreFinished() } catch { outcome.append("\(error)") }
        }
        try queue.addOperation(op)
        try await op.waitUntilFinished()
        #expect(outcome.all == [SpindleError.waitOnOwnQueue(name: queue.name).description])
    }

    @Test func manyDrainAwaitersAreAllReleased() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 3)
        let gate = QTGate()
        for _ in 0..<3 { queue.addOperation { gate.wait(seconds: atDeadline) } }
        for _ in 0..<50 { queue.addOperation {} }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<64 { group.addTask { try await queue.waitUntilAllOperationsAreFinished() } }
            #expect(await atEventually { queue.core.lock.withLock { queue.core.asyncDrainWaiters.list?.count == 64 } })
            gate.open(3)
            try await group.waitForAll()
        }
        #expect(queue.operationCount == 0)
    }
}
