#if SpindleMetrics  // the trait of the same name (Package.swift)
import Metrics
import Spindle

/// Reports a `SpindleOperationQueue`'s `snapshot()` as swift-metrics metrics: on demand with `record()`, or
/// periodically with `run(every:)` (a loop that a service group can run).
///
/// Each sample records (`<prefix>` is `labelPrefix`, "spindle_queue" by default; every metric carries the dimension
/// `("queue", <the queue's name>)` first, then `dimensions`):
///
/// | Label | Kind | Value |
/// |---|---|---|
/// | `<prefix>_operations` | gauge | operations added and not finished (`operationCount`, the queue's depth) |
/// | `<prefix>_ready` | gauge | ready operations waiting for a slot |
/// | `<prefix>_executing` | gauge | operations holding a slot |
/// | `<prefix>_waiting` | gauge | operations waiting for dependencies or behind a barrier |
/// | `<prefix>_blocked_producers` | gauge | producers blocked waiting for room in a bounded queue |
/// | `<prefix>_finished_total` | counter | operations finished |
/// | `<prefix>_cancelled_total` | counter | of those, cancelled |
/// | `<prefix>_failed_total` | counter | of those, failed |
/// | `<prefix>_rejected_total` | counter | adds refused |
/// | `<prefix>_wait_samples_total` | counter | operations whose wait was measured |
/// | `<prefix>_wait_average_seconds` | gauge | mean wait (admission to start) of those measured since the last sample |
/// | `<prefix>_wait_max_seconds` | gauge | longest wait measured since the queue was created |
///
/// Counters are incremented by what changed since the previous sample, so they only ever grow; the first sample
/// reports everything the queue counted since it was created. Wait times are measured only while the queue's
/// `collectsWaitTimes` is on (it is off by default: turn it on to get them; this type never changes it): the
/// samples counter counts every measured operation, and the two wait gauges are recorded by samples taken while
/// it is on, once something was measured.
///
/// The queue's name is read once, when the reporter is made: renaming the queue later does not change the
/// dimension. The reporter keeps the queue alive.
///
/// State: `reported` (the cumulative figures already reported) is under its own lock, a leaf lock taken only to
/// compute a step; snapshots are taken and metrics recorded (the metrics backend's code) without holding it.
/// `record()` may be called from any thread, also concurrently: each counted unit is reported exactly once, and the
/// gauges show whichever of two racing samples recorded last.
public final class SpindleQueueMetrics: Sendable {
    /// The queue reported on.
    public let queue: SpindleOperationQueue
    private let reported = SpindleLockedValue(ReportedCounts())

    private let operations: Gauge
    private let ready: Gauge
    private let executing: Gauge
    private let waiting: Gauge
    private let blockedProducers: Gauge
    private let finished: Counter
    private let cancelled: Counter
    private let failed: Counter
    private let rejected: Counter
    private let waitSamples: Counter
    private let waitAverage: Gauge
    private let waitMax: Gauge

    /// A reporter for `queue`, whose metrics are made now by `factory`.
    /// - Parameters:
    ///   - queue: the queue to sample.
    ///   - labelPrefix: the start of every label (see the table above).
    ///   - dimensions: more dimensions, after `("queue", queue.name)`.
    ///   - factory: where the metrics are made (default: the one bootstrapped in `MetricsSystem`).
    public init(
        queue: SpindleOperationQueue,
        labelPrefix: String = "spindle_queue",
        dimensions: [(String, String)] = [],
        factory: any MetricsFactory = MetricsSystem.factory
    ) {
        self.queue = queue
        let dimensions = [("queue", queue.name)] + dimensions
        func gauge(_ name: String) -> Gauge {
            Gauge(label: "\(labelPrefix)_\(name)", dimensions: dimensions, factory: factory)
        }
        func counter(_ name: String) -> Counter {
            Counter(label: "\(labelPrefix)_\(name)", dimensions: dimensions, factory: factory)
        }
        self.operations = gauge("operations")
        self.ready = gauge("ready")
        self.executing = gauge("executing")
        self.waiting = gauge("waiting")
        self.blockedProducers = gauge("blocked_producers")
        self.finished = counter("finished_total")
        self.cancelled = counter("cancelled_total")
        self.failed = counter("failed_total")
        self.rejected = counter("rejected_total")
        self.waitSamples = counter("wait_samples_total")
        self.waitAverage = gauge("wait_average_seconds")
        self.waitMax = gauge("wait_max_seconds")
    }

    /// Takes one snapshot of the queue and records it (see the table above). Any thread; takes the queue's lock
    /// once, never while recording.
    /// - Returns: the snapshot recorded.
    @discardableResult
    public func record() -> SpindleQueueSnapshot {
        let snapshot = self.queue.snapshot()
        let collectsWaitTimes = self.queue.collectsWaitTimes
        let step = self.reported.withLockedValue { $0.advance(to: snapshot) }

        self.operations.record(snapshot.operationCount)
        self.ready.record(snapshot.ready)
        self.executing.record(snapshot.executing)
        self.waiting.record(snapshot.waiting)
        self.blockedProducers.record(snapshot.blockedProducers)
        if step.finished > 0 { self.finished.increment(by: step.finished) }
        if step.cancelled > 0 { self.cancelled.increment(by: step.cancelled) }
        if step.failed > 0 { self.failed.increment(by: step.failed) }
        if step.rejected > 0 { self.rejected.increment(by: step.rejected) }
        // Samples only grow while measuring is on: count them whenever they are seen, so a sample taken while it
        // is off does not lose the ones measured before it.
        if step.waitSamples > 0 { self.waitSamples.increment(by: step.waitSamples) }
        if collectsWaitTimes {
            if let average = step.averageWaitNanoseconds { self.waitAverage.record(Double(average) / 1e9) }
            if snapshot.waitTimeSamples > 0 {
                self.waitMax.record(Double(ReportedCounts.nanoseconds(snapshot.maxWaitTime)) / 1e9)
            }
        }
        return snapshot
    }

    /// Records a sample now and then once every `interval` (on a schedule that does not drift: a late sample does
    /// not delay the next ones; samples missed while one ran late are skipped), until the task is cancelled; then
    /// records one last sample and returns. To run it in a `ServiceGroup` until graceful shutdown, wrap it in
    /// ServiceLifecycle's `cancelWhenGracefulShutdown { await metrics.run(every: .seconds(10)) }`.
    /// - Precondition: `interval` is positive.
    public func run(every interval: Duration) async {
        precondition(
            interval > .zero, "SpindleQueueMetrics.run(every:): the interval must be positive, not \(interval)")
        let clock = ContinuousClock()
        var next = clock.now
        while !Task.isCancelled {
            self.record()
            next = next.advanced(by: interval)
            let now = clock.now
            if next < now {  // ran late: skip the missed ticks, keep the phase
                let missed = Int64((now - next) / interval) + 1
                next = next.advanced(by: interval * missed)
            }
            do {
                // In steps of at most about 136 years: `sleep(until:)` traps past Int64.max seconds.
                while clock.now < next {
                    try await clock.sleep(until: min(next, clock.now.advanced(by: .seconds(1 << 32))))
                }
            } catch {
                break  // cancelled
            }
        }
        self.record()
    }

    /// Tells the metrics backend these metrics are no longer reported (their handlers are destroyed), for a queue
    /// that is gone. Recording afterwards is up to the backend (most ignore it); call it last.
    public func destroy() {
        let gauges = [
            self.operations, self.ready, self.executing, self.waiting, self.blockedProducers, self.waitAverage,
            self.waitMax,
        ]
        for gauge in gauges {
            gauge.destroy()
        }
        for counter in [self.finished, self.cancelled, self.failed, self.rejected, self.waitSamples] {
            counter.destroy()
        }
    }
}
#endif
