import Testing

@testable import Spindle

/// `addOperations(_:waitUntilFinished: true)` from an operation running on the same queue: refused with
/// `waitOnOwnQueue` (nothing added) when the wait could never end, allowed otherwise.
@Suite struct QueueBatchWaitTests {
    @Test func aMemberOfAWidthOneQueueCannotWaitForABatchItAddsThere() throws {
        let queue = try SpindleOperationQueue(name: "batch-wait-1", maxConcurrentOperationCount: 1)
        let inner = SpindleBlockOperation {}
        let outcome = SpindleLockedValue<String>("not run")
        queue.addOperation {
            do {
                try queue.addOperations([inner], waitUntilFinished: true)
                outcome.withLockedValue { $0 = "returned" }
            } catch {
                outcome.withLockedValue { $0 = "\(error)" }
            }
        }
        try queue.waitUntilAllOperationsAreFinished()
        #expect(outcome.withLockedValue { $0 } == SpindleError.waitOnOwnQueue(name: "batch-wait-1").description)
        // Nothing was added: the operation is untouched and can go elsewhere.
        #expect(!inner.isFinished && !inner.isExecuting)
        let other = SpindleOperationQueue(name: "batch-wait-other")
        try other.addOperations([inner], waitUntilFinished: true)
        #expect(inner.isFinished)
    }

    @Test func onlyTheWaitThatWouldHoldTheLastSlotIsRefused() throws {
        let queue = try SpindleOperationQueue(name: "batch-wait-2", maxConcurrentOperationCount: 2)
        let innerResult = SpindleLockedValue<String>("not run")
        let outerResult = SpindleLockedValue<String>("not run")
        let leaf = SpindleBlockOperation {}
        // The outer member waits for `middle` (allowed: one slot stays free, and `middle` runs in it); `middle`
        // then asks to wait too, which would leave no slot for `leaf`.
        let middle = SpindleBlockOperation {
            do {
                try queue.addOperations([leaf], waitUntilFinished: true)
                innerResult.withLockedValue { $0 = "returned" }
            } catch {
                innerResult.withLockedValue { $0 = "\(error)" }
            }
        }
        queue.addOperation {
            do {
                try queue.addOperations([middle], waitUntilFinished: true)
                outerResult.withLockedValue { $0 = "returned" }
            } catch {
                outerResult.withLockedValue { $0 = "\(error)" }
            }
        }
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(30)))
        #expect(outerResult.withLockedValue { $0 } == "returned")
        #expect(innerResult.withLockedValue { $0 } == SpindleError.waitOnOwnQueue(name: "batch-wait-2").description)
        #expect(!leaf.isFinished)
        #expect(queue.core.lock.withLock { queue.core.slots.heldByBatchWaiters } == 0)
    }

    @Test func aWaitFromAnotherQueueOrThreadIsNeverRefused() throws {
        let queue = try SpindleOperationQueue(name: "batch-wait-3", maxConcurrentOperationCount: 1)
        let caller = try SpindleOperationQueue(name: "batch-wait-caller", maxConcurrentOperationCount: 1)
        let ran = SpindleLockedValue(0)
        caller.addOperation {
            try? queue.addOperations([SpindleBlockOperation { ran.withLockedValue { $0 += 1 } }], waitUntilFinished: true)
        }
        try caller.waitUntilAllOperationsAreFinished()
        try queue.addOperations([SpindleBlockOperation { ran.withLockedValue { $0 += 1 } }], waitUntilFinished: true)
        #expect(ran.withLockedValue { $0 } == 2)
    }

    /// The threads that hold a slot of the queue without being its worker also have their wait refused when it
    /// could never end: a concurrent operation's own thread, and a completion block run on the thread that
    /// finished it (before, both waited for ever on a width-1 queue).
    @Test func aConcurrentOperationsThreadAndAnOffWorkerCompletionBlockAreRefusedToo() throws {
        final class WaitsInMain: SpindleConcurrentOperation, @unchecked Sendable {
            let queue: SpindleOperationQueue
            let outcome = SpindleLockedValue<String>("not run")
            init(_ queue: SpindleOperationQueue) {
                self.queue = queue
                super.init()
            }
            override func main() throws {
                let caseName = opErrorCase { try self.queue.addOperations([SpindleBlockOperation {}], waitUntilFinished: true) }
                self.outcome.withLockedValue { $0 = caseName ?? "returned" }
                try self.finish()
            }
        }
        let queue = try SpindleOperationQueue(name: "batch-wait-threads", maxConcurrentOperationCount: 1)
        let concurrent = WaitsInMain(queue)
        try queue.addOperation(concurrent)
        let finishedInTime = try concurrent.waitUntilFinished(timeout: .seconds(qtDeadline))
        let late = QTDeferredFinishOperation()
        let completionOutcome = SpindleLockedValue<String>("not run")
        late.completionBlock = {
            let caseName = opErrorCase { try queue.addOperations([SpindleBlockOperation {}], waitUntilFinished: true) }
            completionOutcome.withLockedValue { $0 = caseName ?? "returned" }
        }
        try queue.addOperation(late)
        #expect(late.mainEntered.wait())
        #expect(qtOnOtherThread { try? late.complete() })
        let lateInTime = try late.waitUntilFinished(timeout: .seconds(qtDeadline))
        if !finishedInTime || !lateInTime { try queue.setMaxConcurrentOperationCount(2) }  // unstick a hung wait
        qtDrain(queue)
        #expect(finishedInTime && concurrent.outcome.withLockedValue { $0 } == "waitOnOwnQueue")
        #expect(lateInTime && completionOutcome.withLockedValue { $0 } == "waitOnOwnQueue")
    }

    /// The blocks of one block operation share its one slot: their batch waits count it once (before, each counted
    /// a slot: the count exceeded the running operations, an assertion in debug builds, a wrong refusal otherwise).
    @Test func theBlocksOfOneOperationWaitingForBatchesHoldOneSlot() throws {
        let queue = try SpindleOperationQueue(name: "batch-wait-blocks", maxConcurrentOperationCount: 2)
        let go = QTGate()
        let outcomes = QTLog<String>()
        let op = SpindleBlockOperation()
        for _ in 0..<3 {
            try op.addExecutionBlock {
                _ = go.wait()
                let caseName = opErrorCase { try queue.addOperations([SpindleBlockOperation {}], waitUntilFinished: true) }
                outcomes.append(caseName ?? "returned")
            }
        }
        try queue.addOperation(op)
        #expect(qtWaitUntil { op.isExecuting })
        queue.isSuspended = true  // the batches wait until the blocks are all inside their waits
        go.open(3)
        // Each block's batch is in the queue (the block operation and three batches) unless a wait was refused.
        #expect(qtWaitUntil { queue.operationCount == 4 || outcomes.count > 0 })
        let (held, running, consistent) = queue.core.lock.withLock {
            (queue.core.slots.heldByBatchWaiters, queue.core.slots.running, queue.core.slots.check())
        }
        #expect(held == 1 && running == 1 && consistent)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(outcomes.all == ["returned", "returned", "returned"])
    }

    /// A concurrent operation finished from another thread while its own thread waits for a batch: its slot is
    /// freed, and stops counting as held by a batch waiter at once (before, the count stayed above the running
    /// operations once the batch ran: an assertion in debug builds).
    @Test func aConcurrentOperationFinishedWhileItsThreadWaitsForABatchStopsHoldingItsSlot() throws {
        final class WaitsInMain: SpindleConcurrentOperation, @unchecked Sendable {
            let queue: SpindleOperationQueue
            let batch: SpindleOperation
            let outcome = QTLog<String>()
            init(_ queue: SpindleOperationQueue, batch: SpindleOperation) {
                self.queue = queue
                self.batch = batch
                super.init()
            }
            override func main() throws {
                self.outcome.append(opErrorCase { try self.queue.addOperations([self.batch], waitUntilFinished: true) }
                    ?? "returned")
            }
        }
        let queue = try SpindleOperationQueue(name: "batch-wait-finished-elsewhere", maxConcurrentOperationCount: 2)
        let batchStarted = QTGate(), release = QTGate()
        let batch = SpindleBlockOperation {
            batchStarted.open()
            _ = release.wait()
        }
        let waiter = WaitsInMain(queue, batch: batch)
        try queue.addOperation(waiter)
        #expect(batchStarted.wait())
        try waiter.finish()  // from this thread, while its own thread still waits for the batch
        #expect(queue.core.lock.withLock { queue.core.slots.heldByBatchWaiters == 0 && queue.core.slots.check() })
        release.open()
        #expect(qtWaitUntil { waiter.outcome.count == 1 })
        qtDrain(queue)
        #expect(waiter.outcome.all == ["returned"])
        #expect(queue.core.lock.withLock { queue.core.batchWaitsBySlot.isEmpty && queue.core.slots.check() })
    }

    /// A worker running another member's completion block (its operation finished that member) holds two slots
    /// while the block waits for a batch: refused at width 2 (before, it was let through and could never end).
    @Test func aCompletionBlockRunByAnotherMembersWorkerCountsBothSlots() throws {
        let queue = try SpindleOperationQueue(name: "batch-wait-two-slots", maxConcurrentOperationCount: 2)
        let other = QTDeferredFinishOperation()
        let outcome = QTLog<String>()
        other.completionBlock = {
            outcome.append(opErrorCase { try queue.addOperations([SpindleBlockOperation {}], waitUntilFinished: true) }
                ?? "returned")
        }
        try queue.addOperation(other)
        #expect(other.mainEntered.wait())
        let finisher = SpindleBlockOperation { try? other.complete() }  // its completion block runs on this worker
        try queue.addOperation(finisher)
        let inTime = try finisher.waitUntilFinished(timeout: .seconds(qtDeadline))
        if !inTime { try queue.setMaxConcurrentOperationCount(3) }  // unstick a hung wait
        qtDrain(queue)
        #expect(inTime && outcome.all == ["waitOnOwnQueue"])
    }
}
