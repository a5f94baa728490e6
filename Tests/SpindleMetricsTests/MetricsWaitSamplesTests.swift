#if SpindleMetrics  // the trait of the same name (Package.swift)
import MetricsTestKit
import Spindle
import SpindleMetrics
import Testing

/// The samples counter counts every measured operation, also when a sample is taken while measuring is off
/// (it lost those measured before such a sample; found by a review, failed before the fix).
@Suite struct MetricsWaitSamplesTests {
    @Test func waitSamplesMeasuredBeforeASampleTakenWhileOffAreStillCounted() throws {
        let metrics = TestMetrics()
        let queue = try SpindleOperationQueue(name: "m-review-c", maxConcurrentOperationCount: 1)
        let reporter = SpindleQueueMetrics(queue: queue, factory: metrics)
        let samples = try metrics.expectCounter("spindle_queue_wait_samples_total", [("queue", "m-review-c")])

        queue.collectsWaitTimes = true
        for _ in 0..<5 { queue.addOperation {} }  // measured: 5 samples
        try queue.waitUntilAllOperationsAreFinished()
        queue.collectsWaitTimes = false  // turned off before the next sample...
        reporter.record()  // ...which records no wait metric, as documented
        queue.collectsWaitTimes = true  // on again
        queue.addOperation {}
        try queue.waitUntilAllOperationsAreFinished()
        let snapshot = reporter.record()

        #expect(snapshot.waitTimeSamples == 6)
        // "<prefix>_wait_samples_total: operations whose wait was measured": all 6 were measured.
        #expect(samples.totalValue == Int64(snapshot.waitTimeSamples),
                "the counter lost the samples measured before the sample taken while collectsWaitTimes was off")
    }
}
#endif
