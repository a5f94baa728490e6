import Testing

@testable import Spindle

/// `SpindleRetryOperation`: attempts until one succeeds, the last error when none does, the backoff, and what
/// cancellation and deadlines stop.
@Suite struct RetryOperationTests {
    struct Failure: Error, Equatable { let attempt: Int }

    /// An attempt that fails (throws `Failure(attempt)`) unless `attempt` is `succeedsOn`; returns `attempt`.
    private static func attempt(_ attempt: Int, succeedsOn: Int) -> SpindleInvocationOperation<Int> {
        SpindleInvocationOperation {
            if attempt != succeedsOn { throw Failure(attempt: attempt) }
            return attempt
        }
    }

    private static func failures(_ errors: [any Error]) -> [Int] { errors.map { ($0 as? Failure)?.attempt ?? -1 } }

    @Test func itRetriesUntilAnAttemptSucceedsOnAWidthOneQueue() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let retry = try SpindleRetryOperation(maxAttempts: 5, backoff: .immediately) { n in
            Self.attempt(n, succeedsOn: 3)
        }
        try queue.addOperation(retry)
        #expect(try retry.waitUntilFinished(until: .after(.seconds(10))), "a width-1 queue did not run the retry")
        #expect(retry.attemptsMade == 3 && retry.error == nil && !retry.hasFailed && !retry.isCancelled)
        #expect(Self.failures(retry.attemptErrors) == [1, 2])
        let winner = try #require(retry.succeededAttempt as? SpindleInvocationOperation<Int>)
        #expect(try winner.result() == 3)
    }

    @Test func itFinishesWithTheLastErrorWhenEveryAttemptFails() throws {
        let retry = try SpindleRetryOperation(maxAttempts: 3, backoff: .immediately) { n in
            Self.attempt(n, succeedsOn: 0)
        }
        try retry.start()
        #expect(retry.isFinished && retry.hasFailed && retry.attemptsMade == 3 && retry.succeededAttempt == nil)
        #expect((retry.error as? Failure) == Failure(attempt: 3))
        #expect(Self.failures(retry.attemptErrors) == [1, 2, 3])
    }

    @Test func aFactoryThatThrowsAndAnAttemptThatCannotStartCountAsFailedAttempts() throws {
        let finished = SpindleBlockOperation {}
        try finished.start()
        let blocked = SpindleBlockOperation {}
        try blocked.addDependency(SpindleBlockOperation {})  // never finishes: not ready
        let retry = try SpindleRetryOperation(maxAttempts: 4, backoff: .immediately) { n in
            switch n {
            case 1: throw Failure(attempt: 1)
            case 2: return finished  // already finished: must not pass for a success
            case 3: return blocked
            default: return Self.attempt(n, succeedsOn: n)
            }
        }
        try retry.start()
        #expect(retry.attemptsMade == 4 && retry.error == nil)
        let errors = retry.attemptErrors
        #expect(errors.count == 3)
        #expect((errors[0] as? Failure) == Failure(attempt: 1))
        #expect((errors[1] as? SpindleError).map { "\($0)" } == "\(SpindleError.operationFinished(name: finished.displayName))")
        #expect((errors[2] as? SpindleError).map { "\($0)" } == "\(SpindleError.operationNotReady(name: blocked.displayName))")
    }

    @Test func anAttemptCancelledOnItsOwnIsRetried() throws {
        let retry = try SpindleRetryOperation(maxAttempts: 2, backoff: .immediately) { n in
            let attempt = Self.attempt(n, succeedsOn: 2)
            if n == 1 { attempt.cancel() }  // as its own deadline would
            return attempt
        }
        try retry.start()
        #expect(retry.attemptsMade == 2 && retry.error == nil)
        #expect(retry.attemptErrors.map { "\($0)" }
            == ["\(SpindleError.attemptCancelled(name: retry.displayName, attempt: 1))"])
    }

    @Test func anAsynchronousAttemptIsWaitedFor() throws {
        final class Attempt: SpindleConcurrentOperation, @unchecked Sendable {
            let fails: Bool
            init(fails: Bool) { self.fails = fails }
            override func main() throws {
                if self.fails { throw Failure(attempt: 1) }  // finished with the error by its thread
                try self.finish()  // its work is done (an asynchronous operation reports its own end)
            }
        }
        let retry = try SpindleRetryOperation(maxAttempts: 2, backoff: .immediately) { n in Attempt(fails: n == 1) }
        try retry.start()
        #expect(retry.attemptsMade == 2 && retry.error == nil && retry.succeededAttempt?.isFinished == true)
    }

    @Test func cancellingDuringTheBackoffEndsItAtOnceAndStartsNoMoreAttempts() throws {
        let queue = SpindleOperationQueue()
        let firstFailed = OracleSemaphore()
        let retry = try SpindleRetryOperation(maxAttempts: 3, backoff: .constant(.seconds(600))) { n in
            Failing(Failure(attempt: n), then: firstFailed)
        }
        try queue.addOperation(retry)
        #expect(firstFailed.wait())
        // The retry is now in (or about to enter) its 600 s backoff.
        retry.cancel()
        #expect(try retry.waitUntilFinished(until: .after(.seconds(10))), "cancel did not end the backoff")
        #expect(retry.isCancelled && retry.attemptsMade == 1)
        #expect((retry.error as? Failure) == Failure(attempt: 1))
    }

    @Test func cancellingDuringAnAttemptCancelsThatAttemptAndRecordsNoError() throws {
        let queue = SpindleOperationQueue()
        let started = OracleSemaphore()
        let retry = try SpindleRetryOperation(maxAttempts: 3, backoff: .immediately) { _ in
            RunsUntilCancelled(started)
        }
        try queue.addOperation(retry)
        #expect(started.wait())
        retry.cancel()
        #expect(try retry.waitUntilFinished(until: .after(.seconds(60))))
        #expect(retry.isCancelled && retry.attemptsMade == 1 && retry.attemptErrors.isEmpty && retry.error == nil)
    }

    @Test func aDeadlineStopsTheRetries() throws {
        let queue = SpindleOperationQueue()
        let retry = try SpindleRetryOperation(maxAttempts: 100, backoff: .constant(.seconds(600))) { n in
            Self.attempt(n, succeedsOn: 0)
        }
        retry.cancel(after: .milliseconds(20))
        try queue.addOperation(retry)
        #expect(try retry.waitUntilFinished(until: .after(.seconds(10))), "the deadline did not end the backoff")
        #expect(retry.deadlineExpired && retry.attemptsMade <= 1)
    }

    @Test func fewerThanOneAttemptIsRefused() {
        expectSpindleError(.invalidAttemptCount(0)) {
            _ = try SpindleRetryOperation(maxAttempts: 0) { _ in SpindleBlockOperation {} }
        }
    }

    @Test func theBackoffDoublesUpToItsMaximumAndClampsBadValues() {
        let exponential = SpindleRetryOperation.Backoff.exponential(first: .milliseconds(100), maximum: .seconds(1))
        #expect((1...7).map { exponential.delay(beforeAttempt: $0) } == [
            .zero, .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1),
            .seconds(1),
        ])
        #expect(SpindleRetryOperation.Backoff.constant(.seconds(2)).delay(beforeAttempt: 9) == .seconds(2))
        #expect(SpindleRetryOperation.Backoff.immediately.delay(beforeAttempt: 5) == .zero)
        let clamped = SpindleRetryOperation.Backoff(first: .seconds(-1), multiplier: 0.5, maximum: .seconds(-3))
        #expect(clamped == .immediately)
        #expect("\(exponential)" == "exponential from 0.1 seconds ×2.0 up to 1.0 seconds")
    }

    /// Durations past `Int64` nanoseconds, attempt numbers in the billions and infinite multipliers neither trap nor
    /// loop: the wait reaches `maximum` and stays there.
    @Test func theBackoffHandlesHugeDurationsAttemptsAndMultipliers() {
        let huge = SpindleRetryOperation.Backoff.exponential(first: .seconds(1), maximum: .seconds(Int64.max))
        #expect(huge.delay(beforeAttempt: 36) == .seconds(1 << 34))  // 17,179,869,184 s: over Int64.max ns
        #expect(huge.delay(beforeAttempt: 200) == .seconds(Int64.max))
        #expect(huge.delay(beforeAttempt: .max) == .seconds(Int64.max))
        let long = SpindleRetryOperation.Backoff.constant(.seconds(10_000_000_000))
        #expect(long.delay(beforeAttempt: .max) == .seconds(10_000_000_000))
        let barely = SpindleRetryOperation.Backoff(first: .seconds(1), multiplier: 1.000_000_000_000_000_2,
                                                   maximum: .seconds(2))
        #expect(barely.delay(beforeAttempt: .max) == .seconds(2))
        let infinite = SpindleRetryOperation.Backoff(first: .milliseconds(5), multiplier: .infinity,
                                                     maximum: .seconds(3))
        #expect([2, 3, 1_000].map { infinite.delay(beforeAttempt: $0) } == [.milliseconds(5), .seconds(3), .seconds(3)])
        let fromZero = SpindleRetryOperation.Backoff(first: .zero, multiplier: .infinity, maximum: .seconds(3))
        #expect(fromZero.delay(beforeAttempt: 7) == .zero)
    }
}

/// An operation whose `main` posts `signal`, then throws `error` (so it fails).
private final class Failing: SpindleOperation, @unchecked Sendable {
    let failure: any Error
    let signal: OracleSemaphore

    init(_ failure: any Error, then signal: OracleSemaphore) {
        self.failure = failure
        self.signal = signal
    }

    override func main() throws {
        self.signal.post()
        throw self.failure
    }
}

/// An operation whose `main` posts `started`, then waits until it is cancelled (at most 30 s).
private final class RunsUntilCancelled: SpindleOperation, @unchecked Sendable {
    let started: OracleSemaphore
    private let cancelled = OracleSemaphore()

    init(_ started: OracleSemaphore) { self.started = started }

    override func main() throws {
        self.started.post()
        _ = self.cancelled.wait(seconds: 30)
    }

    override func cancel() {
        super.cancel()
        self.cancelled.post()
    }
}
