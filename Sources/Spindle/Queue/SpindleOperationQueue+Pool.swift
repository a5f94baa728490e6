/// Queues on a shared `SpindleThreadPool` (Foundation's `underlyingQueue`, libdispatch's target queue).
extension SpindleOperationQueue {
    /// A queue whose operations run on `pool`'s threads (it has none of its own), with the default width: as many
    /// at once as the CPUs this process may use, and never more than the pool's `threadCount`. Everything else is
    /// as on any queue: priorities, dependencies, suspension, barriers, shutdown. Any thread.
    public convenience init(name: String? = nil, pool: SpindleThreadPool) {
        self.init(checkedName: name, limit: SpindleOperationQueue.defaultMaxConcurrentOperationCount, pool: pool)
    }

    /// A queue of width `maxConcurrentOperationCount` on `pool` (see `init(name:pool:)`).
    /// - Throws: `invalidConcurrencyLimit` for a negative width other than -1. Nothing is made then.
    public convenience init(name: String? = nil, maxConcurrentOperationCount: Int, pool: SpindleThreadPool)
        throws(SpindleError)
    {
        guard maxConcurrentOperationCount >= -1 else { throw .invalidConcurrencyLimit(maxConcurrentOperationCount) }
        self.init(checkedName: name, limit: maxConcurrentOperationCount, pool: pool)
    }

    /// The pool whose threads run this queue's operations, or nil if it has threads of its own (or is the main
    /// queue). Fixed when the queue is made.
    public var pool: SpindleThreadPool? { self.core.pool }
}
