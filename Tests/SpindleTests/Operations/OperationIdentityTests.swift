import Testing
@testable import Spindle

/// Issue 22: operations and queues compare and hash by identity, as Foundation's objects do; the
/// `SpindleBlockOperation(block:)` spelling.
@Suite struct OperationIdentityTests {
    @Test func operationsCompareAndHashByIdentity() {
        let a = OpProbe(name: "same")
        let b = OpProbe(name: "same")
        let ops: [SpindleOperation] = [a, b, a]
        #expect(a == a && a != b)
        #expect(ops.firstIndex(of: b) == 1)
        #expect(ops.lastIndex(of: a) == 2)
        #expect(Set(ops).count == 2)
        var pending: [SpindleOperation: String] = [a: "first"]
        pending[b] = "second"
        #expect(pending[a] == "first" && pending[b] == "second")
        #expect(SpindleBlockOperation() != SpindleBlockOperation())
    }

    @Test func queuesCompareAndHashByIdentity() {
        let q1 = SpindleOperationQueue(name: "q")
        let q2 = SpindleOperationQueue(name: "q")
        #expect(q1 == q1 && q1 != q2)
        #expect(Set([q1, q2, q1]).count == 2)
    }

    @Test func blockLabelInitializerRunsItsBlock() throws {
        let ran = OpCounter()
        let op = SpindleBlockOperation(block: { ran.increment() })
        try op.start()
        #expect(ran.value == 1)
        #expect(op.executionBlocks.count == 1)
    }
}

/// A base class as ported from the "Advanced NSOperations" sample: its own `finish(_ errors:)` with a default, which
/// its subclasses call as `finish()`.
private class PortedSampleOperation: SpindleOperation, @unchecked Sendable {
    let finishedWith = SpindleLockedValue<[String]?>(nil)

    override func start() throws {
        guard try self.beginExecuting() else { return }
        self.execute()
    }

    func execute() { finish() }  // the sample's subclasses call finish() with no arguments

    func finish(_ errors: [any Error] = []) {
        self.finishedWith.withLockedValue { $0 = errors.map { "\($0)" } }
        try? self.finish(throwing: errors.first)
    }
}

private final class PortedConcurrentOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let calledOwnFinish = OpFlag()

    override func main() throws { finish() }

    func finish(_ errors: [any Error] = []) {
        self.calledOwnFinish.set()
        try? self.finish(throwing: errors.first)
    }
}

@Suite struct PortedFinishTests {
    /// Issue 22: a subclass's own `finish(_ errors: [Error] = [])` is what its plain `finish()` calls (not
    /// ambiguous with `finish(throwing:)`, not silently Spindle's).
    @Test func aSubclassesOwnFinishWithDefaultsIsWhatAPlainFinishCalls() throws {
        let op = PortedSampleOperation()
        try op.start()
        #expect(op.isFinished)
        #expect(op.finishedWith.withLockedValue { $0 } == [])
        let concurrent = PortedConcurrentOperation()
        try concurrent.start()
        #expect(try concurrent.waitUntilFinished(timeout: opDeadline))
        #expect(concurrent.calledOwnFinish.isSet)
    }

    /// Without such a subclass method, `finish()` is Spindle's and still throws its typed misuse errors.
    @Test func plainFinishStillThrowsOnMisuse() {
        let op = OpManualAsync()
        #expect(throws: SpindleError.self) { try op.finish() }
    }
}
