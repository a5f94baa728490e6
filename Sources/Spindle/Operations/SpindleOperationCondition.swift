/// A condition an operation must meet before it runs (the `OperationCondition` of Apple's "Advanced NSOperations"
/// sample, WWDC 2015): attached with `SpindleOperation.addCondition(_:)`, it can produce an operation that must run
/// first, and it decides, once the operation's dependencies are done, whether the operation may run.
///
/// ```swift
/// struct LoggedIn: SpindleOperationCondition {
///     let session: Session
///     func dependency(for operation: SpindleOperation) -> SpindleOperation? {
///         session.isLoggedIn ? nil : LoginOperation(session)    // runs first, on the same queue
///     }
///     func evaluate(for operation: SpindleOperation) -> SpindleConditionResult {
///         session.isLoggedIn ? .satisfied : .failed(NotLoggedIn())
///     }
/// }
/// try upload.addCondition(LoggedIn(session: session))
/// ```
///
/// When it is called (only for an operation added to a queue; see `SpindleOperation.addCondition`):
/// - `dependency(for:)`: once, on the thread that adds the operation to its queue, during the add: once the queue
///   has taken the operation, before it is in the queue. A returned operation becomes a dependency of it and, if
///   it is in no queue yet, is added to the same queue first (as any add: a full bounded queue applies its
///   policy). If that fails (a cycle, a queue shut down or full), the operation finishes unrun with
///   `SpindleError.conditionFailed` carrying the reason. If the operation's own add then fails, the produced
///   dependencies are taken off it again (one the queue already accepted stays there and runs); a later add asks
///   again. A returned operation that has conditions of its own gets them asked in turn.
/// - `evaluate(for:)`: once, when the operation's dependencies (those produced included) have finished and it holds
///   its exclusivity categories, on the thread that got it there (the adding thread, or the one that finished its
///   last dependency or released the category it waited for: a holder's worker, the thread calling `cancel()`,
///   `cancelAllOperations` or `shutdown(.cancel)` on a holder or an earlier waiter, or the process's deadline
///   thread when a deadline cancelled one). Not called for a cancelled operation.
///
/// Both are called outside every lock of Spindle, but on a thread that is someone else's (another operation's, a
/// caller of `cancel()`, the deadline thread): keep them short and never block in them. Timed and async adds to a
/// bounded queue add a produced dependency with the queue's own full-queue policy (`.block` waits without the
/// caller's deadline). Conditions of one operation are asked in the order they were added; the first that fails
/// decides, and the rest are not evaluated.
public protocol SpindleOperationCondition: Sendable {
    /// The condition's name, for errors (default: the type's name). When `isMutuallyExclusive` is true it is also
    /// the exclusivity category the condition puts the operation in.
    var name: String { get }

    /// Whether an operation with this condition is mutually exclusive with every other operation whose category
    /// `name` is (the sample's `isMutuallyExclusive`): at most one of them runs at a time, across all queues.
    /// Default false. Read once, when the condition is added.
    var isMutuallyExclusive: Bool { get }

    /// An operation that must finish before `operation` is evaluated (the sample's `dependencyForOperation`), or
    /// nil (the default). Called once, on the adding thread, while `operation` is being added to its queue.
    func dependency(for operation: SpindleOperation) -> SpindleOperation?

    /// Whether `operation` may run: `.satisfied`, or `.failed(error)` to finish it unrun with
    /// `SpindleError.conditionFailed` carrying `error` (the sample's `evaluateForOperation`, synchronous here).
    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult
}

extension SpindleOperationCondition {
    /// The type's name (`String(describing: Self.self)`). Any thread; throws nothing.
    public var name: String { String(describing: Self.self) }

    /// False: not mutually exclusive. Any thread; throws nothing.
    public var isMutuallyExclusive: Bool { false }

    /// Nil: no dependency to run first. Any thread; throws nothing.
    public func dependency(for operation: SpindleOperation) -> SpindleOperation? { nil }
}
