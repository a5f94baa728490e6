import Glibc
import Synchronization
import Testing

@testable import Spindle

/// A dependency that fails: its `main` throws.
private final class FailingStep: SpindleOperation, @unchecked Sendable {
    struct Failure: Error {}
    override func main() throws { throw Failure() }
}

/// A subclass whose `cancel()` does its own thing and never calls `super.cancel()`.
private final class StubbornCancel: SpindleOperation, @unchecked Sendable {
    let cancelCalls = Atomic<Int>(0)
    let mainRuns = Atomic<Int>(0)
    override func cancel() { self.cancelCalls.add(1, ordering: .relaxed) }
    override func main() throws { self.mainRuns.add(1, ordering: .relaxed) }
}

/// Fixes of the fifth round (2026-11-26): each test failed before its fix.
@Suite("Fifth round of fixes", .serialized, .timeLimit(.minutes(2)))
struct FifthRoundFixesTests {
    /// `cancelsOnFailedDependency`'s last gate cancels and looks again; a `cancel()` override that does not call
    /// super's left the operation uncancelled, so a worker spun there for ever. The gate now cancels it itself: the
    /// override is still called (once), the operation finishes unrun, and nothing spins.
    @Test func aCancelOverrideWithoutSuperDoesNotSpinTheFailedDependencyGate() throws {
        let queue = try SpindleOperationQueue(name: "stubborn", maxConcurrentOperationCount: 1)
        let failing = FailingStep()
        let stubborn = StubbornCancel()
        stubborn.cancelsOnFailedDependency = true
        try stubborn.addDependency(failing)
        try queue.addOperations([failing, stubborn])
        #expect(try stubborn.waitUntilFinished(timeout: .seconds(10)), "the worker spun in the gate")
        #expect(stubborn.isCancelled && stubborn.mainRuns.load(ordering: .relaxed) == 0)
        #expect(stubborn.cancellationReason == .dependencyFailed)
        #expect(stubborn.cancelCalls.load(ordering: .relaxed) >= 1)
        #expect(try queue.waitUntilAllOperationsAreFinished(until: .after(.seconds(10))))
    }

    /// A queue served by a run loop (as the main queue is by the main thread): a drain wait from the loop's own
    /// thread, outside any operation, waited for work only that thread could run. It throws `waitOnOwnQueue`.
    @Test func aDrainWaitFromTheThreadServingTheQueueIsRefused() throws {
        let outcome = SpindleLockedValue("not run")
        try runJoinableThreads(1, name: "serving") { _ in
            let loop = SpindleRunLoop.current
            let queue = SpindleOperationQueue(name: "served", servedBy: loop)
            let ran = Atomic<Bool>(false)
            queue.addOperation { ran.store(true, ordering: .relaxed) }
            let seen: String
            do { seen = "returned \(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(3)))" } catch {
                seen = "\(error)"
            }
            outcome.withLockedValue { $0 = seen }
            // Serve it, so nothing is left behind.
            while !ran.load(ordering: .relaxed) { _ = try? loop.runOnce(before: .after(.seconds(1))) }
        }
        #expect(outcome.withLockedValue { $0 } == SpindleError.waitOnOwnQueue(name: "served").description)
    }
}
