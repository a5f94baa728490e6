/// What `addOperation` / `addOperations` do when a bounded queue (`SpindleOperationQueue.capacity`) has no room.
/// The timed forms (`addOperation(_:until:)`, …) and the async forms (`addOperationWhenRoom`, …) always wait for
/// room, whatever the policy.
public enum SpindleFullQueuePolicy: Sendable, Equatable, CustomStringConvertible {
    /// Block the adding thread until there is room (producers are served first in, first out). From one of the
    /// queue's own operations, where waiting might wait for its own slot, or from one of its workers outside any
    /// operation (a deinit it runs), the add throws `waitOnOwnQueue` instead.
    case block
    /// Throw `SpindleError.queueFull` at once; nothing is added.
    case reject
    /// Run the operation on the adding thread instead (as if started by hand, after waiting for its dependencies);
    /// it never becomes a member of the queue. The add returns once it has finished (a concurrent operation: once
    /// its `start()` returned). The add throws `queueFull` instead when that could never end or might not: an
    /// operation of the add waits for a later operation of its batch, or has an unfinished dependency while the
    /// adding thread runs an operation (its `main` or completion block, or an async operation's body that has not
    /// finished, which may hold the slot or the group the dependency needs); or an operation of the add has
    /// conditions or exclusivity categories (only a queue runs those); or a barrier is pending in the queue (what
    /// is added now may start only after it has run).
    case callerRuns

    /// "block", "reject" or "callerRuns". Any thread; throws nothing.
    public var description: String {
        switch self {
        case .block: return "block"
        case .reject: return "reject"
        case .callerRuns: return "callerRuns"
        }
    }
}
