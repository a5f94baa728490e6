import Testing

@testable import Spindle

/// `SpindleAsyncOperation`: an async body on a queue; finishes when the body returns; `cancel()` cancels its
/// task; holds its slot but no thread while suspended.
@Suite struct AsyncOperationTests {
    final class Fetch: SpindleAsyncOperation, @unchecked Sendable {
        let input: SpindleSemaphore
        let log: QTLog<String>
        init(input: SpindleSemaphore, log: QTLog<String>) {
            self.input = input
            self.log = log
            super.init()
        }
        override func asyncMain() async throws {
            self.log.append("began")
            try await self.input.wait()
            self.log.append("ended")
        }
    }

    @Test func aSubclassBodyRunsAndTheOperationFinishesWhenItReturns() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let input = try SpindleSemaphore(value: 0), log = QTLog<String>()
        let op = Fetch(input: input, log: log)
        let completed = QTFlag()
        op.completionBlock = { completed.set() }
        #expect(op.isAsynchronous)
        try queue.addOperation(op)
        #expect(await atEventually { input.waiterCount == 1 })
        #expect(op.isExecuting && !op.isFinished, "executing while its body is suspended")
        input.signal()
        try await op.waitUntilFinished()
        #expect(log.all == ["began", "ended"])
        #expect(op.isFinished && op.error == nil && completed.isSet)
    }

    @Test func theBodysErrorIsKept() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let op = SpindleAsyncOperation { throw ATError(code: 9) }
        try queue.addOperation(op)
        try await op.waitUntilFinished()
        #expect((op.error as? ATError) == ATError(code: 9))
    }

    @Test func cancelCancelsTheRunningTask() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let input = try SpindleSemaphore(value: 0), log = QTLog<String>()
        let op = Fetch(input: input, log: log)
        try queue.addOperation(op)
        #expect(await atEventually { input.waiterCount == 1 })
        op.cancel()
        try await op.waitUntilFinished()
        #expect(op.isCancelled)
        #expect(atIsCancellation(op.error), "the body's await saw the task's cancellation")
        #expect(log.all == ["began"])
        #expect(input.waiterCount == 0)
    }

    @Test func cancelBeforeStartFinishesItUnrun() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let ran = QTCounter()
        let op = SpindleAsyncOperation { ran.increment() }
        op.cancel()
        try queue.addOperation(op)
        try await op.waitUntilFinished()
        #expect(op.isFinished && op.isCancelled && ran.count == 0)
    }

    @Test func itKeepsItsSlotButGivesItsThreadBack() async throws {
        // Width 2, three async operations that suspend: two are in flight (slots), the third waits; and while
        // the two are suspended every worker thread of the queue is parked (no thread is held for them).
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let input = try SpindleSemaphore(value: 0), log = QTLog<String>()
        let ops = (0..<3).map { _ in Fetch(input: input, log: log) }
        try queue.addOperations(ops)
        #expect(await atEventually { input.waiterCount == 2 })
        #expect(await atEventually {
            queue.core.lock.withLock { queue.core.idle.parked == queue.core.idle.threads.count && queue.core.slots.running == 2 }
        })
        #expect(ops.filter(\.isExecuting).count == 2)
        input.signal()
        #expect(await atEventually { input.waiterCount == 2 }, "the third starts once a slot is free")
        input.signal()
        input.signal()
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(log.all.filter { $0 == "ended" }.count == 3)
    }

    @Test func theOperationIsCurrentInItsBodyAndChildTasks() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let seen = QTLog<Bool>()
        let op = SpindleAsyncOperation()
        let probe = SpindleAsyncOperation {
            let me = SpindleAsyncOperation.currentInTask
            async let child = SpindleAsyncOperation.currentInTask
            let inChild = await child
            seen.append(me != nil && me === inChild && me !== op)
        }
        try queue.addOperation(probe)
        try await probe.waitUntilFinished()
        #expect(seen.all == [true])
        #expect(SpindleAsyncOperation.currentInTask == nil)
    }

    @Test func dependentsRunAfterTheAsyncBodyReturned() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let input = try SpindleSemaphore(value: 0), log = QTLog<String>()
        let first = Fetch(input: input, log: log)
        let second = SpindleBlockOperation { log.append("dependent") }
        try second.addDependency(first)
        try queue.addOperations([second, first])
        #expect(await atEventually { input.waiterCount == 1 })
        input.signal()
        try await queue.waitUntilAllOperationsAreFinished()
        #expect(log.all == ["began", "ended", "dependent"])
    }

    @Test func startedByHandItRunsWithoutAQueue() async throws {
        let op = SpindleAsyncOperation {}
        try op.start()
        try await op.waitUntilFinished()
        #expect(op.isFinished)
    }
}
