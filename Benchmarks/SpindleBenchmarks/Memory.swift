import Benchmark
import Dispatch
import Foundation
import Glibc
import Spindle

/// Memory for work that waits, and CPU used by an idle queue after it drains.
func registerMemoryBenchmarks() {
    let n = 1_000_000
    let config = scenario(iterations: 3, seconds: 20, metrics: [.wallClock, .throughput, .peakMemoryResident, .mallocCountTotal])

    // N operations added to a suspended queue (peak resident memory is the figure), then cancelled and drained.
    Benchmark("1M ops waiting in a suspended queue ×\(n): Spindle", configuration: config) { benchmark in
        let queue = SpindleOperationQueue()
        queue.isSuspended = true
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation {} }
        benchmark.stopMeasurement()
        queue.cancelAllOperations()
        queue.isSuspended = false
        try! queue.waitUntilAllOperationsAreFinished()
    }
    Benchmark("1M ops waiting in a suspended queue ×\(n): Foundation OperationQueue", configuration: config) {
        benchmark in
        let queue = OperationQueue()
        queue.isSuspended = true
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation {} }
        benchmark.stopMeasurement()
        queue.cancelAllOperations()
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
    }
    Benchmark("1M ops waiting in a suspended queue ×\(n): DispatchQueue (suspended)", configuration: config) {
        benchmark in
        let queue = DispatchQueue(label: "suspended")
        queue.suspend()
        let group = DispatchGroup()
        benchmark.startMeasurement()
        for _ in 0..<n { queue.async(group: group) {} }
        benchmark.stopMeasurement()
        queue.resume()
        group.wait()
    }

    // CPU spent in the 10 ms that follow the first millisecond after a queue drained (its workers should spin
    // briefly, then park), from clocks that count nanoseconds, not scheduler ticks: the whole process's
    // (CLOCK_PROCESS_CPUTIME_ID, which includes the harness's own threads) and, for Spindle, its worker threads'
    // alone (each `spindle.w*` thread's CPU clock).
    let processCPU = BenchmarkMetric.custom("Idle process CPU (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    let workerCPU = BenchmarkMetric.custom("Idle worker CPU (ns)", polarity: .prefersSmaller, useScalingFactor: false)
    let idle = scenario(iterations: 10, metrics: [.wallClock, .cpuTotal, processCPU, workerCPU])
    Benchmark("idle CPU in 10 ms after draining ×1: Spindle", configuration: idle) { benchmark in
        let queue = SpindleOperationQueue()
        for _ in 0..<10_000 { queue.addOperation {} }
        try! queue.waitUntilAllOperationsAreFinished()
        measureIdleCPU(benchmark, processCPU, workerCPU, workers: "spindle.w")
        withExtendedLifetime(queue) {}
    }
    Benchmark("idle CPU in 10 ms after draining ×1: DispatchQueue.global", configuration: idle) { benchmark in
        let group = DispatchGroup()
        for _ in 0..<10_000 { DispatchQueue.global().async(group: group) {} }
        group.wait()
        measureIdleCPU(benchmark, processCPU, nil, workers: nil)
    }
}

/// Lets the first millisecond after draining pass (the target allows it), then records the CPU time of the process
/// and of the threads whose name starts with `workers` over the next 10 ms.
private func measureIdleCPU(
    _ benchmark: Benchmark, _ processMetric: BenchmarkMetric, _ workerMetric: BenchmarkMetric?, workers: String?
) {
    usleep(1_000)
    let threads = workers.map(threadCPUClocks(named:)) ?? []
    let process0 = cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
    let workers0 = threads.reduce(0) { $0 + cpuNanoseconds($1) }
    // The workers ran the drained operations: a figure of 0 must mean "parked", not "clocks not found".
    precondition(workers == nil || workers0 > 0, "no CPU clock found for the '\(workers!)' threads")
    benchmark.startMeasurement()
    usleep(10_000)
    benchmark.stopMeasurement()
    let workers1 = threads.reduce(0) { $0 + cpuNanoseconds($1) }
    benchmark.measurement(processMetric, cpuNanoseconds(CLOCK_PROCESS_CPUTIME_ID) - process0)
    if let workerMetric { benchmark.measurement(workerMetric, workers1 - workers0) }
}

private func cpuNanoseconds(_ clock: clockid_t) -> Int {
    var now = timespec()
    guard clock_gettime(clock, &now) == 0 else { return 0 }
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}

/// The CPU clocks of this process's threads whose name starts with `prefix`. Linux encodes a thread's CPU clock
/// as `(~tid << 3) | 6` (per-thread, scheduler-accounted: nanoseconds).
private func threadCPUClocks(named prefix: String) -> [clockid_t] {
    let tids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tids.compactMap { tid -> clockid_t? in
        guard let id = Int32(tid),
            let name = try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8),
            name.hasPrefix(prefix)
        else { return nil }
        return (~id << 3) | 6
    }
}
