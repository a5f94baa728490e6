/// Foundation names Spindle does not have, declared unavailable so that the compiler's error says what to use
/// instead (issue 22: a rename-only port used to meet "has no member" errors that lead nowhere). None of them can
/// be called; none shadows a name Spindle has (`isConcurrent`, an overridable member, is in `SpindleOperation`'s
/// declaration itself, since a member declared in an extension cannot be overridden and the override would be
/// refused for that reason instead).

/// Foundation's `QualityOfService`, only so that `op.qualityOfService = .userInitiated` reaches the message of the
/// `qualityOfService` members below instead of failing on `.userInitiated`. Unavailable: Spindle has no
/// quality-of-service classes.
@available(*, unavailable, message: "Spindle has no quality-of-service classes: use queuePriority, an operation's order among its queue's ready ones, and threadPriority, 0...1, the priority of its thread while main runs")
public enum SpindleQualityOfService: Sendable {
    /// `QualityOfService.userInteractive`.
    case userInteractive
    /// `QualityOfService.userInitiated`.
    case userInitiated
    /// `QualityOfService.utility`.
    case utility
    /// `QualityOfService.background`.
    case background
    /// `QualityOfService.default`.
    case `default`
}

extension SpindleOperation {
    /// Foundation's `Operation.qualityOfService`: unavailable.
    @available(*, unavailable, message: "Spindle has no quality-of-service classes: set queuePriority, the operation's order among its queue's ready ones, and threadPriority, 0...1, the priority of its thread while main runs")
    public var qualityOfService: SpindleQualityOfService {
        get { fatalError("unavailable") }
        set {}
    }

    /// NSObject's KVO notification: unavailable, Spindle has no KVO.
    @available(*, unavailable, message: "Spindle has no KVO: in start, call beginExecuting to move to executing; it returns false, having finished the operation, if it was cancelled. End it with finish, once, from any thread. Observers registered with observe are told of both")
    public func willChangeValue(forKey key: String) {}

    /// NSObject's KVO notification: unavailable, Spindle has no KVO.
    @available(*, unavailable, message: "Spindle has no KVO: in start, call beginExecuting to move to executing; it returns false, having finished the operation, if it was cancelled. End it with finish, once, from any thread. Observers registered with observe are told of both")
    public func didChangeValue(forKey key: String) {}
}

extension SpindleOperationQueue {
    /// Foundation's `OperationQueue.underlyingQueue`: unavailable.
    @available(*, unavailable, message: "queues share threads through a SpindleThreadPool: make one and pass it to each queue's initializer as its pool argument")
    public var underlyingQueue: Any? {
        get { fatalError("unavailable") }
        set {}
    }

    /// Foundation's `OperationQueue.qualityOfService`: unavailable.
    @available(*, unavailable, message: "Spindle has no quality-of-service classes: set each operation's queuePriority, its order among the queue's ready ones, and threadPriority, 0...1, the priority of its thread while it runs")
    public var qualityOfService: SpindleQualityOfService {
        get { fatalError("unavailable") }
        set {}
    }
}

extension SpindleThread {
    /// Foundation's `Thread.threadPriority`: unavailable.
    @available(*, unavailable, message: "use priority, 0...1, to read it and setPriority to set it")
    public var threadPriority: Double {
        get { fatalError("unavailable") }
        set {}
    }

    /// Foundation's `Thread.setThreadPriority(_:)` (the calling thread's): unavailable.
    @available(*, unavailable, message: "use SpindleThread.current.setPriority")
    public static func setThreadPriority(_ priority: Double) -> Bool { fatalError("unavailable") }

    /// Foundation's `Thread.qualityOfService`: unavailable.
    @available(*, unavailable, message: "Spindle has no quality-of-service classes: use priority and setPriority, 0...1, or the priority argument of detach and spawnJoinable")
    public var qualityOfService: SpindleQualityOfService {
        get { fatalError("unavailable") }
        set {}
    }
}
