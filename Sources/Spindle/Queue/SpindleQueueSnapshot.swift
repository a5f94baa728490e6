/// What a queue looked like at one instant (`SpindleOperationQueue.snapshot()`): taken under the queue's lock in
/// one pass, so the figures are consistent with each other. Counts "so far" are since the queue was created.
public struct SpindleQueueSnapshot: Sendable, CustomStringConvertible {
    /// The queue's name.
    public let name: String
    /// The width in effect (the CPU count for the default width).
    public let maxConcurrentOperationCount: Int
    /// Whether the queue starts nothing new.
    public let isSuspended: Bool
    /// Operations added and not finished (barriers excluded): `operationCount`.
    public let operationCount: Int
    /// Operations not yet startable, by queue priority: waiting for dependencies, or held behind a barrier.
    public let waitingByPriority: [SpindleOperation.QueuePriority: Int]
    /// Ready operations waiting for a slot (barriers excluded).
    public let ready: Int
    /// Operations holding a slot: being started, executing, or finishing (barrier blocks included).
    public let executing: Int
    /// Operations that finished so far (barrier blocks included; operations run on the caller excluded).
    public let finished: Int
    /// Of those, how many were cancelled.
    public let cancelled: Int
    /// Of those, how many finished with an error (`main` threw, or `finish(throwing:)`).
    public let failed: Int
    /// The most operations (barriers excluded) the queue held at once.
    public let highWaterOperationCount: Int
    /// The most operations holding a slot at once.
    public let highWaterExecuting: Int
    /// The capacity (nil: unbounded).
    public let capacity: Int?
    /// What a plain add does when the queue is full.
    public let fullQueuePolicy: SpindleFullQueuePolicy
    /// Producers blocked (or suspended) waiting for room.
    public let blockedProducers: Int
    /// Operations held by blocked producers (not yet members).
    public let blockedOperations: Int
    /// Adds refused so far (policy `.reject`, timed adds that expired, cancelled async adds, refusals of
    /// caller-runs that could not run on the caller, `.block` adds from the queue's own operations).
    public let rejected: Int
    /// Operations run on the adding thread so far (policy `.callerRuns`).
    public let ranOnCaller: Int
    /// Wait time (admission to being started by a worker), only while `collectsWaitTimes` is on: how many
    /// operations were measured, their total and the longest.
    public let waitTimeSamples: Int
    /// The sum of the measured waits.
    public let totalWaitTime: Duration
    /// The longest measured wait.
    public let maxWaitTime: Duration

    /// All waiting operations, whatever their priority.
    public var waiting: Int { self.waitingByPriority.values.reduce(0, +) }

    /// The mean measured wait, nil with no sample.
    public var averageWaitTime: Duration? {
        self.waitTimeSamples == 0 ? nil : self.totalWaitTime / self.waitTimeSamples
    }

    /// One line with every figure. Any thread; throws nothing.
    public var description: String {
        let capacityText = self.capacity.map { "\($0) (\(self.fullQueuePolicy))" } ?? "unbounded"
        var text = "SpindleQueueSnapshot '\(self.name)': width \(self.maxConcurrentOperationCount)"
            + "\(self.isSuspended ? " suspended" : ""), operations \(self.operationCount) (waiting \(self.waiting), "
            + "ready \(self.ready), executing \(self.executing)), finished \(self.finished) (cancelled "
            + "\(self.cancelled), failed \(self.failed)), high water \(self.highWaterOperationCount)/"
            + "\(self.highWaterExecuting), capacity \(capacityText), blocked producers \(self.blockedProducers) "
            + "(\(self.blockedOperations) operations), rejected \(self.rejected), ran on caller \(self.ranOnCaller)"
        if self.waitTimeSamples > 0 {
            text += ", wait \(self.averageWaitTime!) average, \(self.maxWaitTime) max over \(self.waitTimeSamples)"
        }
        return text
    }
}
