import Spindle

/// One request's work as a Spindle operation: a deadline armed by `SpindleOperation.cancel(at:)`, an outcome
/// handed to the awaiting task through an `OutcomeLatch`.
///
/// Who resolves the latch, first one wins:
/// - `cancel()` (this override), when the cancellation is the deadline's (`deadlineExpired`): at once, from the
///   deadline timer's thread, whether `main` is running, has not started (the queue then finishes it without
///   running `main` when it reaches it) or is about to finish;
/// - `abandon()`, when the awaiting task was cancelled: it resolves, then cancels the operation;
/// - `start()` (this override), after the operation finished and the queue has counted it out: `main`'s outcome,
///   or, if `main` never ran or stopped early, the reason it was cancelled.
///
/// Guards: `outcome` is written by `main` and read by `start` on the worker thread that runs the operation, in
/// that order (`main` runs inside `super.start()`); nothing else touches it. The latch has its own lock.
final class DeadlineJob<Value: Sendable>: SpindleOperation, @unchecked Sendable {
    /// Where the awaiting task gets the outcome.
    let latch = OutcomeLatch<Value>()

    private let work: @Sendable (WorkCancellation) throws -> Value
    private var outcome: WorkOutcome<Value>? = nil  // the worker thread only (see Guards)

    init(_ work: @escaping @Sendable (WorkCancellation) throws -> Value) {
        self.work = work
        super.init()
    }

    override func main() throws {
        // The work asks its operation whether to stop: `SpindleOperation.current` is this operation while `main`
        // runs on this thread.
        let cancellation = WorkCancellation { SpindleOperation.current?.isCancelled ?? true }
        do {
            self.outcome = .completed(try self.work(cancellation))
        } catch is WorkCancelled {
            self.outcome = self.stoppedOutcome
        } catch {
            self.outcome = .failed(error)
        }
    }

    override func start() throws {
        do {
            try super.start()
        } catch {
            // A queue never makes this throw (the operation is private to `execute`); if one did, still answer.
            self.latch.resolve(.failed(error))
            throw error
        }
        // Finished (with or without running `main`), completion run, counted out of the queue: a request answered
        // from here never finds its own operation still taking room.
        self.latch.resolve(self.outcome ?? self.stoppedOutcome)
    }

    override func cancel() {
        super.cancel()
        if self.deadlineExpired { self.latch.resolve(.deadlineExpired) }
    }

    /// The awaiting task was cancelled: answer `.abandoned` (unless an outcome is already there) and stop the work.
    func abandon() {
        if self.latch.resolve(.abandoned) { self.cancel() }
    }

    /// What a cancelled operation that did not complete its work answers.
    private var stoppedOutcome: WorkOutcome<Value> { self.deadlineExpired ? .deadlineExpired : .abandoned }
}
