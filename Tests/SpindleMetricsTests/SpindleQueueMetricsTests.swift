#if SpindleMetrics  // the trait of the same name (Package.swift)
import Glibc
import MetricsTestKit
import Spindle
import SpindleMetrics
import Testing

/// `SpindleQueueMetrics`: what a sample records (gauges from the snapshot, counters by difference, wait metrics only
/// while measured), its labels and dimensions, exact counts under concurrent samplers, and the sampling loop. Every
/// test makes its own `TestMetrics` (passed as the factory), so the suites share no global metrics state.
@Suite struct SpindleQueueMetricsTests {
    let dimensions: (String) -> [(String, String)] = { [("queue", $0)] }

    /// The value a gauge recorded last, nil when it recorded nothing.
    func gauge(_ metrics: TestMetrics, _ label: String, _ queue: String) throws -> Double? {
        try metrics.expectGauge(label, self.dimensions(queue)).lastValue
    }

    /// Everything a counter was incremented by.
    func counter(_ metrics: TestMetrics, _ label: String, _ queue: String) throws -> Int64 {
        try metrics.expectCounter(label, self.dimensions(queue)).totalValue
    }

    @Test func aSampleRecordsTheQueuesDepthReadyExecutingWaitingAndBlockedProducers() throws {
        let metrics = TestMetrics()
        let queue = try SpindleOperationQueue(name: "m-gauges", maxConcurrentOperationCount: 1, capacity: 3)
        let reporter = SpindleQueueMetrics(queue: queue, factory: metrics)
        let holder = GatedOperation()  // holds the one slot: executing
        try queue.addOperation(holder)
        #expect(holder.started.wait(timeout: patience))
        queue.addOperation {}  // ready, waiting for the slot
        let dependency = SpindleBlockOperation {}  // never added: its dependent waits
        let dependent = SpindleBlockOperation {}
        try dependent.addDependency(dependency)
        try queue.addOperation(dependent)  // waiting; the queue is now full (3)
        let producer = try SpindleThread.spawnJoinable(name: "m-producer") {
            queue.addOperation {}  // blocks until there is room
        }
        #expect(pollUntil { queue.snapshot().blockedProducers == 1 }, "the producer never blocked")

        let snapshot = reporter.record()
        #expect(snapshot.operationCount == 3)
        #expect(try self.gauge(metrics, "spindle_queue_operations", "m-gauges") == 3)
        #expect(try self.gauge(metrics, "spindle_queue_ready", "m-gauges") == 1)
        #expect(try self.gauge(metrics, "spindle_queue_executing", "m-gauges") == 1)
        #expect(try self.gauge(metrics, "spindle_queue_waiting", "m-gauges") == 1)
        #expect(try self.gauge(metrics, "spindle_queue_blocked_producers", "m-gauges") == 1)
        #expect(try self.counter(metrics, "spindle_queue_finished_total", "m-gauges") == 0)

        #expect(SpindleOperation.perform(dependency))  // the dependent becomes ready
        holder.gate.signal()
        try producer.join()
        try queue.waitUntilAllOperationsAreFinished()
        reporter.record()
        #expect(try self.gauge(metrics, "spindle_queue_operations", "m-gauges") == 0)
        #expect(try self.gauge(metrics, "spindle_queue_ready", "m-gauges") == 0)
        #expect(try self.gauge(metrics, "spindle_queue_executing", "m-gauges") == 0)
        #expect(try self.gauge(metrics, "spindle_queue_waiting", "m-gauges") == 0)
        #expect(try self.gauge(metrics, "spindle_queue_blocked_producers", "m-gauges") == 0)
        #expect(try self.counter(metrics, "spindle_queue_finished_total", "m-gauges") == 4)
    }

    @Test func countersAreIncrementedByWhatChangedSinceTheLastSample() throws {
        let metrics = TestMetrics()
        let queue = try SpindleOperationQueue(name: "m-counters", maxConcurrentOperationCount: 1)
        let reporter = SpindleQueueMetrics(queue: queue, factory: metrics)
        queue.addOperation {}
        queue.addOperation {}
        try queue.waitUntilAllOperationsAreFinished()
        reporter.record()
        reporter.record()  // nothing new: no increment
        let finished = try metrics.expectCounter("spindle_queue_finished_total", self.dimensions("m-counters"))
        #expect(finished.values == [2])

        // One cancelled before it ran, one failed, two refused by a full queue.
        queue.isSuspended = true
        let cancelled = queue.addOperation {}
        cancelled.cancel()
        try queue.addOperation(FailingOperation())
        queue.isSuspended = false
        try queue.waitUntilAllOperationsAreFinished()
        let holder = GatedOperation()
        try queue.addOperation(holder)
        #expect(holder.started.wait(timeout: patience))
        try queue.setCapacity(1, whenFull: .reject)
        #expect(throws: SpindleError.self) { try queue.addOperation(SpindleBlockOperation {}) }
        #expect(throws: SpindleError.self) { try queue.addOperation(SpindleBlockOperation {}) }
        holder.gate.signal()
        try queue.waitUntilAllOperationsAreFinished()

        let snapshot = reporter.record()
        #expect(finished.values == [2, 3])  // the two plain ones, then the cancelled, failed and holder
        #expect(finished.totalValue == Int64(snapshot.finished))
        #expect(try self.counter(metrics, "spindle_queue_cancelled_total", "m-counters") == 1)
        #expect(try self.counter(metrics, "spindle_queue_failed_total", "m-counters") == 1)
        #expect(try self.counter(metrics, "spindle_queue_rejected_total", "m-counters") == 2)
        #expect(snapshot.cancelled == 1 && snapshot.failed == 1 && snapshot.rejected == 2)
    }

    @Test func waitMetricsAreRecordedOnlyWhileTheQueueMeasuresWaits() throws {
        let metrics = TestMetrics()
        let queue = try SpindleOperationQueue(name: "m-waits", maxConcurrentOperationCount: 1)
        let reporter = SpindleQueueMetrics(queue: queue, factory: metrics)
        let average = try metrics.expectGauge("spindle_queue_wait_average_seconds", self.dimensions("m-waits"))
        let longest = try metrics.expectGauge("spindle_queue_wait_max_seconds", self.dimensions("m-waits"))
        let samples = try metrics.expectCounter("spindle_queue_wait_samples_total", self.dimensions("m-waits"))
        #expect(!queue.collectsWaitTimes)
        for _ in 0..<5 { queue.addOperation {} }
        try queue.waitUntilAllOperationsAreFinished()
        reporter.record()
        #expect(average.values.isEmpty && longest.values.isEmpty && samples.values.isEmpty)

        queue.collectsWaitTimes = true
        reporter.record()  // on, but nothing measured yet: still nothing
        #expect(average.values.isEmpty && longest.values.isEmpty && samples.values.isEmpty)
        let holder = GatedOperation()  // the others wait behind it, so their waits are not all zero
        try queue.addOperation(holder)
        for _ in 0..<5 { queue.addOperation {} }
        #expect(holder.started.wait(timeout: patience))
        holder.gate.signal()
        try queue.waitUntilAllOperationsAreFinished()
        let snapshot = reporter.record()
        #expect(snapshot.waitTimeSamples == 6)
        #expect(samples.totalValue == 6)
        let mean = try #require(average.lastValue)
        let max = try #require(longest.lastValue)
        #expect(max > 0)
        #expect(mean > 0 && mean <= max)
        let expectedMax = Double(snapshot.maxWaitTime.components.seconds)
            + Double(snapshot.maxWaitTime.components.attoseconds) / 1e18
        #expect(abs(max - expectedMax) < 1e-9)
        reporter.record()  // no new measurement: the average is not recorded again
        #expect(average.values.count == 1 && longest.values.count == 2 && samples.values == [6])

        queue.collectsWaitTimes = false  // off again: the snapshot still holds the old figures, nothing is recorded
        queue.addOperation {}
        try queue.waitUntilAllOperationsAreFinished()
        reporter.record()
        #expect(average.values.count == 1 && longest.values.count == 2 && samples.values == [6])
    }

    @Test func labelsUseThePrefixAndDimensionsStartWithTheQueueName() throws {
        let metrics = TestMetrics()
        let queue = SpindleOperationQueue(name: "m-labels")
        let reporter = SpindleQueueMetrics(
            queue: queue, labelPrefix: "jobs", dimensions: [("service", "api")], factory: metrics)
        reporter.record()
        let depth = try metrics.expectGauge("jobs_operations", [("queue", "m-labels"), ("service", "api")])
        #expect(depth.lastValue == 0)
        #expect(metrics.recorders.allSatisfy { $0.label.hasPrefix("jobs_") })
        #expect(metrics.counters.allSatisfy { $0.label.hasPrefix("jobs_") })
        #expect(metrics.recorders.count == 7 && metrics.counters.count == 5)
        reporter.destroy()
        #expect(metrics.recorders.isEmpty && metrics.counters.isEmpty)
    }

    @Test func concurrentSamplersReportEachFinishedOperationExactlyOnce() throws {
        let metrics = TestMetrics()
        let queue = try SpindleOperationQueue(name: "m-racing", maxConcurrentOperationCount: 2)
        let reporter = SpindleQueueMetrics(queue: queue, factory: metrics)
        let total = 4_000
        let samplers = try (0..<3).map { index in
            try SpindleThread.spawnJoinable(name: "m-sampler-\(index)") {
                while queue.snapshot().finished < total { reporter.record() }
            }
        }
        for _ in 0..<total { queue.addOperation {} }
        try queue.waitUntilAllOperationsAreFinished()
        for sampler in samplers { try sampler.join() }
        reporter.record()
        let finished = try metrics.expectCounter("spindle_queue_finished_total", self.dimensions("m-racing"))
        #expect(finished.totalValue == Int64(total))
        #expect(finished.values.allSatisfy { $0 > 0 })
    }

    @Test func runSamplesRepeatedlyUntilCancelled() async throws {
        let factory = SignallingMetrics(watching: "_operations")
        let queue = SpindleOperationQueue(name: "m-loop")
        let reporter = SpindleQueueMetrics(queue: queue, factory: factory)
        let sampling = Task { await reporter.run(every: .milliseconds(1)) }
        let sawFive = await withinPatience {
            for _ in 0..<5 { try? await factory.recorded.wait() }
            return !Task.isCancelled
        }
        sampling.cancel()
        let returned = await withinPatience { await sampling.value; return true }
        #expect(sawFive == true, "the loop did not sample five times")
        #expect(returned == true, "run(every:) did not return after cancellation")
    }

    @Test func runRecordsOnceMoreWhenCancelled() async throws {
        let factory = SignallingMetrics(watching: "_operations")
        let queue = SpindleOperationQueue(name: "m-last")
        let reporter = SpindleQueueMetrics(queue: queue, factory: factory)
        let sampling = Task { await reporter.run(every: .seconds(3600)) }  // the next tick is an hour away
        let sampled = await withinPatience {
            (try? await factory.recorded.wait()) != nil
        }
        #expect(sampled == true, "no first sample")
        queue.addOperation {}
        let finished = await withinPatience {
            (try? await queue.waitUntilAllOperationsAreFinished()) != nil
        }
        #expect(finished == true)
        sampling.cancel()
        let returned = await withinPatience { await sampling.value; return true }
        #expect(returned == true, "run(every:) did not return after cancellation")
        let counted = try factory.test.expectCounter("spindle_queue_finished_total", self.dimensions("m-last"))
        #expect(counted.totalValue == 1, "the sample taken on cancellation is missing")
    }
}
#endif
