// Paced and bursty load: what a peer costs, and how fast it reacts, when work arrives at a steady pace instead of
// as fast as it can be added.
//
// - Load regime: one thread (the benchmark's) hands one empty item to the peer every 50 µs, 500 µs or 5 ms, sleeping
//   to absolute deadlines in between (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, timer slack 1 ns); the
//   bursty load hands over 64 items every 2 ms. Each peer is built fresh for a run and warmed up first (8 items
//   handed over and waited for), so thread creation is not counted. About 0.5 s per run, 3 runs per benchmark. A
//   pacing thread that wakes late hands over what it owes at once, without sleeping, so the average pace holds.
// - Peers: queues (Spindle's default width, `DispatchQueue.global()`, `NIOThreadPool` with one thread per CPU,
//   Foundation's `OperationQueue` at its default width), a perform to a thread in its run loop (Spindle, Foundation
//   perform + wake), a message to a loop thread (SpindlePort; for Foundation the timer firing now of
//   RunLoops.swift), and a semaphore hand-off to a thread waiting in a loop (SpindleSemaphore, DispatchSemaphore;
//   both waiting threads are SpindleThreads). Same pacing thread, same item body, same drain waiter for all.
// - Metrics (custom, nanoseconds; the harness is at the end of this file): "CPU per op" is the process's CPU clock
//   (`CLOCK_PROCESS_CPUTIME_ID`, nanosecond resolution, every thread: the pacing thread, the peer's threads, any
//   spinning) over the paced part, divided by the items; "Start latency p50/p99" are nearest-rank percentiles of
//   (monotonic stamp first thing in the item) − (monotonic stamp right before the hand-over), over the items of one
//   run. The table shows, per metric, the median of the runs. Wall clock ÷ items is the pace actually achieved.
//   `Benchmarks/report.py` prints these rows as a table of their own.
// - Floor: "no hand-off (inline on the pacing thread)" runs the item on the pacing thread itself; its CPU per op is
//   what the pacing thread costs (sleep, wake, stamps), the part of every other row that is not the peer's.
// - The sweep (names starting "sweep"): CPU per op and start latency of Spindle, libdispatch's global queue and
//   NIOThreadPool (and the floor) from 10 µs to 10 ms, for `Benchmarks/plot_paced.py`. Run it alone with
//   `--filter "sweep.*"`; leave it out of a full run with `--skip "sweep.*"`.
import Benchmark
import CoreFoundation
import Dispatch
import Foundation
import Glibc
import NIOPosix
import Spindle
import Synchronization

func registerPacedBenchmarks() {
    let config = pacedScenario()
    let ms = 1_000_000, us = 1_000
    let paces = [PacedLoad.steady(every: 50 * us), .steady(every: 500 * us), .steady(every: 5 * ms, minimum: 100)]
    // The queue peers of the sweep (Foundation's OperationQueue is in the paced rows only), and the floor: the
    // item run inline by the pacing thread (no hand-off), whose CPU per item is the pacing thread's own share.
    let queuePeers: [(String, (StartStamps) -> PacedTarget)] = [
        ("Spindle", spindleQueueTarget),
        ("DispatchQueue.global", dispatchGlobalTarget),
        ("NIOThreadPool", nioPoolTarget),
        ("no hand-off (inline on the pacing thread)", { stamps in PacedTarget(submit: { i in stamps.stamp(i) }) }),
    ]

    // Queues: one empty operation per item.
    let queueLoads = paces.map { ("paced queue add, 1 per \($0.periodLabel)", $0) }
        + [("bursty queue add, 64 per 2 ms", PacedLoad(period: 2 * ms, burst: 64, ops: 64 * 250))]
    for (scenario, load) in queueLoads {
        for (peer, make) in queuePeers + [("Foundation OperationQueue", foundationQueueTarget)] {
            Benchmark("\(scenario) ×\(load.ops): \(peer)", configuration: config) { runPaced($0, load, make) }
        }
    }

    // The cost of a timeout: the same operations, each cancelled after 1 s if still unfinished (an entry on the
    // process timer, removed when it finishes), against the rows above without one. No peer has per-item timeouts.
    for load in paces.dropFirst() {
        Benchmark("paced queue add with a 1 s timeout, 1 per \(load.periodLabel) ×\(load.ops): Spindle",
                  configuration: config) { runPaced($0, load, spindleQueueWithTimeoutTarget) }
    }

    // Run loops, ports and semaphores: one thread on the other side.
    let handOffs: [(String, [(String, (StartStamps) -> PacedTarget)])] = [
        ("paced run-loop perform", [("Spindle", spindlePerformTarget),
                                    ("Foundation RunLoop (perform + wake)", foundationPerformTarget)]),
        ("paced port message", [("Spindle", spindlePortTarget),
                                ("Foundation RunLoop (timer firing now)", foundationTimerTarget)]),
        ("paced semaphore hand-off", [
            ("Spindle SpindleSemaphore", { semaphoreTarget($0, try! SpindleSemaphore(value: 0)) }),
            ("DispatchSemaphore", { semaphoreTarget($0, DispatchSemaphore(value: 0)) }),
        ]),
    ]
    for (kind, peers) in handOffs {
        for load in paces {
            for (peer, make) in peers {
                Benchmark("\(kind), 1 per \(load.periodLabel) ×\(load.ops): \(peer)", configuration: config) {
                    runPaced($0, load, make)
                }
            }
        }
    }

    // The sweep, for the plot: shorter runs (about 0.3 s), paces from 10 µs to 10 ms.
    let sweep = [10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000].map {
        PacedLoad.steady(every: $0 * us, seconds: 0.3, minimum: 50, maximum: 20_000)
    }
    for load in sweep {
        for (peer, make) in queuePeers {
            Benchmark("sweep, queue add 1 per \(load.periodLabel) ×\(load.ops): \(peer)", configuration: config) {
                runPaced($0, load, make)
            }
        }
    }
}

// MARK: - Queues

private func spindleQueueTarget(_ stamps: StartStamps) -> PacedTarget {
    let queue = SpindleOperationQueue()
    return PacedTarget(submit: { i in queue.addOperation { stamps.stamp(i) } })
}

private func spindleQueueWithTimeoutTarget(_ stamps: StartStamps) -> PacedTarget {
    let queue = SpindleOperationQueue()
    return PacedTarget(submit: { i in
        let operation = SpindleBlockOperation { stamps.stamp(i) }
        operation.cancel(after: .seconds(1))
        try! queue.addOperation(operation)
    })
}

private func dispatchGlobalTarget(_ stamps: StartStamps) -> PacedTarget {
    let queue = DispatchQueue.global()
    return PacedTarget(submit: { i in queue.async { stamps.stamp(i) } })
}

/// As many threads as CPUs, like the suite's other NIOThreadPool rows.
private func nioPoolTarget(_ stamps: StartStamps) -> PacedTarget {
    let pool = NIOThreadPool(numberOfThreads: processorCount)
    pool.start()
    return PacedTarget(submit: { i in pool.submit { _ in stamps.stamp(i) } },
                       tearDown: { try! pool.syncShutdownGracefully() })
}

private func foundationQueueTarget(_ stamps: StartStamps) -> PacedTarget {
    let queue = OperationQueue()
    return PacedTarget(submit: { i in queue.addOperation { stamps.stamp(i) } })
}

// MARK: - Run loops and ports

private func spindlePerformTarget(_ stamps: StartStamps) -> PacedTarget {
    let loop = SpindleLoopThread { _ in }
    let runLoop = loop.runLoop!
    return PacedTarget(submit: { i in runLoop.perform { stamps.stamp(i) } }, tearDown: { loop.stop() })
}

/// Foundation's loop thread is one per process (RunLoops.swift): it is not rebuilt per run.
private func foundationPerformTarget(_ stamps: StartStamps) -> PacedTarget {
    let loop = FoundationLoopThread.shared
    let runLoop = loop.runLoop!, cfRunLoop = loop.cfRunLoop!
    return PacedTarget(submit: { i in
        runLoop.perform { stamps.stamp(i) }
        CFRunLoopWakeUp(cfRunLoop)
    })
}

private func spindlePortTarget(_ stamps: StartStamps) -> PacedTarget {
    let loop = SpindleLoopThread { i in stamps.stamp(i) }
    let port = loop.port
    return PacedTarget(submit: { i in try! port.send(i) }, tearDown: { loop.stop() })
}

/// Foundation has no port to a run loop on Linux; like the port round trip in RunLoops.swift, a timer set to fire
/// now is the message.
private func foundationTimerTarget(_ stamps: StartStamps) -> PacedTarget {
    let runLoop = FoundationLoopThread.shared.runLoop!
    return PacedTarget(submit: { i in
        runLoop.add(Timer(timeInterval: 0, repeats: false) { _ in stamps.stamp(i) }, forMode: .default)
    })
}

// MARK: - Semaphore hand-off

/// A thread that waits on `semaphore` in a loop, once per item; the pacing thread signals once per item.
private func semaphoreTarget(_ stamps: StartStamps, _ semaphore: some WaitingSemaphore) -> PacedTarget {
    let total = stamps.total
    let thread = try! SpindleThread.spawnJoinable(name: "paced-waiter") {
        for i in 0..<total {
            semaphore.wait()
            stamps.stamp(i)
        }
    }
    return PacedTarget(submit: { _ in semaphore.signalOne() }, tearDown: { try! thread.join() })
}

// MARK: - The harness: the same for every peer

/// The custom metrics of a paced run, in nanoseconds (units pinned to `.count` so the text output keeps every
/// digit instead of rounding to thousands).
let pacedCPUPerOp = BenchmarkMetric.custom("CPU per op (ns)", polarity: .prefersSmaller, useScalingFactor: false)
let pacedLatencyP50 = BenchmarkMetric.custom("Start latency p50 (ns)", polarity: .prefersSmaller,
                                             useScalingFactor: false)
let pacedLatencyP99 = BenchmarkMetric.custom("Start latency p99 (ns)", polarity: .prefersSmaller,
                                             useScalingFactor: false)

/// A paced scenario's configuration: no harness warm-up (each run warms its own peer up), `iterations` runs. The
/// wall clock covers the paced part only, so wall clock ÷ items is the pace actually achieved.
func pacedScenario(iterations: Int = 3) -> Benchmark.Configuration {
    let custom = [pacedCPUPerOp, pacedLatencyP50, pacedLatencyP99]
    return .init(metrics: [.wallClock] + custom, timeUnits: .microseconds,
                 units: Dictionary(uniqueKeysWithValues: custom.map { ($0, BenchmarkUnits.count) }),
                 warmupIterations: 0, maxDuration: .seconds(20), maxIterations: iterations)
}

/// A load: `burst` items every `period` nanoseconds, `ops` items in all (a multiple of `burst`).
struct PacedLoad {
    let period: Int
    let burst: Int
    let ops: Int

    /// One item every `period`, as many as fit in about `seconds` (at least `minimum`, at most `maximum`).
    static func steady(every period: Int, seconds: Double = 0.5, minimum: Int = 50, maximum: Int = .max) -> PacedLoad {
        PacedLoad(period: period, burst: 1, ops: min(maximum, max(minimum, Int(seconds * 1e9) / period)))
    }

    /// "50 µs", "2 ms".
    var periodLabel: String {
        self.period % 1_000_000 == 0 ? "\(self.period / 1_000_000) ms" : "\(self.period / 1_000) µs"
    }
}

/// One peer, set up fresh for a run. `submit(i)` hands item `i` over to it, and the item's first act, on whatever
/// thread runs it, is `stamps.stamp(i)`. `tearDown` runs after the measurement.
struct PacedTarget {
    let submit: (Int) -> Void
    var tearDown: () -> Void = {}
}

/// The stamps of one run, preallocated and touched before the run: `submitted[i]` is written by the pacing thread
/// right before it hands item `i` over, `started[i]` by the item itself. The first `warmup` items are the warm-up,
/// handed over without pacing and waited for before the paced part, so the peer's threads exist and have run.
final class StartStamps: @unchecked Sendable {
    let warmup: Int
    let total: Int
    let submitted: UnsafeMutablePointer<Int>
    let started: UnsafeMutablePointer<Int>
    private let done = Atomic<Int>(0)
    /// Signalled when the warm-up items have all started, and again when all items have: the same waiter for every
    /// peer.
    private let drained = DispatchSemaphore(value: 0)

    init(warmup: Int = 8, measured: Int) {
        self.warmup = warmup
        self.total = warmup + measured
        self.submitted = .allocate(capacity: self.total)
        self.submitted.initialize(repeating: 0, count: self.total)
        self.started = .allocate(capacity: self.total)
        self.started.initialize(repeating: 0, count: self.total)
    }

    deinit {
        self.submitted.deallocate()
        self.started.deallocate()
    }

    /// An item's first act: its start stamp, then the count that tells the pacing thread when all have started.
    @inline(__always) func stamp(_ i: Int) {
        self.started[i] = monotonicNanoseconds()
        let n = self.done.add(1, ordering: .acquiringAndReleasing).newValue
        if n == self.warmup || n == self.total { self.drained.signal() }
    }

    func waitDrained() { self.drained.wait() }

    /// Nearest-rank percentiles of submit→start over the measured items (call after the run has drained).
    func latencyPercentiles(_ ps: [Double]) -> [Int] {
        let sorted = (self.warmup..<self.total).map { self.started[$0] - self.submitted[$0] }.sorted()
        return ps.map { p in sorted[max(0, min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1))] }
    }
}

/// One iteration of a paced benchmark: builds the peer with `make`, warms it up, hands it `load.ops` items on the
/// load's schedule from this thread, waits for all to start, and records the metrics.
func runPaced(_ benchmark: Benchmark, _ load: PacedLoad, _ make: (StartStamps) -> PacedTarget) {
    precondition(load.ops % load.burst == 0, "ops must be a multiple of the burst")
    let stamps = StartStamps(measured: load.ops)
    let target = make(stamps)
    for i in 0..<stamps.warmup {
        stamps.submitted[i] = monotonicNanoseconds()
        target.submit(i)
    }
    stamps.waitDrained()

    let slack = MinimalTimerSlack()
    benchmark.startMeasurement()
    let cpu0 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
    var deadline = monotonicNanoseconds()
    var i = stamps.warmup
    while i < stamps.total {
        deadline += load.period
        if monotonicNanoseconds() < deadline { sleepUntil(deadline) }  // behind schedule: catch up without a call
        for _ in 0..<load.burst {
            stamps.submitted[i] = monotonicNanoseconds()
            target.submit(i)
            i += 1
        }
    }
    stamps.waitDrained()
    let cpu1 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
    benchmark.stopMeasurement()
    slack.restore()
    target.tearDown()

    let latency = stamps.latencyPercentiles([0.50, 0.99])
    benchmark.measurement(pacedCPUPerOp, (cpu1 - cpu0) / load.ops)
    benchmark.measurement(pacedLatencyP50, latency[0])
    benchmark.measurement(pacedLatencyP99, latency[1])
}

@inline(__always) func monotonicNanoseconds() -> Int { clockNanoseconds(CLOCK_MONOTONIC) }

@inline(__always) func clockNanoseconds(_ clock: clockid_t) -> Int {
    var now = timespec()
    clock_gettime(clock, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}

/// Sleeps until `deadline` on the monotonic clock (absolute, so lateness does not add up over a run).
func sleepUntil(_ deadline: Int) {
    var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

/// Sets the calling thread's timer slack to 1 ns for the paced part (the default, 50 µs, lets the kernel end a
/// sleep up to 50 µs late, as much as the fastest pace), and puts the old value back. Only the pacing thread's
/// sleeps are affected, the same for every peer. `prctl` is variadic, so Swift does not import it: it is called
/// through a fixed prototype with integer arguments, which is how the kernel reads them.
struct MinimalTimerSlack {
    private typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    private static let setTimerSlack: Int32 = 29  // PR_SET_TIMERSLACK
    private static let getTimerSlack: Int32 = 30  // PR_GET_TIMERSLACK
    private let prctl: Prctl?
    private let previous: Int32

    init() {
        self.prctl = dlsym(nil, "prctl").map { unsafeBitCast($0, to: Prctl.self) }
        self.previous = self.prctl?(Self.getTimerSlack, 0, 0, 0, 0) ?? -1
        if self.previous > 0 { _ = self.prctl?(Self.setTimerSlack, 1, 0, 0, 0) }
    }

    func restore() {
        if self.previous > 0 { _ = self.prctl?(Self.setTimerSlack, UInt(self.previous), 0, 0, 0) }
    }
}
