/// A count of work in flight that threads can wait on, and blocks to run when it drops to zero: the role of
/// `DispatchGroup` (and of Go's `WaitGroup`) for code that tracks callbacks rather than operations.
///
/// ```swift
/// let group = SpindleWaitGroup(name: "thumbnails")
/// for url in urls {
///     group.enter()
///     fetch(url) { data in store(data); try? group.leave() }
/// }
/// group.notify(on: queue) { publish() }          // DispatchGroup.notify(queue:execute:)
/// group.addOperation(to: queue) { cleanUp() }    // DispatchQueue.async(group:execute:)
/// _ = group.wait(timeout: .seconds(5))           // DispatchGroup.wait(timeout:)
/// ```
///
/// For operations, dependencies usually say the same more directly (a final operation that depends on the
/// others; `waitUntilFinished` on it). Differences from `DispatchGroup`: an unbalanced `leave()` throws
/// `waitGroupUnbalanced` and changes nothing (Dispatch traps); `notify` adds a `SpindleBlockOperation` to a
/// `SpindleOperationQueue`, and returns it.
///
/// Guards: `count`, `waiting` (the notify blocks and their queues) and `name` are under `condition`'s mutex (a leaf
/// lock: nothing else is taken under it, and no user code runs under it; notify blocks are added to their queues
/// after unlocking). State machine: idle (count 0) ⇄ busy (count > 0), by `enter()` (idle → busy, busy → busy)
/// and `leave()` (busy → busy, or → idle, which wakes every `wait` and hands every pending notify block to its
/// queue, in the order they were registered).
public final class SpindleWaitGroup: @unchecked Sendable, CustomStringConvertible {
    private let condition = SpindleCondition()
    private var count = 0
    private var waiting: [(queue: SpindleOperationQueue, operation: SpindleBlockOperation)] = []
    private let name: String

    /// An empty group (nothing entered). `name` appears in errors. Any thread.
    public init(name: String = "SpindleWaitGroup") { self.name = name }

    /// The entries not yet left. Any thread; a snapshot.
    public var pendingCount: Int { self.condition.withLock { self.count } }

    /// "SpindleWaitGroup(name, pending N)".
    public var description: String { "SpindleWaitGroup(\(self.name), pending \(self.pendingCount))" }

    /// One more piece of work in flight. Any thread.
    public func enter() {
        self.condition.withLock { self.count += 1 }
    }

    /// One piece of work done. When none is left, every `wait` returns and every pending `notify` block is added
    /// to its queue. Any thread.
    /// - Throws: `waitGroupUnbalanced` when nothing was entered; nothing changes then.
    public func leave() throws(SpindleError) {
        let ready = try self.condition.withLock { () throws(SpindleError) -> [(SpindleOperationQueue, SpindleBlockOperation)] in
            guard self.count > 0 else { throw .waitGroupUnbalanced(name: self.name) }
            self.count -= 1
            guard self.count == 0 else { return [] }
            self.condition.broadcast()
            let ready = self.waiting.map { ($0.queue, $0.operation) }
            self.waiting = []
            return ready
        }
        for (queue, operation) in ready { Self.add(operation, to: queue) }
    }

    /// Blocks until nothing is in flight. Returns at once if nothing is. Any thread.
    public func wait() {
        _ = self.wait(until: .distantFuture)
    }

    /// As `wait()`, giving up after `timeout`; returns whether nothing was in flight by then.
    public func wait(timeout: Duration) -> Bool { self.wait(until: .after(timeout)) }

    /// As `wait()`, giving up at `deadline`; returns whether nothing was in flight by then.
    public func wait(until deadline: SpindleDeadline) -> Bool {
        ThreadContext.current.blocking {  // on a pool thread, another may serve meanwhile
            self.condition.withLock { self.condition.wait(until: deadline) { self.count > 0 } }
        }
    }

    /// Adds `block` to `queue`, as a block operation, once nothing is in flight: at once if nothing is now, else
    /// when the last `leave()` happens (on that thread). Returns the operation (to wait on, or to cancel). If the
    /// queue refuses it then (shut down, full and refusing), the operation finishes cancelled, unrun, as
    /// `SpindleOperationQueue.addOperation(_:)` with a block does; on a bounded queue whose policy is `.block`, the
    /// add may wait for room on the thread that left last. Any thread.
    @discardableResult
    public func notify(on queue: SpindleOperationQueue, _ block: @escaping @Sendable () -> Void) -> SpindleBlockOperation {
        let operation = SpindleBlockOperation(block)
        let now = self.condition.withLock { () -> Bool in
            if self.count == 0 { return true }
            self.waiting.append((queue, operation))
            return false
        }
        if now { Self.add(operation, to: queue) }
        return operation
    }

    /// Adds `block` to `queue` as part of this group: entered now, left when the operation has finished (run,
    /// cancelled, or refused by the queue). `DispatchQueue.async(group:execute:)`. Returns the operation. Any
    /// thread.
    @discardableResult
    public func addOperation(to queue: SpindleOperationQueue, _ block: @escaping @Sendable () -> Void)
        -> SpindleBlockOperation
    {
        self.enter()
        let operation = SpindleBlockOperation(block)
        operation.completionBlock = { try? self.leave() }  // runs once, however it ends; entered above
        Self.add(operation, to: queue)
        return operation
    }

    /// Adds `operation` to `queue`; a refusal finishes it cancelled (its completion block still runs).
    private static func add(_ operation: SpindleBlockOperation, to queue: SpindleOperationQueue) {
        do {
            try queue.addOperation(operation)
        } catch {
            operation.cancel()
            try? operation.start()  // cancelled: finishes unrun, running its completion block
        }
    }
}
