import Benchmark
import Dispatch
import Foundation
import NIOPosix
import Spindle

/// Empty work items added one at a time from one thread, then waited for: the cost of the queue itself.
func registerThroughputBenchmarks() {
    let n = 1_000_000
    let fast = scenario(iterations: 8)
    let slow = scenario(iterations: 2, seconds: 10)  // Foundation needs seconds per iteration

    // Width = CPUs.
    Benchmark("empty ops, width CPUs ×\(n): Spindle", configuration: fast) { benchmark in
        let queue = SpindleOperationQueue()
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }
    Benchmark("empty ops, width CPUs ×\(n): Foundation OperationQueue", configuration: slow) { benchmark in
        let queue = OperationQueue()
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }
    Benchmark("empty ops, width CPUs ×\(n): DispatchQueue.global", configuration: fast) { benchmark in
        let queue = DispatchQueue.global()
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.async { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }
    Benchmark("empty ops, width CPUs ×\(n): NIOThreadPool", configuration: fast) { benchmark in
        let pool = NIOThreadPool(numberOfThreads: processorCount)
        pool.start()
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { pool.submit { _ in counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
        try! pool.syncShutdownGracefully()
    }

    // Width 1.
    Benchmark("empty ops, width 1 ×\(n): Spindle", configuration: fast) { benchmark in
        let queue = try! SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }
    Benchmark("empty ops, width 1 ×\(n): Foundation OperationQueue", configuration: slow) { benchmark in
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.addOperation { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }
    Benchmark("empty ops, width 1 ×\(n): DispatchQueue serial", configuration: fast) { benchmark in
        let queue = DispatchQueue(label: "serial")
        let counter = CompletionCounter(target: n)
        benchmark.startMeasurement()
        for _ in 0..<n { queue.async { counter.complete() } }
        counter.wait()
        benchmark.stopMeasurement()
    }

    // A batch: built first, then added at once and waited for.
    let batch = 100_000
    Benchmark("batch add and wait ×\(batch): Spindle", configuration: fast) { benchmark in
        let queue = SpindleOperationQueue()
        let ops = (0..<batch).map { _ in SpindleBlockOperation {} }
        benchmark.startMeasurement()
        try! queue.addOperations(ops, waitUntilFinished: true)
        benchmark.stopMeasurement()
    }
    Benchmark("batch add and wait ×\(batch): Foundation OperationQueue", configuration: slow) { benchmark in
        let queue = OperationQueue()
        let ops = (0..<batch).map { _ in BlockOperation {} }
        benchmark.startMeasurement()
        queue.addOperations(ops, waitUntilFinished: true)
        benchmark.stopMeasurement()
    }
}
