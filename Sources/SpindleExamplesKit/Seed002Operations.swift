import Spindle

// Seed 002, "Concurrency Programming Guide", chapter 3 "Operation queues": the snippets about creating and
// configuring operations (3.3–3.6).

/// 3.3: the class whose method an invocation operation calls.
final class MyCustomClass {
    let out: any ExampleOutput

    init(output: any ExampleOutput) { self.out = output }

    func taskWithData(_ data: [Int]) -> SpindleInvocationOperation<Int> {
        let theOp = SpindleInvocationOperation(target: self, method: MyCustomClass.myTaskMethod, argument: data)
        return theOp
    }

    // This is the method that does the actual work of the task.
    func myTaskMethod(_ data: [Int]) -> Int {
        self.out.line("myTaskMethod(\(data)) on \(SpindleThread.current)")
        return data.reduce(0, +)
    }
}

/// 3.5.1 and 3.5.2: a non-concurrent operation with its data, which checks `isCancelled` before every step.
final class MyNonConcurrentOperation: SpindleOperation, @unchecked Sendable {
    let myData: String
    let out: any ExampleOutput
    /// Signalled after the first step.
    let firstStepDone = try! SpindleSemaphore(value: 0)

    init(data: String, output: any ExampleOutput) {
        self.myData = data
        self.out = output
        super.init()
        self.name = data
    }

    override func main() throws {
        var isDone = false
        var step = 0
        while !self.isCancelled && !isDone {
            // Do some work and set isDone to true when finished.
            step += 1
            self.out.line("\(self.myData): step \(step)")
            if step == 1 { self.firstStepDone.signal() }
            simulateWork(milliseconds: 20)
            isDone = step == 50
        }
        self.out.line("\(self.myData): \(self.isCancelled ? "saw the cancel, stopping" : "done") after step \(step)")
    }
}

extension SpindleExamples {
    /// 3.3: an invocation operation made by `taskWithData`, run on a queue; its typed result.
    static func taskWithData(_ out: any ExampleOutput) throws {
        let object = MyCustomClass(output: out)
        let queue = SpindleOperationQueue()
        let theOp = object.taskWithData([1, 2, 3, 4])
        try queue.addOperation(theOp)
        try theOp.waitUntilFinished()
        out.line("result() = \(try theOp.result())")

        let cancelled = object.taskWithData([5])
        cancelled.cancel()
        try cancelled.start()  // finishes without calling the method
        do {
            _ = try cancelled.result()
        } catch {
            out.line("result() of a cancelled operation throws: \(error)")
        }
    }

    /// 3.4: a block operation with three blocks, which run at the same time; adding a block once it has started
    /// throws.
    static func blockOperation(_ out: any ExampleOutput) throws {
        let together = Rendezvous(parties: 3)
        let theOp = SpindleBlockOperation {
            out.line("Beginning operation.")
            // Do some work.
            out.line("block 1 on \(SpindleThread.current), all three running at once: \(together.arriveAndWait(timeout: .seconds(10)))")
        }
        try theOp.addExecutionBlock {
            out.line("block 2 on \(SpindleThread.current), all three running at once: \(together.arriveAndWait(timeout: .seconds(10)))")
        }
        try theOp.addExecutionBlock {
            out.line("block 3 on \(SpindleThread.current), all three running at once: \(together.arriveAndWait(timeout: .seconds(10)))")
        }
        try theOp.start()
        out.line("start() returned after every block: finished = \(theOp.isFinished)")
        do {
            try theOp.addExecutionBlock {}
        } catch {
            out.line("addExecutionBlock after start: \(error)")
        }
    }

    /// 3.5.2 and 3.9.3: a running operation notices `cancel` at its next check; cancelled operations still waiting
    /// never run `main`, but their completion blocks run.
    static func cancellation(_ out: any ExampleOutput) throws {
        let queue = try SpindleOperationQueue(name: "cancellable", maxConcurrentOperationCount: 1)
        let running = MyNonConcurrentOperation(data: "running", output: out)
        let waiting = MyNonConcurrentOperation(data: "waiting", output: out)
        waiting.completionBlock = { out.line("waiting: completion block ran, cancelled = \(waiting.isCancelled)") }
        try queue.addOperations([running, waiting])
        try expectSignal(running.firstStepDone, "the first step")
        out.line("cancelAllOperations()")
        queue.cancelAllOperations()
        try queue.waitUntilAllOperationsAreFinished()
        out.line("running: cancelled = \(running.isCancelled), finished = \(running.isFinished)")
        out.line("waiting: cancelled = \(waiting.isCancelled), finished = \(waiting.isFinished)")
    }

    /// 3.6.1: a dependency across two queues holds its dependent back until it has finished; a cycle is refused
    /// when it is made.
    static func dependencies(_ out: any ExampleOutput) throws {
        let downloads = SpindleOperationQueue(name: "downloads")
        let processing = SpindleOperationQueue(name: "processing")
        let download = SpindleBlockOperation {
            simulateWork(milliseconds: 50)
            out.line("download finished on \(SpindleThread.current)")
        }
        download.name = "download"
        let process = SpindleBlockOperation { out.line("process runs after the download") }
        process.name = "process"
        // Set dependencies before adding the operations to a queue.
        try process.addDependency(download)
        out.line("process is ready before the download finished: \(process.isReady)")
        try processing.addOperation(process)  // another queue, added first: it still waits
        try downloads.addOperation(download)
        try process.waitUntilFinished()
        out.line("process.dependencies = \(process.dependencies.map { $0.name ?? "?" })")

        let a = SpindleBlockOperation {}, b = SpindleBlockOperation {}
        a.name = "a"
        b.name = "b"
        try b.addDependency(a)
        do {
            try a.addDependency(b)
        } catch {
            out.line("a cycle is refused when it is made: \(error)")
        }
    }

    /// 3.6.2 and 3.6.3: on a queue of width 1, ready operations run highest priority first; one that is not ready
    /// waits whatever its priority. The thread priority applies while `main` runs.
    static func priorities(_ out: any ExampleOutput) throws {
        let queue = try SpindleOperationQueue(name: "priorities", maxConcurrentOperationCount: 1)
        queue.isSuspended = true  // add everything first, then let the queue choose
        func job(_ name: String, _ priority: SpindleOperation.QueuePriority) -> SpindleBlockOperation {
            let op = SpindleBlockOperation {
                out.line("\(name) (queuePriority .\(priority), thread priority \(SpindleThread.current.priority))")
            }
            op.name = name
            op.queuePriority = priority
            return op
        }
        let low = job("low", .low), normal = job("normal", .normal), high = job("high", .high)
        let prerequisite = job("prerequisite", .veryLow)
        let blocked = job("blocked", .veryHigh)
        try blocked.addDependency(prerequisite)  // not ready until the prerequisite has finished
        low.threadPriority = 0.25  // set before adding it to a queue
        try queue.addOperations([low, normal, blocked, prerequisite, high])
        queue.isSuspended = false
        try queue.waitUntilAllOperationsAreFinished()
    }

    /// 3.6.4: a completion block runs once the operation has finished, before `waitUntilFinished` returns, and is
    /// released afterwards; a cancelled operation's completion block runs too.
    static func completionBlock(_ out: any ExampleOutput) throws {
        let queue = SpindleOperationQueue()
        let op = SpindleBlockOperation { out.line("main: working on \(SpindleThread.current)") }
        op.completionBlock = { [unowned op] in
            out.line("completion block: finished = \(op.isFinished), on \(SpindleThread.current)")
        }
        try queue.addOperation(op)
        try op.waitUntilFinished()
        out.line("waitUntilFinished returned")
        out.line("completionBlock is now \(op.completionBlock == nil ? "nil" : "still set")")

        let cancelled = SpindleBlockOperation { out.line("never printed") }
        cancelled.completionBlock = { out.line("completion block of a cancelled operation") }
        cancelled.cancel()
        try queue.addOperation(cancelled)
        try cancelled.waitUntilFinished()
    }
}
