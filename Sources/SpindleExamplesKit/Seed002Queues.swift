import Spindle

// Seed 002, "Concurrency Programming Guide", chapter 3 "Operation queues": the snippets about running operations
// in queues (3.9): adding, waiting, suspending and resuming.

/// 3.9.4: an operation that tries to wait for itself and for its own queue; Spindle reports both instead of
/// deadlocking.
final class SelfWaitingOperation: SpindleOperation, @unchecked Sendable {
    let out: any ExampleOutput

    init(output: any ExampleOutput) {
        self.out = output
        super.init()
        self.name = "self-waiting"
    }

    override func main() throws {
        do {
            try self.waitUntilFinished()
        } catch {
            self.out.line("waitUntilFinished() in its own main: \(error)")
        }
        do {
            try SpindleOperationQueue.current?.waitUntilAllOperationsAreFinished()
        } catch {
            self.out.line("waitUntilAllOperationsAreFinished() on its own queue: \(error)")
        }
    }
}

extension SpindleExamples {
    /// 3.9.1: `addOperation`, `addOperations(_:waitUntilFinished:)` (waits for those operations only) and
    /// `addOperation { }`; a batch with a bad operation adds nothing.
    static func addOperations(_ out: any ExampleOutput) throws {
        let aQueue = try SpindleOperationQueue(name: "aQueue", maxConcurrentOperationCount: 2)
        let release = try SpindleSemaphore(value: 0)
        let anOp = SpindleBlockOperation {
            out.line("anOp: long job started")
            _ = release.wait(timeout: .seconds(10))
            out.line("anOp: long job done")
        }
        let anArrayOfOps = (1...3).map { i in SpindleBlockOperation { out.line("batch operation \(i)") } }

        try aQueue.addOperation(anOp)  // Add a single operation
        try aQueue.addOperations(anArrayOfOps, waitUntilFinished: true)  // Add multiple operations, wait for them
        out.line("addOperations(_:waitUntilFinished: true) returned; anOp finished: \(anOp.isFinished)")
        aQueue.addOperation {
            // Do something.
            out.line("a block added with addOperation { }")
        }
        release.signal()
        try aQueue.waitUntilAllOperationsAreFinished()

        let fresh = SpindleBlockOperation { out.line("fresh: runs once added on its own") }
        do {
            try aQueue.addOperations([fresh, anOp])  // anOp has finished: the whole batch is refused
        } catch {
            out.line("a batch with a finished operation is refused: \(error); operationCount = \(aQueue.operationCount)")
        }
        try aQueue.addOperation(fresh)  // nothing was added, so fresh can still be added
        try fresh.waitUntilFinished()
    }

    /// 3.9.4: waiting for one operation from another thread, for the whole queue, with a timeout; waiting on
    /// yourself throws.
    static func waiting(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue(name: "work")
        let op = SpindleBlockOperation {
            simulateWork(milliseconds: 50)
            out.line("op: work done")
        }
        try queue.addOperation(op)
        // Wait on a secondary thread, not on the thread that must stay responsive.
        let waiter = try SpindleThread.spawnJoinable(name: "waiter") {
            do {
                try op.waitUntilFinished()
                out.line("waiter thread: op finished = \(op.isFinished)")
            } catch {
                out.line("waiter thread: \(error)")
            }
        }
        try waiter.join()

        try queue.addOperation(SelfWaitingOperation(output: out))
        try queue.waitUntilAllOperationsAreFinished()
        out.line("waitUntilAllOperationsAreFinished returned; operationCount = \(queue.operationCount)")

        let neverStarted = SpindleBlockOperation {}
        let finished = try neverStarted.waitUntilFinished(timeout: .milliseconds(50))
        out.line("waitUntilFinished(timeout: 50 ms) on an operation nobody runs: \(finished)")
    }

    /// 3.9.5: suspending a queue lets the running operation finish but starts nothing new until it is resumed.
    static func suspendResume(_ out: any ExampleOutput) throws {
        let queue = try SpindleOperationQueue(name: "serial", maxConcurrentOperationCount: 1)
        let aRunning = try SpindleSemaphore(value: 0)
        let release = try SpindleSemaphore(value: 0)
        let a = SpindleBlockOperation {
            out.line("A starts")
            aRunning.signal()
            _ = release.wait(timeout: .seconds(10))
            out.line("A ends")
        }
        let b = SpindleBlockOperation { out.line("B runs") }
        try queue.addOperations([a, b])
        try expectSignal(aRunning, "A to start")
        queue.isSuspended = true
        out.line("queue suspended while A runs")
        release.signal()
        try a.waitUntilFinished()
        let bRan = try b.waitUntilFinished(timeout: .milliseconds(100))
        out.line("A finished; B ran while the queue was suspended: \(bRan)")
        out.line("resuming the queue")  // before: B may start the moment the flag clears
        queue.isSuspended = false
        try queue.waitUntilAllOperationsAreFinished()
    }
}
