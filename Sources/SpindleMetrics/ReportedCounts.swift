#if SpindleMetrics  // the trait of the same name (Package.swift)
import Spindle

/// The cumulative figures of a queue that a `SpindleQueueMetrics` has already reported, and the step from one
/// snapshot to the next: how much each counter has to be incremented by.
///
/// A queue's cumulative figures never decrease, so `advance(to:)` takes the larger of the reported and the new
/// value for each figure and reports the difference (never negative). Two samplers racing (a snapshot taken
/// first but advanced second) therefore report each unit exactly once: the older snapshot finds nothing new.
/// Pure value type: the owner keeps it under its lock.
struct ReportedCounts: Equatable, Sendable {
    var finished = 0
    var cancelled = 0
    var failed = 0
    var rejected = 0
    var waitSamples = 0
    var waitNanoseconds: Int64 = 0

    /// What changed since the last report, for the counters and the interval's wait average.
    struct Step: Equatable, Sendable {
        var finished = 0
        var cancelled = 0
        var failed = 0
        var rejected = 0
        var waitSamples = 0
        var waitNanoseconds: Int64 = 0

        /// The mean wait of the operations measured in this step, nil when none was.
        var averageWaitNanoseconds: Int64? {
            self.waitSamples > 0 ? self.waitNanoseconds / Int64(self.waitSamples) : nil
        }
    }

    /// Moves the reported figures up to `snapshot`'s and returns by how much each one grew.
    mutating func advance(to snapshot: SpindleQueueSnapshot) -> Step {
        var step = Step()
        step.finished = Self.raise(&self.finished, to: snapshot.finished)
        step.cancelled = Self.raise(&self.cancelled, to: snapshot.cancelled)
        step.failed = Self.raise(&self.failed, to: snapshot.failed)
        step.rejected = Self.raise(&self.rejected, to: snapshot.rejected)
        // The wait figures move together: a stale snapshot (fewer samples) leaves both alone.
        if snapshot.waitTimeSamples > self.waitSamples {
            let total = Self.nanoseconds(snapshot.totalWaitTime)
            step.waitSamples = snapshot.waitTimeSamples - self.waitSamples
            step.waitNanoseconds = max(0, total - self.waitNanoseconds)
            self.waitSamples = snapshot.waitTimeSamples
            self.waitNanoseconds = max(self.waitNanoseconds, total)
        }
        return step
    }

    /// Raises `reported` to `value` if it is larger; returns the increase (0 otherwise).
    private static func raise(_ reported: inout Int, to value: Int) -> Int {
        guard value > reported else { return 0 }
        defer { reported = value }
        return value - reported
    }

    /// `duration` in whole nanoseconds, saturating at `Int64.max`.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        // `components` traps beyond Int64.max seconds (a Duration holds about 1.7e20): saturate before it.
        if duration >= .seconds(Int64.max / 1_000_000_000) { return .max }
        if duration <= .seconds(Int64.min / 1_000_000_000) { return .min }
        let (seconds, attoseconds) = duration.components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, overflowSum) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowSum ? .max : sum
    }
}
#endif
