import CShim
import Synchronization
import Testing
@testable import Spindle

/// A concurrent operation whose `main` reports its result through `check`.
private final class SelfWaitingConcurrentOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let outcome = OpBox<String?>("unset")
    override func main() throws {
        self.outcome.value = opErrorCase { _ = try self.waitUntilFinished(timeout: opDeadline) }
        try self.finish()
    }
}

/// SEMANTICS G52, G54, G56 and Part 1 item 4 (completion blocks); I63–I65 and Part 1 item 3 (waiting).
@Suite struct OperationCompletionWaitTests {
    // G52 / Part 1 item 4: exactly once, after finishing, for every way of finishing.
    @Test func completionRunsExactlyOnceAfterFinishing() throws {
        let finishedWhenRun = OpBox<Bool?>(nil)
        let op = OpProbe()
        let completions = OpCounter()
        op.completionBlock = { [unowned op] in
            finishedWhenRun.value = op.isFinished && !op.isExecuting
            completions.increment()
        }
        try op.start()
        try op.start()
        op.cancel()
        #expect(completions.value == 1)
        #expect(finishedWhenRun.value == true, "the operation reads finished inside its completion block")
    }

    @Test func completionRunsOnceForCancelledStartedByHand() throws {
        let op = OpProbe()
        op.cancel()
        try op.start()
        try op.start()
        #expect(op.completions.value == 1)
        #expect(op.mainRuns.value == 0)
    }

    @Test func completionRunsOnceForCancelledPerformed() throws {
        let op = OpProbe()
        op.cancel()
        #expect(SpindleOperation.perform(op))
        #expect(!SpindleOperation.perform(op), "a finished operation is not performed again")
        #expect(op.completions.value == 1)
        #expect(op.isFinished)
    }

    @Test func completionRunsOnceForAFailedOperation() throws {
        struct Failure: Error {}
        let op = OpProbe { _ in throw Failure() }
        try op.start()
        #expect(op.completions.value == 1)
    }

    // G56
    @Test func completionBlockReadsNilOnceItHasStarted() throws {
        let insideRead = OpBox<Bool?>(nil)
        let op = SpindleOperation()
        op.completionBlock = { [unowned op] in insideRead.value = op.completionBlock == nil }
        #expect(op.completionBlock != nil)
        try op.start()
        #expect(insideRead.value == true, "nil while it runs")
        #expect(op.completionBlock == nil, "nil after it ran")
    }

    @Test func completionBlockIsReleasedAfterItRan() throws {
        final class Captured: Sendable {}
        weak var weakCaptured: Captured?
        let op = SpindleOperation()
        do {
            let captured = Captured()
            weakCaptured = captured
            op.completionBlock = { _ = captured }
        }
        #expect(weakCaptured != nil)
        try op.start()
        #expect(weakCaptured == nil, "the block and what it captured are released after it ran")
    }

    // G54 (Spindle): waitUntilFinished returns only after the completion block returned.
    @Test func waitReturnsOnlyAfterTheCompletionBlockReturned() throws {
        let completionEntered = opSemaphore()
        let gate = opSemaphore()
        let completionReturned = OpFlag()
        let op = SpindleOperation()
        op.completionBlock = {
            completionEntered.signal()
            _ = gate.wait(timeout: opDeadline)
            completionReturned.set()
        }
        let sawReturned = OpBox<Bool?>(nil)
        let waiter = try OpThread.run {
            try? op.waitUntilFinished()
            sawReturned.value = completionReturned.isSet
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(completionEntered.wait(timeout: opDeadline))
        #expect(op.isFinished, "the completion block runs after the operation is finished")
        let clock = ContinuousClock()
        let began = clock.now
        #expect(try op.waitUntilFinished(timeout: .milliseconds(100)) == false, "the completion block is still running")
        #expect(clock.now - began >= .milliseconds(100))
        gate.signal()
        try op.waitUntilFinished()
        #expect(completionReturned.isSet)
        #expect(waiter.finish())
        #expect(runner.finish())
        #expect(sawReturned.value == true, "the other waiter was released after the completion block returned")
    }

    // I63
    @Test func waitOnAFinishedOperationReturnsAtOnce() throws {
        let op = SpindleOperation()
        try op.start()
        try op.waitUntilFinished()
        #expect(try op.waitUntilFinished(timeout: .zero))
        #expect(try op.waitUntilFinished(timeout: .seconds(-1)))
        #expect(try op.waitUntilFinished(timeout: .seconds(Int64.max)))
        #expect(try op.waitUntilFinished(until: .distantFuture))
    }

    @Test func severalWaitersAreAllReleased() throws {
        let waiters = 6
        let gate = opSemaphore()
        let entered = opSemaphore()
        let op = OpProbe { _ in
            entered.signal()
            _ = gate.wait(timeout: opDeadline)
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(entered.wait(timeout: opDeadline))
        let sawFinished = OpCounter()
        let threads = try (0..<waiters).map { i in
            try OpThread.run("op-waiter-\(i)") {
                try? op.waitUntilFinished()
                if op.isFinished { sawFinished.increment() }
            }
        }
        #expect(sawFinished.value == 0)
        gate.signal()
        for thread in threads { #expect(thread.finish()) }
        #expect(runner.finish())
        #expect(sawFinished.value == waiters)
    }

    // I64
    @Test func neverStartedOperationTimesOut() throws {
        let op = SpindleOperation()
        let clock = ContinuousClock()
        let began = clock.now
        #expect(try op.waitUntilFinished(timeout: .milliseconds(50)) == false)
        #expect(clock.now - began >= .milliseconds(50))
        #expect(!op.isFinished)
        try op.start()
        #expect(try op.waitUntilFinished(timeout: .milliseconds(50)))
    }

    @Test func zeroAndNegativeTimeoutsPoll() throws {
        let op = SpindleOperation()
        let results = OpLog<Bool>()
        let poller = try OpThread.run {
            for timeout: Duration in [.zero, .nanoseconds(-1), .seconds(-10), .seconds(Int64.min)] {
                results.add((try? op.waitUntilFinished(timeout: timeout)) ?? true)
            }
            results.add((try? op.waitUntilFinished(until: SpindleDeadline(uptimeNanoseconds: 0))) ?? true)
        }
        #expect(poller.finish(), "polling waits return without blocking")
        #expect(results.all == [false, false, false, false, false])
    }

    @Test func timedOutWaitersDoNotDisturbTheFinish() throws {
        let op = SpindleOperation()
        for _ in 0..<20 { #expect(try op.waitUntilFinished(timeout: .zero) == false) }
        try op.start()
        #expect(try op.waitUntilFinished(timeout: .zero))
    }

    // I65 / Part 1 item 3
    @Test func waitingOnItselfFromMainThrows() throws {
        let untimed = OpBox<String?>("unset")
        let timed = OpBox<String?>("unset")
        let op = OpProbe(name: "selfish") { op in
            untimed.value = opErrorCase { try op.waitUntilFinished() }
            timed.value = opErrorCase { _ = try op.waitUntilFinished(timeout: opDeadline) }
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(runner.finish(), "no deadlock")
        #expect(untimed.value == "waitOnSelf")
        #expect(timed.value == "waitOnSelf")
        #expect(op.isFinished)
    }

    @Test func waitingOnItselfFromAConcurrentMainThrows() throws {
        let op = SelfWaitingConcurrentOperation()
        try op.start()
        #expect(try op.waitUntilFinished(timeout: opDeadline))
        #expect(op.outcome.value == "waitOnSelf")
    }

    @Test func waitingOnAnotherOperationFromMainWorks() throws {
        let other = SpindleOperation()
        let outcome = OpBox<Bool?>(nil)
        let op = OpProbe { _ in
            try other.start()
            outcome.value = try other.waitUntilFinished(timeout: opDeadline)
        }
        try op.start()
        #expect(outcome.value == true)
        #expect(op.error == nil)
    }

    // Part 1 items 3 and 4 together: since waits include the completion block, a completion block waiting for its
    // own operation would wait for itself. It must be detected (or return), never deadlock.
    @Test func waitingOnItselfFromTheCompletionBlockDoesNotDeadlock() throws {
        let op = SpindleOperation()
        let outcome = OpBox<String?>("unset")
        op.completionBlock = { [unowned op] in
            outcome.value = opErrorCase { try op.waitUntilFinished() }
        }
        let runner = try OpThread.run { try? op.start() }
        #expect(runner.finish(), "the completion block waiting on its own operation deadlocked")
        #expect(outcome.value == nil || outcome.value == "waitOnSelf")
    }
}
