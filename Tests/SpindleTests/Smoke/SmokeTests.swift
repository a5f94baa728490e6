import Testing
import Synchronization
@testable import Spindle

final class Recorder: @unchecked Sendable {
    let m = SpindleLockedValue<[String]>([])  // a pthread mutex: ThreadSanitizer sees it (not Synchronization.Mutex)
    func add(_ s: String) { m.withLockedValue { $0.append(s) } }
    var all: [String] { m.withLockedValue { $0 } }
}

@Suite struct SmokeTests {
    @Test func chainAndQueue() throws {
        let q = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let rec = Recorder()
        var prev: SpindleOperation? = nil
        var ops: [SpindleOperation] = []
        for i in 0..<100 {
            let op = SpindleBlockOperation { rec.add("\(i)") }
            if let prev { try op.addDependency(prev) }
            prev = op
            ops.append(op)
        }
        try q.addOperations(ops)
        #expect(try q.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        #expect(rec.all == (0..<100).map { "\($0)" })
        #expect(q.operationCount == 0)
    }

    @Test func priorityOnSuspendedSerial() throws {
        let q = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        q.isSuspended = true
        let rec = Recorder()
        for p in [SpindleOperation.QueuePriority.veryLow, .low, .normal, .high, .veryHigh] {
            let op = SpindleBlockOperation { rec.add("\(p)") }
            op.queuePriority = p
            try q.addOperation(op)
        }
        q.isSuspended = false
        #expect(try q.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        #expect(rec.all == ["veryHigh", "high", "normal", "low", "veryLow"])
    }

    @Test func barrierAndCancel() throws {
        let q = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let rec = Recorder()
        let gate = try SpindleSemaphore(value: 0)
        q.addOperation { gate.wait(); rec.add("a") }
        q.addOperation { gate.wait(); rec.add("b") }
        q.addBarrierBlock { rec.add("barrier") }
        q.addOperation { rec.add("c") }
        let cancelled = SpindleBlockOperation { rec.add("never") }
        let done = Atomic<Int>(0)
        cancelled.completionBlock = { done.add(1, ordering: .relaxed) }
        try q.addOperation(cancelled)
        cancelled.cancel()
        gate.signal(); gate.signal()
        #expect(try q.waitUntilAllOperationsAreFinished(timeout: .seconds(10)))
        let all = rec.all
        #expect(all.count == 4)
        #expect(Set(all.prefix(2)) == ["a", "b"])
        #expect(all[2] == "barrier")
        #expect(all[3] == "c")
        #expect(done.load(ordering: .relaxed) == 1)
        #expect(cancelled.completionBlock == nil)
    }

    final class MyOp: SpindleConcurrentOperation, @unchecked Sendable {
        let rec: Recorder
        init(_ rec: Recorder) { self.rec = rec }
        override func main() throws {
            rec.add("main")
            try finish()
        }
    }

    @Test func concurrentPerform() throws {
        let rec = Recorder()
        let op = MyOp(rec)
        let changes = Recorder()
        op.observe([.isExecuting, .isFinished]) { _, c in changes.add(c.phaseAndKey) }
        #expect(SpindleOperation.perform(op))
        rec.add("after")
        #expect(try op.waitUntilFinished(timeout: .seconds(10)))
        #expect(rec.all.contains("main"))
        #expect(changes.all.last == "did isFinished")
        #expect(throws: SpindleError.self) { try op.finish() }
    }

    @Test func cycleRejected() throws {
        let a = SpindleOperation(), b = SpindleOperation(), c = SpindleOperation()
        try b.addDependency(a); try c.addDependency(b)
        #expect(throws: SpindleError.self) { try a.addDependency(c) }
        #expect(a.dependencies.isEmpty)
        #expect(throws: SpindleError.self) { try a.addDependency(a) }
    }

    @Test func invocation() throws {
        final class Counter { func add(_ x: Int) -> Int { x + 1 } }
        let op = SpindleInvocationOperation(target: Counter(), method: Counter.add, argument: 41)
        try op.start()
        #expect(try op.result() == 42)
    }
}
