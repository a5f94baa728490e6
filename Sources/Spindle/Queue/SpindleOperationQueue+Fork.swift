import CShim

/// A queue in a process made by `fork()`, when the queue was made before the fork (issue 23; see
/// `ForkGeneration`). The child has none of the queue's worker threads, and a lock a parent thread held at the
/// fork stays held, so the queue is dead there, and says so without taking its lock:
/// - every throwing way to add work, `waitUntilAllOperationsAreFinished` (both forms), `setCapacity` and
///   `setMaxConcurrentOperationCount` throw `SpindleError.forkedChild`, leaving the operations untouched;
/// - `addOperation { }` and `addBarrierBlock` return their new operation finished as cancelled (its block
///   never runs); setting `isSuspended` and `cancelAllOperations()` do nothing;
/// - `operations` is empty and `operationCount` 0 (nothing of the parent's will run here); `name`,
///   `maxConcurrentOperationCount` and `isSuspended` read the values the fork copied;
/// - releasing it joins nothing;
/// - `snapshot()`, `capacity`, `fullQueuePolicy`, `collectsWaitTimes` and `debugDescription` still take the
///   queue's lock: do not use them there.
/// Queues made in the child work as anywhere. Operations, semaphores, threads and run loops made in the parent
/// must not be waited on in the child (their threads are in the parent), as with any pthread object across fork.
/// The check is one relaxed load of a global and a compare, at the top of each entry point.
extension SpindleOperationQueue {
    /// Whether this queue was made in a parent of this process.
    @inline(__always)
    var isInheritedAcrossFork: Bool { ForkGeneration.isInherited(self.core.forkGeneration) }

    /// Throws `forkedChild` for a queue made in a parent process.
    @inline(__always)
    func refuseIfInheritedAcrossFork() throws(SpindleError) {
        if self.isInheritedAcrossFork { throw .forkedChild(name: self.core.name) }
    }

    /// A new block operation refused by an inherited queue: finished as cancelled on the calling thread, its block
    /// never run.
    func finishRefused(_ op: SpindleBlockOperation) -> SpindleBlockOperation {
        op.cancel()
        try? op.start()  // a new, cancelled operation: start() finishes it without running main
        return op
    }
}

extension SpindleFaults {
    /// Makes `queue` behave as a queue made before a `fork()` of this process would in the child (`inherited`
    /// true), or as its own again (false), without forking: what a test of the refusals uses, since forking a test
    /// process with other suites' threads running is not safe. Its workers are left as they are; restore before
    /// releasing the queue, or its threads are never joined.
    @_spi(Faults) public static func simulateForkedChild(_ queue: SpindleOperationQueue, _ inherited: Bool) {
        queue.core.forkGeneration = inherited ? cshim_fork_generation() &+ 1 : cshim_fork_generation()
    }
}
