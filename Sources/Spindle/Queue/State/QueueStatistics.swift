/// The counters behind `snapshot()` and `debugDescription`. A unit of the queue's locked state: a value stored in
/// `QueueCore`, guarded by `QueueCore.lock`; recorders only, no decisions.
///
/// Fields (all under `QueueCore.lock`): finished, cancelled and failed members (a finished member counts once in
/// `finished`, and also in `cancelled` and/or `failed`); the high-water marks of members counted against the
/// capacity and of slots in use; adds refused (`.reject`, or a timed add that expired) and operations run on the
/// adding thread (`.callerRuns`); the opt-in wait-time switch and its samples (see
/// `SpindleOperationQueue+Snapshot` for why it is opt-in).
///
/// Invariants (`check()`): every counter is >= 0; `cancelled <= finished` and `failed <= finished`;
/// `waitMaxNs <= waitTotalNs` unless the total wrapped.
struct QueueStatistics {
    private(set) var finished = 0
    private(set) var cancelled = 0
    private(set) var failed = 0
    private(set) var highWaterMembers = 0
    private(set) var highWaterRunning = 0
    private(set) var rejected = 0
    private(set) var ranOnCaller = 0
    /// Whether admissions are stamped so that dispatch can record the wait (set by the user).
    var collectsWaitTimes = false
    private(set) var waitSamples = 0
    private(set) var waitTotalNs: UInt64 = 0
    private(set) var waitMaxNs: UInt64 = 0

    /// A member finished.
    @inline(__always)
    mutating func recordFinish(cancelled: Bool, failed: Bool) {
        self.finished += 1
        if cancelled { self.cancelled += 1 }
        if failed { self.failed += 1 }
    }

    /// Members counted against the capacity, after an admission.
    @inline(__always)
    mutating func noteMembers(_ count: Int) {
        if count > self.highWaterMembers { self.highWaterMembers = count }
    }

    /// Slots in use, after a dispatch.
    @inline(__always)
    mutating func noteRunning(_ count: Int) {
        if count > self.highWaterRunning { self.highWaterRunning = count }
    }

    /// An add was refused.
    mutating func recordRejected() { self.rejected += 1 }

    /// `count` operations ran on the adding thread.
    mutating func recordRanOnCaller(_ count: Int) { self.ranOnCaller += count }

    /// An operation waited `nanoseconds` from admission to dispatch.
    mutating func recordWait(_ nanoseconds: UInt64) {
        self.waitSamples += 1
        self.waitTotalNs &+= nanoseconds
        if nanoseconds > self.waitMaxNs { self.waitMaxNs = nanoseconds }
    }

    /// The invariants above.
    func check() -> Bool {
        self.finished >= 0 && self.cancelled >= 0 && self.failed >= 0 && self.cancelled <= self.finished
            && self.failed <= self.finished && self.rejected >= 0 && self.ranOnCaller >= 0 && self.waitSamples >= 0
    }
}
