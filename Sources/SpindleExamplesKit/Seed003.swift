import Spindle

// Seed 003 "NSOperation custom subclasses, non-concurrent and concurrent": a plain subclass runs `main` on the
// thread that calls `start()`; a concurrent one overrides `start()` to run `main` on a new thread, and is run
// through `performOperation:` (here `SpindleOperation.perform(_:)`).

/// The book's `VinnyOperation`: a non-concurrent operation; only `main` is overridden.
final class VinnyOperation: SpindleOperation, @unchecked Sendable {
    let out: any ExampleOutput

    init(output: any ExampleOutput) {
        self.out = output
        super.init()
    }

    override func main() throws {
        self.out.line("main begin")
        // A flag telling whether the work is done; false before it starts.
        var taskIsFinished = false
        // Work only while not finished and not cancelled.
        while !taskIsFinished && !self.isCancelled {
            simulateWork(milliseconds: 100)  // the book sleeps 10 s to simulate a long task
            self.out.line("currentThread = \(SpindleThread.current)")
            self.out.line("mainThread    = \(SpindleThread.main)")
            taskIsFinished = true
        }
        self.out.line("main end")
    }
}

/// The book's `MyOperation`: a concurrent operation that overrides `start()` and detaches a thread for `main`,
/// reporting its end from `completeOperation()`. Spindle keeps the state (executing, finished, cancelled) and
/// its notifications; the subclass only says when it begins and when it ends.
final class MyOperation: SpindleOperation, @unchecked Sendable {
    let out: any ExampleOutput
    /// Signalled when the detached thread has returned from `main` (after "main end").
    let mainReturned = try! SpindleSemaphore(value: 0)

    init(output: any ExampleOutput) {
        self.out = output
        super.init()
    }

    override var isAsynchronous: Bool { true }

    override func start() throws {
        // Always check for cancellation before launching the task: `beginExecuting()` returns false when the
        // operation was cancelled, having moved it to finished already.
        guard try self.beginExecuting() else { return }
        // Not cancelled: begin executing the task on a new thread.
        do {
            try SpindleThread.detach(name: "MyOperation") {
                do { try self.main() } catch { try? self.finish(throwing: error) }
                self.mainReturned.signal()
            }
        } catch {
            try? self.finish(throwing: error)  // no thread: finish now, so nothing waits forever
            throw error
        }
    }

    override func main() throws {
        self.out.line("main begin")
        var taskIsFinished = false
        while !taskIsFinished && !self.isCancelled {
            self.out.line("currentThread = \(SpindleThread.current)")
            self.out.line("mainThread    = \(SpindleThread.main)")
            taskIsFinished = true
        }
        try self.completeOperation()
        self.out.line("main end")
    }

    /// The book's `completeOperation`: isExecuting goes false, then isFinished goes true (notified in that order).
    func completeOperation() throws {
        try self.finish()
    }
}

extension SpindleExamples {
    /// Seed 003 §1: `VinnyOperation` started by hand runs between "start before" and "start after".
    static func vinnyOperation(_ out: any ExampleOutput) throws {
        let op = VinnyOperation(output: out)
        out.line("start before")
        try op.start()
        out.line("start after")
    }

    /// Seed 003 §2: `MyOperation` run with `performOperation:` (`SpindleOperation.perform`) on a new thread.
    static func myOperation(_ out: any ExampleOutput) throws {
        let op = MyOperation(output: out)
        out.line("start before")
        SpindleOperation.perform(op)  // the book's [op performOperation:op]
        out.line("start after")
        // The book's application keeps running; here we wait for the operation and for its thread's last line.
        try op.waitUntilFinished()
        try expectSignal(op.mainReturned, "MyOperation's main to return")
    }
}
