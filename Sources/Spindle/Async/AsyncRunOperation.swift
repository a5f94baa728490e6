/// The operation behind `SpindleOperationQueue.run`: runs a blocking body on a queue thread and hands its outcome
/// to the one task awaiting it.
///
/// Guards: `phase`, `continuation`, `outcome` and `cancelRequested` are under `runLock` (an `InlineLock`; never
/// held across user code or a resume). `body` is immutable. Lock order: `runLock` is a leaf; `cancel()` (the
/// operation's own locks) is called after releasing it.
///
/// State machine (`phase`), forward only:
/// - `created` → `waiting` (`install`: the task's continuation is stored, then the operation is added);
///   `created` → stays (`awaitingTaskCancelled` before `install`: sets `cancelRequested`; `install` then resumes
///   with `CancellationError` and the operation is never added);
/// - `waiting` → `running` (`main` starts the body);
/// - `waiting` → `abandoned` (the task was cancelled before the body started: resumed with `CancellationError` at
///   once and the operation cancelled; `main`, if a worker still calls it, returns without running the body);
/// - `running` → `done` and `waiting` → `done` (the operation settled, in `didSettle`: after its queue's
///   bookkeeping, so `run` returns once the operation no longer counts in the queue; resumed with the outcome, or
///   `CancellationError` if the operation was cancelled; or, should `start` ever throw, there with that error);
/// - `waiting` → `done` (`notAdded`: the queue refused the operation, a full queue whose policy refuses or a
///   forked child's queue from the parent: resumed with that error; the operation never runs).
/// The continuation is resumed exactly once: by `install` (pre-cancelled), `awaitingTaskCancelled` (abandoned),
/// `notAdded`, `didSettle` or a throwing `start` (done), each after taking it out under `runLock`. `install` sets
/// `hasWaiters` before the operation is added, so its settling calls `didSettle`.
final class AsyncRunOperation<Result: Sendable>: SpindleOperation, @unchecked Sendable {
    enum Phase { case created, waiting, running, abandoned, done }

    private let body: @Sendable () throws -> Result
    private let runLock = InlineLock()
    private var phase = Phase.created  // protected by runLock
    private var continuation: UnsafeContinuation<Result, any Error>? = nil  // protected by runLock
    private var outcome: Swift.Result<Result, any Error>? = nil  // protected by runLock
    private var cancelRequested = false  // protected by runLock

    init(_ body: @escaping @Sendable () throws -> Result) {
        self.body = body
        super.init()
    }

    /// Stores the awaiting task's continuation; returns whether the operation should now be added (false: the
    /// task was cancelled first and the continuation has been resumed with `CancellationError`).
    func install(_ continuation: UnsafeContinuation<Result, any Error>) -> Bool {
        self.runLock.lock()
        if self.cancelRequested {
            self.runLock.unlock()
            continuation.resume(throwing: CancellationError())
            return false
        }
        self.continuation = continuation
        self.phase = .waiting
        self.runLock.unlock()
        self.hasWaiters.store(true, ordering: .sequentiallyConsistent)  // so its settling calls `didSettle`
        return true
    }

    /// The queue refused to add the operation: the awaiting task gets `error` (unless its cancellation got there
    /// first).
    func notAdded(_ error: any Error) {
        self.runLock.lock()
        guard self.phase == .waiting else {
            self.runLock.unlock()
            return
        }
        self.phase = .done
        let continuation = self.continuation
        self.continuation = nil
        self.runLock.unlock()
        continuation?.resume(throwing: error)
    }

    /// The awaiting task was cancelled (its cancellation handler, any thread).
    func awaitingTaskCancelled() {
        self.runLock.lock()
        self.cancelRequested = true
        switch self.phase {
        case .created, .abandoned, .done:
            self.runLock.unlock()
        case .waiting:
            self.phase = .abandoned
            let continuation = self.continuation
            self.continuation = nil
            self.runLock.unlock()
            self.cancel()
            continuation?.resume(throwing: CancellationError())
        case .running:
            self.runLock.unlock()
            self.cancel()
        }
    }

    override func main() throws {
        self.runLock.lock()
        guard self.phase == .waiting else {  // abandoned: the caller has gone, the body must not run
            self.runLock.unlock()
            return
        }
        self.phase = .running
        self.runLock.unlock()
        let outcome: Swift.Result<Result, any Error>
        do { outcome = .success(try self.body()) } catch { outcome = .failure(error) }
        self.runLock.lock()
        self.outcome = outcome
        self.runLock.unlock()
    }

    /// Runs as any operation does; the task is resumed when it settles (`didSettle`). A queue never makes this
    /// throw (the operation is private to `run`); if it did, the task is resumed here with that error.
    override func start() throws {
        do {
            try super.start()
        } catch {
            self.finishRun(throwing: error)
            throw error
        }
    }

    /// Finished, completion block and queue bookkeeping done: resumes the task with the outcome.
    override func didSettle() { self.finishRun(throwing: nil) }

    /// `waiting`/`running` → `done`: resumes the task with `error`, or else the outcome (`CancellationError` if the
    /// operation was cancelled or the body never ran). Does nothing in any other phase.
    private func finishRun(throwing error: (any Error)?) {
        self.runLock.lock()
        guard self.phase == .waiting || self.phase == .running else {
            self.runLock.unlock()
            return
        }
        self.phase = .done
        let continuation = self.continuation
        self.continuation = nil
        let outcome = self.outcome
        self.outcome = nil
        self.runLock.unlock()
        if let error {
            continuation?.resume(throwing: error)
        } else if self.isCancelled || outcome == nil {
            continuation?.resume(throwing: CancellationError())
        } else if let outcome {
            continuation?.resume(with: outcome)
        }
    }
}
