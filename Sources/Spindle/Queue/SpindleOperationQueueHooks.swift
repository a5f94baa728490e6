/// What a queue tells you about its operations: each one added, started and finished. Set on a queue with
/// `SpindleOperationQueue.hooks`. The replacement for an `OperationQueue` subclass that overrides `addOperation`,
/// and for the "Advanced NSOperations" sample's `OperationQueueDelegate` (`operationQueue(_:willAddOperation:)`,
/// `operationQueue(_:operationDidFinish:withErrors:)`); also the place for per-operation metrics and logs.
///
/// Why a struct of closures and not a delegate protocol held weakly: a queue reads its hooks on every add, start
/// and finish, and a weak reference costs an atomic retain (and a side table) on each of those reads; closures
/// are `Sendable` values, any subset can be set, and nothing has to be a class. Each closure is handed the queue,
/// so it need not capture it (a closure stored in the queue that captured the queue would keep it alive forever).
/// A ported delegate object is a few lines away: `SpindleOperationQueueHooks(willAdd: { [weak delegate] queue, op
/// in delegate?.operationQueue(queue, willAdd: op) }, …)`.
///
/// The events, for one operation, each on the thread where it happens, outside every lock of Spindle's:
/// - `willAdd`: on the adding thread, before the queue looks at the operation (before any check). The operation is
///   still the caller's: the hook may still change it (priority, name, completion block, dependencies, conditions,
///   exclusivity categories), which is what a queue subclass's `addOperation` override did. If the add then fails
///   (it throws, or a block's operation is handed back finished as cancelled), no other hook is told of it.
/// - `didAdd`: on the adding thread, once the add has succeeded: the queue owns the operation, which may already
///   have started, or even finished, on another thread (its `willStart` and `didFinish` may come before this, or
///   at the same time). For a batch, each operation in order once the whole batch is in; before
///   `addOperations(_:waitUntilFinished: true)` waits.
/// - `willStart`: on the thread that will run it, just before the queue calls its `start()` (for an operation with
///   `isAsynchronous`, the work may go on after `start()` returns). Not for an operation cancelled before the queue
///   reached it: it finishes unrun. (A `cancel()` racing the start may land just after this hook; the operation
///   then finishes unrun too, or stops early if it checks `isCancelled`.)
/// - `didFinish`: exactly once for every operation whose add succeeded, however it ended: after `main` returned or
///   threw, after `finish(throwing:)`, and also when it finished unrun (cancelled before it started,
///   `cancelAllOperations()`, `shutdown(.cancel)`, a failed condition: `isCancelled` is then true and
///   `cancellationReason` says why). On the finishing thread, once `isFinished` is true and `error` is final (the
///   third argument; nil for success and for a plain cancel), after the operation's observers were told and before
///   its completion block runs, its dependents become ready, the queue counts it out and its waiters return: when
///   `waitUntilFinished()` or `waitUntilAllOperationsAreFinished()` returns, the hook has returned.
///
/// Every operation whose add succeeded gets `didFinish`; `willAdd` comes before anything else of it; `willStart`
/// comes before `didFinish` (when it comes). Barriers (`addBarrierBlock`, an operation named "barrier") are told as
/// any operation. Dependencies a condition produces join the queue through `addOperation`, so they are told too.
/// With a bounded queue's `.callerRuns` policy, the operations of an add run on the adding thread: `willStart` and
/// `didFinish` come there, before `didAdd`.
///
/// Which hooks: every event reads the queue's hooks once, when it happens. Hooks set while operations are in the
/// queue apply to their later events; an event that read the old hooks just before a set may still be calling
/// them after the setter returned. A queue without hooks pays one atomic load and a test per event.
///
/// Rules for the closures: keep them short (they run on the queue's workers, in the add path and in the finish
/// path, and hold up what comes next); they may call any of Spindle's methods, including adding to this queue. In
/// `didFinish`, waiting for this operation throws `waitOnSelf` and waiting for this queue `waitOnOwnQueue`, as in
/// a completion block; in `willStart` on the queue's own thread, waiting for this queue throws `waitOnOwnQueue`.
/// Don't wait in a hook for other operations of the same queue: that can deadlock a narrow queue, as in `main`.
public struct SpindleOperationQueueHooks: Sendable {
    /// A hook told of one operation of a queue: `(queue, operation)`.
    public typealias OperationHook = @Sendable (SpindleOperationQueue, SpindleOperation) -> Void
    /// The finish hook: `(queue, operation, error)`, `error` being the operation's `error` (nil: success, or a plain
    /// cancel).
    public typealias FinishHook = @Sendable (SpindleOperationQueue, SpindleOperation, (any Error)?) -> Void

    /// Before an add looks at the operation (see the type's notes).
    public var willAdd: OperationHook?
    /// After an add succeeded.
    public var didAdd: OperationHook?
    /// Before the queue calls the operation's `start()`, unless it was cancelled before.
    public var willStart: OperationHook?
    /// Once, after the operation finished, however it ended.
    public var didFinish: FinishHook?

    /// Hooks with the given closures (nil: not told). Any thread.
    public init(willAdd: OperationHook? = nil, didAdd: OperationHook? = nil, willStart: OperationHook? = nil,
                didFinish: FinishHook? = nil) {
        self.willAdd = willAdd
        self.didAdd = didAdd
        self.willStart = willStart
        self.didFinish = didFinish
    }

    /// Whether no closure is set (a queue given these has no hooks, and pays nothing for them).
    public var isEmpty: Bool {
        self.willAdd == nil && self.didAdd == nil && self.willStart == nil && self.didFinish == nil
    }
}
