import CShim
import Synchronization
import Testing
@testable import Spindle

/// A concurrent operation whose `main` waits for a gate, then finishes (or leaves finishing to the test).
private final class GatedConcurrentOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let entered = opSemaphore()
    let gate = opSemaphore()
    let mainThreadID = Atomic<Int32>(0)
    let finishesItself: Bool
    let completions = OpCounter()

    init(finishesItself: Bool) {
        self.finishesItself = finishesItself
        super.init()
        let completions = self.completions
        self.completionBlock = { completions.increment() }
    }

    override func main() throws {
        self.mainThreadID.store(cshim_gettid(), ordering: .releasing)
        self.entered.signal()
        _ = self.gate.wait(timeout: opDeadline)
        if self.finishesItself { try self.finish() }
    }
}

/// A subclass that overrides `start()` itself (the seeds' hand-written MyOperation) using the subclassing hooks.
private final class HandDrivenOperation: SpindleOperation, @unchecked Sendable {
    let workThreadID = Atomic<Int32>(0)
    override var isAsynchronous: Bool { true }

    override func start() throws {
        guard try self.beginExecuting() else { return }
        try SpindleThread.detach(name: "hand-driven") { [self] in
            self.workThreadID.store(cshim_gettid(), ordering: .releasing)
            try? self.main()
            try? self.finish()
        }
    }
}

private struct Boom: Error, Equatable {}

/// SEMANTICS B13, B16–B18 without a queue: operations whose work ends after `start()` returns.
@Suite struct ConcurrentOperationTests {
    // B13
    @Test func executingRightAfterStartAndWaitBlocksUntilFinish() throws {
        let op = GatedConcurrentOperation(finishesItself: false)
        try op.start()
        #expect(op.isExecuting, "executing right after start returns")
        #expect(!op.isFinished)
        #expect(op.entered.wait(timeout: opDeadline))
        #expect(op.mainThreadID.load(ordering: .acquiring) != cshim_gettid(), "main runs on the detached thread")
        op.gate.signal()
        let clock = ContinuousClock()
        let began = clock.now
        #expect(try op.waitUntilFinished(timeout: .milliseconds(100)) == false, "not finished until finish()")
        #expect(clock.now - began >= .milliseconds(100))
        #expect(op.isExecuting, "main returning does not finish a concurrent operation")
        let finisher = try OpThread.run { try? op.finish() }
        try op.waitUntilFinished()
        #expect(op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.completions.value == 1)
        #expect(finisher.finish())
    }

    @Test func finishFromMainEndsTheOperation() throws {
        let op = GatedConcurrentOperation(finishesItself: true)
        try op.start()
        op.gate.signal()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(op.isFinished)
        #expect(op.completions.value == 1)
        #expect(op.error == nil)
    }

    @Test func mainThrowingFinishesWithTheError() throws {
        final class Failing: SpindleConcurrentOperation, @unchecked Sendable {
            override func main() throws { throw Boom() }
        }
        let op = Failing()
        try op.start()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(op.isFinished)
        #expect(op.error as? Boom == Boom())
    }

    @Test func finishThrowingKeepsTheError() throws {
        let op = OpManualAsync()
        try op.start()
        try op.finish(throwing: Boom())
        #expect(op.isFinished)
        #expect(op.error as? Boom == Boom())
        #expect(op.completions.value == 1)
    }

    // B17: the end can be reported once.
    @Test func finishTwiceThrowsAlreadyFinished() throws {
        let op = OpManualAsync()
        try op.start()
        #expect(opErrorCase { try op.finish() } == nil)
        #expect(opErrorCase { try op.finish() } == "operationAlreadyFinished")
        #expect(op.completions.value == 1)
        #expect(op.isFinished)
    }

    @Test func finishBeforeStartThrowsNotExecuting() throws {
        let op = OpManualAsync()
        #expect(opErrorCase { try op.finish() } == "operationNotExecuting")
        #expect(!op.isFinished && op.isReady && !op.isExecuting)
        #expect(op.completions.value == 0)
        try op.start()
        try op.finish()
        #expect(op.isFinished)
    }

    // B18: a cancelled concurrent operation started by hand still reports finished.
    @Test func cancelledConcurrentOperationFinishesWithoutMain() throws {
        let op = GatedConcurrentOperation(finishesItself: true)
        op.cancel()
        try op.start()
        #expect(op.isFinished)
        #expect(!op.isExecuting)
        #expect(op.mainThreadID.load(ordering: .acquiring) == 0, "main never ran")
        #expect(op.completions.value == 1)
    }

    @Test func cancelledButUnstartedCanBeFinishedByHand() throws {
        let op = OpManualAsync()
        op.cancel()
        try op.finish()
        #expect(op.isFinished)
        #expect(op.completions.value == 1)
        #expect(opErrorCase { try op.finish() } == "operationAlreadyFinished")
    }

    // B17 raced: two threads report the end at once; exactly one succeeds.
    @Test func racingFinishersExactlyOneSucceeds() throws {
        let rounds = 1_000
        let go = (opSemaphore(), opSemaphore())
        let done = (opSemaphore(), opSemaphore())
        let target = OpBox<OpManualAsync?>(nil)
        let results = (OpBox<String?>("unset"), OpBox<String?>("unset"))
        let stop = OpFlag()
        let arrived = OpCounter()
        @Sendable func racer(_ go: SpindleSemaphore, _ done: SpindleSemaphore, _ result: OpBox<String?>) {
            while go.wait(timeout: opDeadline), !stop.isSet {
                let op = target.value!
                arrived.increment()
                var spins = 0
                while arrived.value % 2 != 0 && spins < 100_000 { spins += 1 }
                result.value = opErrorCase { try op.finish() }
                done.signal()
            }
        }
        let first = try OpThread.run { racer(go.0, done.0, results.0) }
        let second = try OpThread.run { racer(go.1, done.1, results.1) }
        var failures: [String] = []
        for round in 0..<rounds {
            let op = OpManualAsync()
            try op.start()
            target.value = op
            go.0.signal()
            go.1.signal()
            guard done.0.wait(timeout: opDeadline), done.1.wait(timeout: opDeadline) else {
                failures.append("round \(round): a finisher hung")
                break
            }
            let outcome = [results.0.value, results.1.value].map { $0 ?? "ok" }.sorted()
            if outcome != ["ok", "operationAlreadyFinished"] { failures.append("round \(round): \(outcome)") }
            if op.completions.value != 1 { failures.append("round \(round): \(op.completions.value) completions") }
            if !op.isFinished || op.isExecuting { failures.append("round \(round): state \(op)") }
        }
        stop.set()
        go.0.signal()
        go.1.signal()
        #expect(first.finish())
        #expect(second.finish())
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }

    // B18: a subclass that overrides start() itself.
    @Test func overridingStartWithBeginExecutingAndFinish() throws {
        let op = HandDrivenOperation()
        let changes = opRecordChanges(op, keys: [.isExecuting, .isFinished])
        let completed = opSemaphore()
        op.completionBlock = { completed.signal() }
        try op.start()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(completed.wait(timeout: .zero), "completion ran before waitUntilFinished returned")
        #expect(op.isFinished && !op.isExecuting)
        #expect(op.workThreadID.load(ordering: .acquiring) != cshim_gettid())
        let events = changes.all
        #expect(Array(events.prefix(2)) == ["will isExecuting", "did isExecuting"])
        #expect(events.suffix(4).sorted() == ["did isExecuting", "did isFinished", "will isExecuting", "will isFinished"])
        #expect(opProtocolViolations(events).isEmpty, "\(events)")
        #expect(events.count == 6, "\(events)")
    }

    @Test func beginExecutingOnACancelledOperationFinishesItUnrun() throws {
        let op = HandDrivenOperation()
        op.cancel()
        try op.start()
        #expect(op.isFinished)
        #expect(op.workThreadID.load(ordering: .acquiring) == 0)
    }
}
