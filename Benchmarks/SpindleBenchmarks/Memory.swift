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
        let queue = try! SpindleOperationQueue()
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

    // CPU the process spends in the 10 ms after a queue drained (its workers should spin briefly, then park).
    let idle = scenario(iterations: 10, metrics: [.wallClock, .throughput, .cpuTotal])
    Benchmark("idle CPU in 10 ms after draining ×1: Spindle", configuration: idle) { benchmark in
        let queue = try! SpindleOperationQueue()
        for _ in 0..<10_000 { queue.addOperation {} }
        try! queue.waitUntilAllOperationsAreFinished()
        benchmark.startMeasurement()
        usleep(10_000)
        benchmark.stopMeasurement()
    }
    Benchmark("idle CPU in 10 ms after draining ×1: DispatchQueue.global", configuration: idle) { benchmark in
        let group = DispatchGroup()
        for _ in 0..<10_000 { DispatchQueue.global().async(group: group) {} }
        group.wait()
        benchmark.startMeasurement()
        usleep(10_000)
        benchmark.stopMeasurement()
    }
}
