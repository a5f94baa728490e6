import Testing

@testable import Spindle

/// Issue 22: Foundation names Spindle lacks are declared unavailable (`Porting/FoundationNames.swift`,
/// `SpindleOperation.isConcurrent`) so that a port's compile error says what to use. Those errors cannot be tested
/// here (a test that does not compile fails the whole build); what is tested is the other half: the names a port
/// uses instead, written as a porter writes them next to the unavailable ones, still compile unambiguously and do
/// what they say. An unavailable declaration that shadowed or clashed with one of them would break this file's
/// build.
@Suite struct FoundationNamesTests {
    /// `override var isAsynchronous` (what the `isConcurrent` rename leads to) is honoured: the queue treats the
    /// operation as running after `start()` returned.
    @Test func overridingIsAsynchronousStillWorks() throws {
        final class Ported: SpindleOperation, @unchecked Sendable {
            let started = opSemaphore()
            override var isAsynchronous: Bool { true }
            override func start() throws {
                try self.beginExecuting()
                self.started.signal()
            }
        }
        let op = Ported()
        #expect(op.isAsynchronous)
        let queue = SpindleOperationQueue(name: "names-async")
        try queue.addOperation(op)
        #expect(op.started.wait(timeout: opDeadline))
        #expect(op.isExecuting && queue.operationCount == 1, "it stays executing until finish()")
        try op.finish()
        qtDrain(queue)
        #expect(op.isFinished)
    }

    /// The priorities that replace `qualityOfService`: an operation's `queuePriority` and `threadPriority`, a
    /// thread's `priority` and `setPriority(_:)` (beside the unavailable `threadPriority` of `SpindleThread`).
    @Test func thePrioritiesThatReplaceQualityOfServiceResolve() throws {
        let op = SpindleBlockOperation {}
        op.queuePriority = .high
        op.threadPriority = 0.8
        #expect(op.queuePriority == .high && op.threadPriority == 0.8)
        let ran = OpFlag()
        let thread = SpindleThread(name: "names-priority") { _ in ran.set() }
        thread.setPriority(0.25)
        #expect(thread.priority == 0.25)
        try thread.startJoinable()
        try thread.join()
        #expect(ran.isSet)
        try op.start()
    }

    /// A queue's width, the property a porter sets where Foundation's `underlyingQueue` and `qualityOfService`
    /// sat, reads back.
    @Test func aQueuesWidthIsStillAProperty() {
        let queue = SpindleOperationQueue(name: "names-width")
        queue.maxConcurrentOperationCount = 2
        #expect(queue.maxConcurrentOperationCount == 2)
    }
}
