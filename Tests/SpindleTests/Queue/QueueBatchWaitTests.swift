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
}
