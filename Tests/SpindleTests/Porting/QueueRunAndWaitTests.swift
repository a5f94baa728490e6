import Testing
@testable import Spindle

private struct BodyFailure: Error, Equatable { let code: Int }

/// Issue 22: `addOperationAndWait`, the `DispatchQueue.sync` mapping.
@Suite struct QueueRunAndWaitTests {
    @Test func returnsTheValueComputedOnAWorker() throws {
        let queue = SpindleOperationQueue(name: "sync-value")
        let caller = SpindleThread.current.threadID
        let (value, thread) = try queue.addOperationAndWait { (21 * 2, SpindleThread.current.threadID) }
        #expect(value == 42)
        #expect(thread != caller)
    }

    @Test func rethrowsTheBodysError() {
        let queue = SpindleOperationQueue(name: "sync-error")
        #expect(throws: BodyFailure(code: 7)) { try queue.addOperationAndWait { () throws -> Int in throw BodyFailure(code: 7) } }
    }

    @Test func onASerialQueueItRunsAfterWhatWasAddedBefore() throws {
        let queue = try SpindleOperationQueue(name: "sync-serial", maxConcurrentOperationCount: 1)
        let log = OpLog<String>()
        let release = opSemaphore()
        queue.addOperation { _ = release.wait(timeout: opDeadline); log.add("earlier") }
        release.signal()
        let seen = try queue.addOperationAndWait { () -> [String] in
            log.add("sync")
            return log.all
        }
        #expect(seen == ["earlier", "sync"])
    }

    @Test func fromTheQueueItselfItThrowsAndRunsNothing() throws {
        let queue = try SpindleOperationQueue(name: "sync-self", maxConcurrentOperationCount: 1)
        let ranInner = OpFlag()
        let outcome = OpBox<String>("not run")
        let op = SpindleBlockOperation {
            do {
                _ = try queue.addOperationAndWait { ranInner.set() }
                outcome.value = "no error"
            } catch let error as SpindleError {
                outcome.value = Mirror(reflecting: error).children.first?.label ?? "\(error)"
            } catch {
                outcome.value = "\(error)"
            }
        }
        try queue.addOperation(op)
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(outcome.value == "waitOnOwnQueue")
        #expect(!ranInner.isSet)
    }

    @Test func aShutDownQueueRefusesAndRunsNothing() {
        let queue = SpindleOperationQueue(name: "sync-shut")
        queue.shutdown()
        let ran = OpFlag()
        #expect(opErrorCase { _ = try queue.addOperationAndWait { ran.set() } } == "queueShutDown")
        #expect(!ran.isSet)
    }
}
