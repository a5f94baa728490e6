import Benchmark
import Dispatch
import Foundation
import NIOPosix
import Spindle

/// One thing at a time, each waited for: submit → run → signal back; a concurrent operation's start; a block
/// operation with many blocks. These measure wakeups, not throughput. In the round trips and starts, every main row
/// waits with a `DispatchSemaphore` (the same waiter for Spindle and its peers, so the rows compare the
/// hand-over); the "Spindle end to end" rows wait with Spindle's own semaphore.
func registerLatencyBenchmarks() {
    let trips = 20_000
    let config = scenario(iterations: 5)

    Benchmark("submit→run→signal round trip ×\(trips): Spindle", configuration: config) { benchmark in
        let queue = try! SpindleOperationQueue()
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            queue.addOperation { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("submit→run→signal round trip ×\(trips): Spindle end to end (SpindleSemaphore)", configuration: config) {
        benchmark in
        let queue = try! SpindleOperationQueue()
        let back = try! SpindleSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            queue.addOperation { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("submit→run→signal round trip ×\(trips): Foundation OperationQueue", configuration: config) { benchmark in
        let queue = OperationQueue()
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            queue.addOperation { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("submit→run→signal round trip ×\(trips): DispatchQueue.global", configuration: config) { benchmark in
        let queue = DispatchQueue.global()
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            queue.async { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("submit→run→signal round trip ×\(trips): NIOThreadPool", configuration: config) { benchmark in
        let pool = NIOThreadPool(numberOfThreads: processorCount)
        pool.start()
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<trips {
            pool.submit { _ in back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
        try! pool.syncShutdownGracefully()
    }

    // A concurrent operation's start: from `start()` to its detached thread running.
    let starts = 2_000
    Benchmark("concurrent op start latency ×\(starts): Spindle", configuration: config) { benchmark in
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<starts {
            let op = SignallingOperation(back)
            try! op.start()
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("concurrent op start latency ×\(starts): Spindle end to end (SpindleSemaphore)", configuration: config) {
        benchmark in
        let back = try! SpindleSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<starts {
            let op = SignallingOperation(back)
            try! op.start()
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("concurrent op start latency ×\(starts): raw pthread (detached)", configuration: config) { benchmark in
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<starts {
            detachRawPthread { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("concurrent op start latency ×\(starts): Foundation Thread.detachNewThread", configuration: config) {
        benchmark in
        let back = DispatchSemaphore(value: 0)
        benchmark.startMeasurement()
        for _ in 0..<starts {
            Thread.detachNewThread { back.signal() }
            back.wait()
        }
        benchmark.stopMeasurement()
    }

    // A block operation with 100 blocks (they run concurrently), started by hand.
    let blockOps = 200
    Benchmark("block op with 100 blocks ×\(blockOps): Spindle", configuration: config) { benchmark in
        benchmark.startMeasurement()
        for _ in 0..<blockOps {
            let op = SpindleBlockOperation()
            for _ in 0..<100 { try! op.addExecutionBlock {} }
            try! op.start()
        }
        benchmark.stopMeasurement()
    }
    Benchmark("block op with 100 blocks ×\(blockOps): Foundation BlockOperation", configuration: config) { benchmark in
        benchmark.startMeasurement()
        for _ in 0..<blockOps {
            let op = BlockOperation()
            for _ in 0..<100 { op.addExecutionBlock {} }
            op.start()
        }
        benchmark.stopMeasurement()
    }
}

/// The seeds' concurrent operation, reduced to its start: `main` runs on the detached thread and signals `back`.
final class SignallingOperation<Back: WaitingSemaphore>: SpindleConcurrentOperation, @unchecked Sendable {
    private let back: Back
    init(_ back: Back) {
        self.back = back
        super.init()
    }
    override func main() throws {
        self.back.signalOne()
        try self.finish()
    }
}
