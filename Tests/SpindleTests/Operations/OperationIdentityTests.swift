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
