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

    /// Spindle's rows: the same waiter as the peers, and Spindle's own ("end to end").
    func spindleRoundTrip<W: WaitingSemaphore>(_ label: String, _ makeWaiter: @escaping @Sendable () -> W) {
        Benchmark("submit→run→signal round trip ×\(trips): \(label)", configuration: config) { benchmark in
            let queue = SpindleOperationQueue()
            let back = makeWaiter()
            measureHandOvers(benchmark, trips, waitingOn: back) { _ in queue.addOperation { back.signalOne() } }
        }
    }
    spindleRoundTrip("Spindle") { DispatchSemaphore(value: 0) }
    spindleRoundTrip("Spindle end to end (SpindleSemaphore)") { try! SpindleSemaphore(value: 0) }
    Benchmark("submit→run→signal round trip ×\(trips): Foundation OperationQueue", configuration: config) { benchmark in
        let queue = OperationQueue()
        let back = DispatchSemaphore(value: 0)
        measureHandOvers(benchmark, trips, waitingOn: back) { _ in queue.addOperation { back.signal() } }
    }
    Benchmark("submit→run→signal round trip ×\(trips): DispatchQueue.global", configuration: config) { benchmark in
        let queue = DispatchQueue.global()
        let back = DispatchSemaphore(value: 0)
        measureHandOvers(benchmark, trips, waitingOn: back) { _ in queue.async { back.signal() } }
    }
    Benchmark("submit→run→signal round trip ×\(trips): NIOThreadPool", configuration: config) { benchmark in
        let pool = NIOThreadPool(numberOfThreads: processorCount)
        pool.start()
        let back = DispatchSemaphore(value: 0)
        measureHandOvers(benchmark, trips, waitingOn: back) { _ in pool.submit { _ in back.signal() } }
        try! pool.syncShutdownGracefully()
    }

    // A concurrent operation's start: from `start()` to its detached thread running.
    let starts = 2_000
    func spindleStart<W: WaitingSemaphore>(_ label: String, _ makeWaiter: @escaping @Sendable () -> W) {
        Benchmark("concurrent op start latency ×\(starts): \(label)", configuration: config) { benchmark in
            let back = makeWaiter()
            measureHandOvers(benchmark, starts, waitingOn: back) { _ in try! SignallingOperation(back).start() }
        }
    }
    spindleStart("Spindle") { DispatchSemaphore(value: 0) }
    spindleStart("Spindle end to end (SpindleSemaphore)") { try! SpindleSemaphore(value: 0) }
    Benchmark("concurrent op start latency ×\(starts): raw pthread (detached)", configuration: config) { benchmark in
        let back = DispatchSemaphore(value: 0)
        measureHandOvers(benchmark, starts, waitingOn: back) { _ in detachRawPthread { back.signal() } }
    }
    Benchmark("concurrent op start latency ×\(starts): Foundation Thread.detachNewThread", configuration: config) {
        benchmark in
        let back = DispatchSemaphore(value: 0)
        measureHandOvers(benchmark, starts, waitingOn: back) { _ in Thread.detachNewThread { back.signal() } }
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
