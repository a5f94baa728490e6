// Twenty queues at light load: what sharing threads saves. Issue 22's measurement.
//
// - Load regime: one pacing thread (the one of Paced.swift, same harness and metrics) hands one empty operation
//   every 500 µs or 5 ms, or bursts of 64 every 2 ms, to twenty queues in turn (item i to queue i mod 20). Each
//   queue has the default width. About 0.5 s per run, 3 runs.
// - Peers: twenty `SpindleOperationQueue`s with threads of their own (the default); twenty on one
//   `SpindleThreadPool` (as many threads as CPUs); twenty serial `DispatchQueue`s targeting the global queue
//   (libdispatch's way to share threads).
// - Metrics: CPU per op and start latency p50/p99 as in Paced.swift, and "Threads": the process's threads
//   (/proc/self/task) once the run has drained, minus those before the peer was made: the threads the peer keeps.
import Benchmark
import Dispatch
import Glibc
import PacedLoad
import Spindle

let poolThreads = BenchmarkMetric.custom("Threads", polarity: .prefersSmaller, useScalingFactor: false)

func registerPoolBenchmarks() {
    var config = pacedScenario()
    config.metrics.append(poolThreads)
    config.units[poolThreads] = .count
    let ms = 1_000_000, us = 1_000
    let loads: [(String, PacedLoad)] = [
        ("1 per 500 µs", .steady(every: 500 * us)),
        ("1 per 5 ms", .steady(every: 5 * ms, minimum: 100)),
        ("64 per 2 ms", PacedLoad(period: 2 * ms, burst: 64, ops: 64 * 250)),
    ]
    let peers: [(String, (Benchmark, StartStamps) -> PacedTarget)] = [
        ("Spindle, own threads", { b, s in twentyQueues(b, s, pool: nil) }),
        ("Spindle, one SpindleThreadPool", { b, s in twentyQueues(b, s, pool: SpindleThreadPool(name: "bench")) }),
        ("20 serial DispatchQueues → global", twentyDispatchQueues),
    ]
    for (label, load) in loads {
        for (peer, make) in peers {
            Benchmark("20 queues, \(label) ×\(load.ops): \(peer)", configuration: config) { benchmark in
                runPaced(benchmark, load) { stamps in make(benchmark, stamps) }
            }
        }
    }
}

/// The threads of this process now.
private func processThreads() -> Int {
    guard let dir = opendir("/proc/self/task") else { return 0 }
    defer { closedir(dir) }
    var n = 0
    while let entry = readdir(dir) {
        if entry.pointee.d_name.0 != UInt8(ascii: ".") { n += 1 }
    }
    return n
}

private func twentyQueues(_ benchmark: Benchmark, _ stamps: StartStamps, pool: SpindleThreadPool?) -> PacedTarget {
    let before = processThreads()
    let queues = (0..<20).map { i in
        if let pool { SpindleOperationQueue(name: "bench \(i)", pool: pool) } else { SpindleOperationQueue(name: "bench \(i)") }
    }
    return PacedTarget(submit: { i in queues[i % 20].addOperation { stamps.stamp(i) } },
                       tearDown: { benchmark.measurement(poolThreads, processThreads() - before) })
}

private func twentyDispatchQueues(_ benchmark: Benchmark, _ stamps: StartStamps) -> PacedTarget {
    let before = processThreads()
    let queues = (0..<20).map { DispatchQueue(label: "bench \($0)", target: .global()) }
    return PacedTarget(submit: { i in queues[i % 20].async { stamps.stamp(i) } },
                       tearDown: { benchmark.measurement(poolThreads, processThreads() - before) })
}
