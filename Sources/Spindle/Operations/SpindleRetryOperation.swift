/// An operation that runs attempts, each a fresh operation made by a factory, until one succeeds: at most
/// `maxAttempts`, with a backoff between them (the retry of ProcedureKit and PSOperations).
///
/// ```swift
/// let fetch = try SpindleRetryOperation(maxAttempts: 4, backoff: .exponential(first: .milliseconds(100))) { attempt in
///     SpindleInvocationOperation { try download(url) }
/// }
/// fetch.cancel(after: .seconds(10))     // the deadline stops the retries too
/// try queue.addOperation(fetch)
/// ```
///
/// Attempts run inside this operation, one after another, on the thread that runs it: each is started with
/// `start()` (a synchronous attempt runs there; an asynchronous one, such as a `SpindleConcurrentOperation`, is
/// waited for). So a queue counts the whole retry as one operation of its width (a width-1 queue cannot deadlock
/// on it), and the backoff is a timed wait of that thread which `cancel()` ends at once.
///
/// An attempt succeeds when it finishes with no error and not cancelled. It fails with its `error`; with
/// `SpindleError.attemptCancelled` if it ended cancelled on its own (its own deadline, say); with what the factory
/// threw; or with the `SpindleError` its `start()` threw (an attempt that is not ready, belongs to a queue, or has
/// conditions or exclusivity categories: `gatedOperationNeedsQueue`; put those on the retry itself), or
/// `operationFinished` (an attempt that had already finished: the factory must make a new one each time).
/// After a success this operation finishes with no error (`succeededAttempt` holds the attempt, to read its
/// result); after `maxAttempts` failures, with the last attempt's error (all of them in `attemptErrors`).
/// Cancelling it (or its deadline) cancels the running attempt, ends a backoff at once and starts no more
/// attempts; it then finishes cancelled, with the last failed attempt's error if there was one.
///
/// Guards: `current`, `made`, `errors` and `succeeded` are under `condition`'s mutex, which the backoff waits on.
/// State machine (`main`, on the thread running it): attempting(n) → succeeded (finish, no error) |
/// backingOff(n) → attempting(n + 1) | exhausted (n = `maxAttempts`: finish with the last error) | stopped
/// (cancelled: between attempts, or as soon as the backoff wakes). `cancel()`, any thread: marks it cancelled,
/// then, under the mutex, takes `current` and wakes the backoff; it cancels `current` after unlocking (an attempt's
/// `cancel()` may be user code).
public final class SpindleRetryOperation: SpindleOperation, @unchecked Sendable {
    /// The most attempts it makes (at least 1).
    public let maxAttempts: Int
    /// The wait before each attempt after the first.
    public let backoff: Backoff
    private let makeAttempt: @Sendable (_ attempt: Int) throws -> SpindleOperation
    private let condition = SpindleCondition()
    private var current: SpindleOperation? = nil
    private var made = 0
    private var errors: [any Error] = []
    private var succeeded: SpindleOperation? = nil

    /// Retries `makeAttempt(n)` (n = 1, 2, …) until an attempt succeeds, at most `maxAttempts` times, waiting
    /// `backoff` between attempts. The factory is called on the thread that runs this operation, once per attempt,
    /// and must return a new operation each time (not in a queue, no unfinished dependency).
    ///
    /// - Throws: `invalidAttemptCount` if `maxAttempts` is below 1. Nothing is made then.
    public init(maxAttempts: Int, backoff: Backoff = .exponential(first: .milliseconds(100)),
                makeAttempt: @escaping @Sendable (_ attempt: Int) throws -> SpindleOperation) throws(SpindleError) {
        guard maxAttempts >= 1 else { throw .invalidAttemptCount(maxAttempts) }
        self.maxAttempts = maxAttempts
        self.backoff = backoff
        self.makeAttempt = makeAttempt
        super.init()
    }

    /// Attempts started so far (0 before it runs). Any thread.
    public var attemptsMade: Int { self.condition.withLock { self.made } }

    /// The errors of the failed attempts, in order. Any thread.
    public var attemptErrors: [any Error] { self.condition.withLock { self.errors } }

    /// The attempt that succeeded (nil until one did): read its result from it. Any thread.
    public var succeededAttempt: SpindleOperation? { self.condition.withLock { self.succeeded } }

    /// Runs the attempts (see the type's notes); not to be called directly.
    /// - Throws: the last failed attempt's error, when none succeeded.
    public override func main() throws {
        for attempt in 1...self.maxAttempts {
            if attempt > 1 && !self.waitOutBackoff(before: attempt) { break }
            if self.isCancelled { break }
            if self.run(attempt: attempt) { return }
        }
        if let last = self.attemptErrors.last { throw last }
    }

    /// Marks it cancelled, cancels the running attempt and ends a backoff at once. Any thread.
    public override func cancel() {
        super.cancel()
        let running = self.condition.withLock { self.current }
        self.condition.broadcast()
        running?.cancel()  // outside our lock: an attempt's cancel() may be user code
    }

    /// Waits the backoff before `attempt`; false if cancelled meanwhile (or already).
    private func waitOutBackoff(before attempt: Int) -> Bool {
        let deadline = SpindleDeadline.after(self.backoff.delay(beforeAttempt: attempt))
        return ThreadContext.current.blocking {  // on a pool thread, another may serve meanwhile
            self.condition.withLock {
                _ = self.condition.wait(until: deadline) { !self.isCancelled }
                return !self.isCancelled
            }
        }
    }

    /// Makes and runs one attempt; true if it succeeded. A failure is recorded in `errors`, except an attempt
    /// cancelled because this operation was.
    private func run(attempt: Int) -> Bool {
        let operation: SpindleOperation
        do {
            operation = try self.makeAttempt(attempt)
        } catch {
            self.condition.withLock {
                self.made = attempt
                self.errors.append(error)
            }
            return false
        }
        let cancelledAlready = self.condition.withLock { () -> Bool in
            self.made = attempt
            self.current = operation
            return self.isCancelled
        }
        if cancelledAlready { operation.cancel() }
        var failure: (any Error)? = nil
        do {
            // start() on a finished operation does nothing: it must not pass for a success.
            if operation.isFinished { throw SpindleError.operationFinished(name: operation.displayName) }
            try operation.start()
            if !operation.isFinished { try operation.waitUntilFinished() }  // an asynchronous attempt
            if let error = operation.error {
                failure = error  // even if it was cancelled too: it failed
            } else if operation.isCancelled && !self.isCancelled {
                failure = SpindleError.attemptCancelled(name: self.displayName, attempt: attempt)
            }
        } catch {
            failure = error
        }
        return self.condition.withLock {
            self.current = nil
            if let failure {
                self.errors.append(failure)
                return false
            }
            if operation.isCancelled { return false }  // cancelled with this operation: no success, no error
            self.succeeded = operation
            return true
        }
    }
}
