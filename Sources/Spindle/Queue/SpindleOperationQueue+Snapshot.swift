/// Introspection: `snapshot()` and the opt-in wait-time measurement.
///
/// Wait time is opt-in (`collectsWaitTimes`, default off) because it costs two clock reads per operation
/// (admission and dispatch, under the queue's lock), which is a visible share of an operation's cost on the hot
/// path (clock_gettime is tens of nanoseconds at best, far more on virtual machines without a usable TSC). Off,
/// it costs one test of a flag per admission and one of a field per dispatch. The other figures are counters the
/// queue keeps anyway, plus two high-water marks updated under the lock it already holds (the members' mark once
/// per admission batch, not per operation).
extension SpindleOperationQueue {
    /// A consistent picture of the queue now (see `SpindleQueueSnapshot`). Takes the queue's lock once and walks
    /// its members (O(operations in the queue)). Any thread.
    public func snapshot() -> SpindleQueueSnapshot {
        let core = self.core
        return core.withAdmittedLock {
            var waiting: [SpindleOperation.QueuePriority: Int] = [:]
            var ready = 0
            var node = core.members.first
            while let link = node {
                let op = link.takeUnretainedValue()
                node = op.memberNext
                if op.isBarrier || op.currentState.lifecycle != .enqueued { continue }
                if op.placement == .ready || op.placement == .reserved {  // in a bucket, or reserved by a worker
                    ready += 1
                } else {
                    waiting[op.queuePriority, default: 0] += 1
                }
            }
            let blocked = core.admission.blockedCounts
            return SpindleQueueSnapshot(
                name: core.name, maxConcurrentOperationCount: core.slots.limit, isSuspended: core.slots.suspended,
                operationCount: core.countedMembersLocked, waitingByPriority: waiting, ready: ready,
                executing: core.slots.running, finished: core.stats.finished, cancelled: core.stats.cancelled,
                failed: core.stats.failed, highWaterOperationCount: core.stats.highWaterMembers,
                highWaterExecuting: core.stats.highWaterRunning, capacity: core.admission.capacity, fullQueuePolicy: core.admission.policy,
                blockedProducers: blocked.producers, blockedOperations: blocked.operations,
                rejected: core.stats.rejected, ranOnCaller: core.stats.ranOnCaller, waitTimeSamples: core.stats.waitSamples,
                totalWaitTime: .nanoseconds(Int64(clamping: core.stats.waitTotalNs)),
                maxWaitTime: .nanoseconds(Int64(clamping: core.stats.waitMaxNs)))
        }
    }

    /// Whether the queue measures how long each operation waits from admission to being started (default off:
    /// see the note above). Turning it on measures operations admitted from then on. Any thread.
    public var collectsWaitTimes: Bool {
        get { self.core.lock.withLock { self.core.stats.collectsWaitTimes } }
        set { self.core.withAdmittedLock { self.core.stats.collectsWaitTimes = newValue } }
    }
}
