// Paced and bursty load: what a peer costs, and how fast it reacts, when work arrives at a steady pace instead of
// as fast as it can be added.
//
// - Load regime: one thread (the benchmark's) hands one empty item to the peer every 50 µs, 500 µs or 5 ms, sleeping
//   to absolute deadlines in between (timer slack 1 ns); the bursty load hands over 64 items every 2 ms. Each peer
//   is built fresh for a run and warmed up first (8 items handed over and waited for), so thread creation is not
//   counted. About 0.5 s per run, 3 runs per benchmark. The harness is the `PacedLoad` target (`runPacedLoad`),
//   shared with `spindle-paced`.
// - One thread short: the benchmark's thread is one of libdispatch's default-QoS pool (package-benchmark calls
//   benchmarks from Swift concurrency), so here `DispatchQueue.global()` and Foundation's `OperationQueue` have one
//   worker thread fewer than CPUs (one, on 2 CPUs) while Spindle's queue has its default width. At light load that
//   favours them (no second worker to wake). `swift run -c release spindle-paced` measures the same loads from a
//   plain thread of its own process, where every peer has all its threads: issue 17's targets are judged there
//   (`BENCHMARKS.md`, "The suite's libdispatch runs one thread short").
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
import PacedLoad
import Spindle
import Synchronization

func registerPacedBenchmarks() {
    let config = pacedScenario()
    let ms = 1_000_000, us = 1_000
    let paces = [PacedLoad.steady(every: 50 * us), .steady(every: 500 * us), .steady(every: 5 * ms, minimum: 100)]
    // The queue peers of the sweep (Foundation's OperationQueue is in the paced rows only), and the floor: the
    // item run inline by the pacing thread (no hand-off), whose CPU per item is the pacing thread's own share.
    let queuePeers: [(String, (StartStamps) -> PacedTarget)] = [
        ("Spindle", QueuePeers.spindle),
        ("DispatchQueue.global", QueuePeers.dispatchGlobal),
        ("NIOThreadPool", QueuePeers.nioPool),
        ("no hand-off (inline on the pacing thread)", QueuePeers.inline),
    ]

    // Queues: one empty operation per item.
    let queueLoads = paces.map { ("paced queue add, 1 per \($0.periodLabel)", $0) }
        + [("bursty queue add, 64 per 2 ms", PacedLoad(period: 2 * ms, burst: 64, ops: 64 * 250))]
    for (scenario, load) in queueLoads {
        for (peer, make) in queuePeers + [("Foundation OperationQueue", QueuePeers.foundation)] {
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

private func spindleQueueWithTimeoutTarget(_ stamps: StartStamps) -> PacedTarget {
    let queue = SpindleOperationQueue()
    return PacedTarget(submit: { i in
        let operation = SpindleBlockOperation { stamps.stamp(i) }
        operation.cancel(after: .seconds(1))
        try! queue.addOperation(operation)
    })
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

/// One iteration of a paced benchmark (`runPacedLoad`, on the benchmark's thread), recording its metrics.
func runPaced(_ benchmark: Benchmark, _ load: PacedLoad, _ make: (StartStamps) -> PacedTarget) {
    let result = runPacedLoad(load, make, begin: { benchmark.startMeasurement() },
                              end: { benchmark.stopMeasurement() })
    benchmark.measurement(pacedCPUPerOp, result.cpuPerOp)
    benchmark.measurement(pacedLatencyP50, result.startP50)
    benchmark.measurement(pacedLatencyP99, result.startP99)
}
