import Testing

@testable import Spindle

/// Seed 004's two ways for an operation to wait in `main` for an asynchronous callback, each cancellable:
/// park in the thread's run loop until the port fires or `cancel` invalidates it; or wait on a semaphore that the
/// callback or `cancel` signals. The queue has maxConcurrentOperationCount = 2, as in the seed.
@Suite struct WaitingOperationTests {
    /// The recipe upload of seed 004, waiting with a run loop and a port.
    final class PortUpload: SpindleOperation, @unchecked Sendable {
        let port: SpindlePort<String>
        let started = try! SpindleSemaphore(value: 0)
        let received: SpindleLockedValue<[String]>
        let returnedInTime = SpindleLockedValue(false)

        override init() {
            let received = SpindleLockedValue<[String]>([])
            self.received = received
            self.port = SpindlePort(name: "upload") { reply in received.withLockedValue { $0.append(reply) } }
            super.init()
        }
        var replies: [String] { self.received.value }

        override func main() throws {
            let loop = SpindleRunLoop.current
            try loop.add(self.port)
            self.started.signal()
            let invalidated = try loop.run(untilInvalidated: self.port, before: .after(.seconds(30)))
            self.returnedInTime.withLockedValue { $0 = invalidated }
        }

        /// The network callback: delivers the reply through the port, then ends the wait.
        func completeUpload(with reply: String) throws {
            try self.port.send(reply)
            self.port.invalidate()
        }

        override func cancel() {
            super.cancel()
            self.port.invalidate()  // wakes the run loop in main from any thread
        }
    }

    /// The same upload, waiting on a semaphore.
    final class SemaphoreUpload: SpindleOperation, @unchecked Sendable {
        let done = try! SpindleSemaphore(value: 0)
        let started = try! SpindleSemaphore(value: 0)
        let reply = SpindleLockedValue<String?>(nil)
        let returnedInTime = SpindleLockedValue(false)

        override func main() throws {
            self.started.signal()
            let woken = self.done.wait(timeout: .seconds(30))
            self.returnedInTime.withLockedValue { $0 = woken }
        }

        func completeUpload(with reply: String) {
            self.reply.withLockedValue { $0 = reply }
            self.done.signal()
        }

        override func cancel() {
            super.cancel()
            self.done.signal()
        }
    }

    @Test func runLoopAndPortWaitEndsWithTheCallbackOrWithCancel() throws {
        let queue = try SpindleOperationQueue(name: "uploads", maxConcurrentOperationCount: 2)
        let completed = PortUpload(), cancelled = PortUpload()
        try queue.addOperations([completed, cancelled])
        #expect(completed.started.wait(timeout: .seconds(10)) && cancelled.started.wait(timeout: .seconds(10)))
        let callback = try SpindleThread.spawnJoinable(name: "network") { try? completed.completeUpload(with: "201") }
        cancelled.cancel()  // in the middle of its wait
        try callback.join()
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        #expect(completed.replies == ["201"])
        #expect(completed.returnedInTime.value && !completed.isCancelled)
        #expect(cancelled.replies.isEmpty)
        #expect(cancelled.returnedInTime.value && cancelled.isCancelled && cancelled.isFinished)
        #expect(throws: SpindleError.self) { try cancelled.port.send("late") }
    }

    @Test func semaphoreWaitEndsWithTheCallbackOrWithCancel() throws {
        let queue = try SpindleOperationQueue(name: "uploads", maxConcurrentOperationCount: 2)
        let completed = SemaphoreUpload(), cancelled = SemaphoreUpload()
        try queue.addOperations([completed, cancelled])
        #expect(completed.started.wait(timeout: .seconds(10)) && cancelled.started.wait(timeout: .seconds(10)))
        let callback = try SpindleThread.spawnJoinable(name: "network") { completed.completeUpload(with: "201") }
        cancelled.cancel()
        try callback.join()
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        #expect(completed.reply.value == "201" && completed.returnedInTime.value)
        #expect(cancelled.reply.value == nil && cancelled.returnedInTime.value && cancelled.isCancelled)
    }
}
