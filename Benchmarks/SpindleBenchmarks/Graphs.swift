import Benchmark
import Foundation
import Spindle

/// Dependency graphs and cancellation at scale. Foundation's dependency handling is quadratic, so its chain and
/// fan-out run with fewer operations (the names say how many); compare per-operation figures.
func registerGraphBenchmarks() {
    let config = scenario(iterations: 5)
    let slow = scenario(iterations: 2, seconds: 20)

    func spindleChain(_ n: Int) {
        let queue = SpindleOperationQueue()
        var ops: [SpindleOperation] = []
        ops.reserveCapacity(n)
        for i in 0..<n {
            let op = SpindleBlockOperation {}
            if i > 0 { try! op.addDependency(ops[i - 1]) }
            ops.append(op)
        }
        try! queue.addOperations(ops, waitUntilFinished: false)
        try! ops[n - 1].waitUntilFinished()
    }
    func foundationChain(_ n: Int) {
        let queue = OperationQueue()
        var ops: [Operation] = []
        ops.reserveCapacity(n)
        for i in 0..<n {
            let op = BlockOperation {}
            if i > 0 { op.addDependency(ops[i - 1]) }
            ops.append(op)
        }
        queue.addOperations(ops, waitUntilFinished: false)
        ops[n - 1].waitUntilFinished()
    }
    Benchmark("dependency chain ×100000: Spindle", configuration: config) { benchmark in
        benchmark.startMeasurement()
        spindleChain(100_000)
        benchmark.stopMeasurement()
    }
    Benchmark("dependency chain ×10000: Foundation OperationQueue", configuration: slow) { benchmark in
        benchmark.startMeasurement()
        foundationChain(10_000)
        benchmark.stopMeasurement()
    }

    // Fan-in: one operation depending on N others.
    Benchmark("fan-in ×100000: Spindle", configuration: config) { benchmark in
        benchmark.startMeasurement()
        let queue = SpindleOperationQueue()
        let sink = SpindleBlockOperation {}
        var ops: [SpindleOperation] = []
        ops.reserveCapacity(100_001)
        for _ in 0..<100_000 {
            let op = SpindleBlockOperation {}
            try! sink.addDependency(op)
            ops.append(op)
        }
        ops.append(sink)
        try! queue.addOperations(ops, waitUntilFinished: false)
        try! sink.waitUntilFinished()
        benchmark.stopMeasurement()
    }
    Benchmark("fan-in ×100000: Foundation OperationQueue", configuration: slow) { benchmark in
        benchmark.startMeasurement()
        let queue = OperationQueue()
        let sink = BlockOperation {}
        var ops: [Operation] = []
        ops.reserveCapacity(100_001)
        for _ in 0..<100_000 {
            let op = BlockOperation {}
            sink.addDependency(op)
            ops.append(op)
        }
        ops.append(sink)
        queue.addOperations(ops, waitUntilFinished: false)
        sink.waitUntilFinished()
        benchmark.stopMeasurement()
    }

    // Fan-out: N operations depending on one.
    Benchmark("fan-out ×100000: Spindle", configuration: config) { benchmark in
        benchmark.startMeasurement()
        let queue = SpindleOperationQueue()
        let source = SpindleBlockOperation {}
        var ops: [SpindleOperation] = [source]
        ops.reserveCapacity(100_001)
        for _ in 0..<100_000 {
            let op = SpindleBlockOperation {}
            try! op.addDependency(source)
            ops.append(op)
        }
        try! queue.addOperations(ops, waitUntilFinished: true)
        benchmark.stopMeasurement()
    }
    Benchmark("fan-out ×10000: Foundation OperationQueue", configuration: slow) { benchmark in
        benchmark.startMeasurement()
        let queue = OperationQueue()
        let source = BlockOperation {}
        var ops: [Operation] = [source]
        for _ in 0..<10_000 {
            let op = BlockOperation {}
            op.addDependency(source)
            ops.append(op)
        }
        queue.addOperations(ops, waitUntilFinished: true)
        benchmark.stopMeasurement()
    }

    // Cancel-all: N operations waiting in a suspended queue, cancelled, then drained (none runs its block).
    Benchmark("cancel-all ×1000000: Spindle", configuration: config) { benchmark in
        let queue = SpindleOperationQueue()
        queue.isSuspended = true
        for _ in 0..<1_000_000 { queue.addOperation {} }
        benchmark.startMeasurement()
        queue.cancelAllOperations()
        queue.isSuspended = false
        try! queue.waitUntilAllOperationsAreFinished()
        benchmark.stopMeasurement()
    }
    Benchmark("cancel-all ×100000: Foundation OperationQueue", configuration: slow) { benchmark in
        let queue = OperationQueue()
        queue.isSuspended = true
        for _ in 0..<100_000 { queue.addOperation {} }
        benchmark.startMeasurement()
        queue.cancelAllOperations()
        queue.isSuspended = false
        queue.waitUntilAllOperationsAreFinished()
        benchmark.stopMeasurement()
    }
}
