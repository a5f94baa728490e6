#if SpindleMetrics  // the trait of the same name (Package.swift)
import CoreMetrics
import Glibc
import MetricsTestKit
import Spindle

// Helpers for the SpindleMetrics tests. Nothing here sleeps to learn that something happened: hand-offs go through
// semaphores with generous deadlines; `pollUntil` re-checks a fact that comes with no signal (a producer arrived
// inside the queue's blocking add) until a deadline, yielding the CPU between checks.

/// How long a test waits for something that should happen at once before it fails instead of hanging.
/// Generous: these suites share one test process with 600 others on a cooperative pool of one thread per core (2
/// here), and under ThreadSanitizer synchronous tests have held that pool for over 20 s (a 1 ms sampling loop then
/// got no thread until the old 20 s bound ran out). Only a failing test waits this long.
let patience: Duration = .seconds(120)

/// Re-checks `condition` until it holds or `patience` has passed; returns whether it held.
func pollUntil(_ condition: () -> Bool) -> Bool {
    let deadline = SpindleDeadline.after(patience)
    while !condition() {
        if deadline.hasPassed { return false }
        sched_yield()
    }
    return true
}

/// Runs `work`, giving up after `patience`: nil if it did not return in time (it is then cancelled, and the
/// awaits it uses are cancellable). The sleep is only the bound raced against `work`, which wins at once when the
/// code under test is right.
func withinPatience<T: Sendable>(_ work: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await work() }
        group.addTask {
            try? await Task.sleep(for: patience)
            return nil
        }
        let first = await group.next()!
        group.cancelAll()
        return first
    }
}

/// A metrics factory that hands everything to a `TestMetrics` and signals `recorded` each time a recorder whose
/// label ends with `watchedSuffix` records a value, so a test can wait for a sampler's samples.
final class SignallingMetrics: MetricsFactory {
    let test = TestMetrics()
    let recorded = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    let watchedSuffix: String

    init(watching watchedSuffix: String) { self.watchedSuffix = watchedSuffix }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        self.test.makeCounter(label: label, dimensions: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        let inner = self.test.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
        return label.hasSuffix(self.watchedSuffix) ? Signalling(inner: inner, recorded: self.recorded) : inner
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        self.test.makeTimer(label: label, dimensions: dimensions)
    }

    func destroyCounter(_ handler: any CounterHandler) { self.test.destroyCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) {
        self.test.destroyRecorder((handler as? Signalling)?.inner ?? handler)
    }
    func destroyTimer(_ handler: any TimerHandler) { self.test.destroyTimer(handler) }

    /// Records into `inner`, then signals.
    final class Signalling: RecorderHandler {
        let inner: any RecorderHandler
        let recorded: SpindleSemaphore

        init(inner: any RecorderHandler, recorded: SpindleSemaphore) {
            self.inner = inner
            self.recorded = recorded
        }

        func record(_ value: Int64) {
            self.inner.record(value)
            self.recorded.signal()
        }

        func record(_ value: Double) {
            self.inner.record(value)
            self.recorded.signal()
        }
    }
}

/// An operation that waits for `gate` (signalling `started` first), so a test can hold a slot.
final class GatedOperation: SpindleOperation, @unchecked Sendable {
    let started = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    let gate = try! SpindleSemaphore(value: 0)  // 0 is a valid value

    override func main() throws {
        self.started.signal()
        _ = self.gate.wait(timeout: patience)
    }
}

/// An operation whose `main` throws.
final class FailingOperation: SpindleOperation, @unchecked Sendable {
    struct Failure: Error {}

    override func main() throws { throw Failure() }
}
#endif
