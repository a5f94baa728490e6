/// An operation whose work is async: override `asyncMain()` (or pass a closure to `init(_:)`). It finishes when
/// that async body returns (with the error it threw, if any, in `error`); `cancel()` also cancels the task that
/// runs the body, so `Task.isCancelled`, `Task.checkCancellation()` and cancellable awaits inside it see it.
///
/// How it runs without holding a thread: it is an asynchronous operation (`isAsynchronous` is true). `start()`
/// moves it to executing and creates a detached `Task` for the body, then returns at once, so the queue's worker
/// thread goes back to the pool immediately. The body runs on Swift's global concurrent executor only while it
/// has something to do; while it is suspended no thread at all is held for it. In a queue it keeps its
/// concurrency slot until the body returns, like any asynchronous operation, so `maxConcurrentOperationCount`
/// bounds how many async bodies are in flight. Do not block inside the body: hand blocking work to
/// `SpindleOperationQueue.run`.
///
/// `SpindleAsyncOperation.currentInTask` is this operation inside its body (a task-local, inherited by child tasks).
/// Its synchronous `main()` is never called.
///
/// Guards: `task` is under `taskLock` (an `InlineLock`, a leaf, never held across user code); `body` is immutable.
/// State machine: the operation's own (idle → [enqueued → dispatching →] executing → finishing → finished); the
/// task exists from `start()` on. `cancel()` before `start()` finishes it unrun (no task is created); `cancel()`
/// after `start()` cancels the task: both orders are covered because `start` checks `isCancelled` under
/// `taskLock` after storing the task, and `cancel` reads the task under `taskLock` after setting the bit.
///
/// Threading: `start()` and `cancel()` from any thread; the body on the global concurrent executor.
open class SpindleAsyncOperation: SpindleOperation, @unchecked Sendable {
    @TaskLocal static var running: SpindleAsyncOperation? = nil

    private let body: (@Sendable () async throws -> Void)?
    private let taskLock = InlineLock()
    private var task: Task<Void, Never>? = nil  // protected by taskLock

    /// An operation whose body is `asyncMain()` (override it).
    public override init() {
        self.body = nil
        super.init()
    }

    /// An operation whose body is `body`.
    public init(_ body: @escaping @Sendable () async throws -> Void) {
        self.body = body
        super.init()
    }

    /// True: its work ends after `start()` returns.
    open override var isAsynchronous: Bool { true }

    /// The async work. Override it, or pass a closure to `init(_:)`; the default runs that closure. Errors thrown
    /// are kept in `error`; the operation finishes when it returns. Runs on the global concurrent executor.
    open func asyncMain() async throws {
        try await self.body?()
    }

    /// The operation whose async body is running in the calling task (or one of its child tasks), if any.
    /// (`SpindleOperation.current` is the operation whose synchronous `main` runs on the calling thread.)
    public static var currentInTask: SpindleAsyncOperation? { running }

    /// Moves into `executing` and starts the task that runs the body; returns at once. A cancelled operation
    /// finishes unrun. Any thread.
    /// - Throws: as `SpindleOperation.start()`.
    open override func start() throws {
        guard try self.beginExecuting() else { return }
        let task = Task.detached { [self] in
            await SpindleAsyncOperation.$running.withValue(self) {
                var failure: (any Error)? = nil
                do { try await self.asyncMain() } catch { failure = error }
                try? self.finish(throwing: failure)  // only this task reports the end
            }
        }
        self.taskLock.lock()
        self.task = task
        let cancelled = self.isCancelled
        self.taskLock.unlock()
        if cancelled { task.cancel() }
    }

    /// Cancels the operation (as `SpindleOperation.cancel()`) and the task running its body, if it started.
    open override func cancel() {
        super.cancel()
        self.taskLock.lock()
        let task = self.task
        self.taskLock.unlock()
        task?.cancel()
    }
}
