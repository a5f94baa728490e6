import Benchmark
import NIOPosix
import Spindle

/// From async code: hand blocking work to a pool and await its result, one at a time.
func registerAsyncBenchmarks() {
    let trips = 10_000
    let config = scenario(iterations: 5)

    Benchmark("async round trip ×\(trips): Spindle queue.run", configuration: config) { benchmark in
        let queue = SpindleOperationQueue()
        benchmark.startMeasurement()
        var sum = 0
        for i in 0..<trips { sum &+= try await queue.run { i } }
        benchmark.stopMeasurement()
        blackHole(sum)
    }
    Benchmark("async round trip ×\(trips): Task.detached", configuration: config) { benchmark in
        benchmark.startMeasurement()
        var sum = 0
        for i in 0..<trips { sum &+= await Task.detached { i }.value }
        benchmark.stopMeasurement()
        blackHole(sum)
    }
    Benchmark("async round trip ×\(trips): TaskGroup (one child)", configuration: config) { benchmark in
        benchmark.startMeasurement()
        var sum = 0
        for i in 0..<trips {
            sum &+= await withTaskGroup(of: Int.self) { group in
                group.addTask { i }
                return await group.next()!
            }
        }
        benchmark.stopMeasurement()
        blackHole(sum)
    }
    Benchmark("async round trip ×\(trips): NIOThreadPool.runIfActive", configuration: config) { benchmark in
        let pool = NIOThreadPool(numberOfThreads: processorCount)
        pool.start()
        benchmark.startMeasurement()
        var sum = 0
        for i in 0..<trips { sum &+= try await pool.runIfActive { i } }
        benchmark.stopMeasurement()
        blackHole(sum)
        try! await pool.shutdownGracefully()
    }
}
