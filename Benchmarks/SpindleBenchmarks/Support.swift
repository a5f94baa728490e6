import Benchmark
import Dispatch
import Glibc
import Spindle
import Synchronization

// Naming: "<scenario> ×<N>: <implementation>". One iteration does N items (operations, round trips, lock
// pairs...); `Benchmarks/report.py` divides by N and pairs Spindle with each peer of the same scenario.

/// The width "as many as CPUs" resolves to here; peers with a thread count are given the same.
let processorCount = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))

/// The metrics every scenario records.
let standardMetrics: [BenchmarkMetric] = [.wallClock, .throughput, .cpuTotal, .mallocCountTotal, .peakMemoryResident, .threads]

/// A scenario's configuration: a warm-up, then up to `iterations` runs within about `seconds`.
func scenario(iterations: Int = 10, seconds: Int = 5, metrics: [BenchmarkMetric] = standardMetrics)
    -> Benchmark.Configuration
{
    .init(metrics: metrics, timeUnits: .microseconds, warmupIterations: 1, maxDuration: .seconds(seconds),
          maxIterations: iterations)
}

/// Counts completions and lets one thread wait for a given number of them (the peers have no common "wait for
/// all" primitive, so every implementation uses this one).
final class CompletionCounter: @unchecked Sendable {
    private let done = Atomic<Int>(0)
    private let semaphore = try! SpindleSemaphore(value: 0)
    private let target: Int

    init(target: Int) { self.target = target }

    @inline(__always) func complete() {
        if self.done.add(1, ordering: .acquiringAndReleasing).newValue == self.target { self.semaphore.signal() }
    }

    func wait() { self.semaphore.wait() }
}

/// The two semaphores the suite waits with behind one interface, so that one piece of code (generic, specialised
/// for each) serves both: Spindle's own, and libdispatch's, the waiter the main rows share with the peers.
protocol WaitingSemaphore: Sendable {
    func wait()
    func signalOne()
}

extension SpindleSemaphore: WaitingSemaphore {
    @inline(__always) func signalOne() { self.signal() }
}

extension DispatchSemaphore: WaitingSemaphore {
    @inline(__always) func signalOne() { self.signal() }
}

/// A POSIX semaphore on the heap (the raw baseline for signalling between threads).
final class PosixSemaphore: @unchecked Sendable {
    private let raw = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(self.raw, 0, 0) }
    deinit {
        sem_destroy(self.raw)
        self.raw.deallocate()
    }
    func signal() { sem_post(self.raw) }
    func wait() { while sem_wait(self.raw) != 0 {} }
}

/// Starts a detached raw pthread running `body` (the baseline for thread start latency).
func detachRawPthread(_ body: @escaping @Sendable () -> Void) {
    final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { self.body = b } }
    var attr = pthread_attr_t()
    pthread_attr_init(&attr)
    pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    let err = pthread_create(&thread, &attr, { raw in
        Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, context)
    precondition(err == 0, "pthread_create failed: \(err)")
    pthread_attr_destroy(&attr)
}

/// `n` hand-overs, each waited for on `back` before the next: `handOver(i)` must get `back` signalled once, from
/// wherever the peer runs the work. Only the loop is measured. The same loop for every peer and waiter, so rows
/// differ only in the hand-over.
@inline(__always)
func measureHandOvers<W: WaitingSemaphore>(
    _ benchmark: Benchmark, _ n: Int, waitingOn back: W, _ handOver: (Int) -> Void
) {
    benchmark.startMeasurement()
    for i in 0..<n {
        handOver(i)
        back.wait()
    }
    benchmark.stopMeasurement()
}
