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
}
