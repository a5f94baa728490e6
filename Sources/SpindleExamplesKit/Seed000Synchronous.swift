import Spindle

// Seed 000, section 7.11 "Running tasks synchronously with operations": operations started by hand run on the
// thread that calls `start()`, which returns only when the work is done.

/// The book's application delegate, reduced to the method the invocation operation calls.
final class SynchronousAppDelegate {
    let out: any ExampleOutput

    init(output: any ExampleOutput) { self.out = output }

    func simpleOperationEntry(_ paramObject: Int) {
        self.out.line("Parameter Object = \(paramObject)")
        self.out.line("Main Thread = \(SpindleThread.main)")
        self.out.line("Current Thread = \(SpindleThread.current)")
    }
}

/// The book's `CountingOperation`: counts from `startingCount` up to `endingCount` (excluded) in `main`.
final class CountingOperation: SpindleOperation, @unchecked Sendable {
    let startingCount: Int
    let endingCount: Int
    let out: any ExampleOutput

    init(startingCount: Int = 0, endingCount: Int = 1000, output: any ExampleOutput) {
        self.startingCount = startingCount
        self.endingCount = endingCount
        self.out = output
        super.init()
    }

    override func main() throws {
        var taskIsFinished = false
        // Loop only while the task is not done and the operation was not cancelled.
        while !taskIsFinished && !self.isCancelled {
            self.out.line("Main Thread = \(SpindleThread.main)")
            self.out.line("Current Thread = \(SpindleThread.current)")
            for counter in self.startingCount..<self.endingCount {
                self.out.line("Count = \(counter)")
            }
            taskIsFinished = true
        }
        // No hand-written KVO here: when `main` returns, `start()` moves the operation to finished and tells
        // observers (isExecuting goes false, then isFinished goes true).
    }
}

extension SpindleExamples {
    /// 7.11: an invocation operation calling `simpleOperationEntry(_:)` with 123, started by hand.
    static func invocationStart(_ out: any ExampleOutput) throws {
        let delegate = SynchronousAppDelegate(output: out)
        let simpleOperation = SpindleInvocationOperation(
            target: delegate, method: SynchronousAppDelegate.simpleOperationEntry, argument: 123)
        try simpleOperation.start()  // runs the method here, on the calling thread
    }

    /// 7.11: a block operation counting from 0 to 999, started by hand; "Main thread is here" comes after.
    static func blockCount(_ out: any ExampleOutput) throws {
        let simpleOperation = SpindleBlockOperation {
            out.line("Main Thread = \(SpindleThread.main)")
            out.line("Current Thread = \(SpindleThread.current)")
            for counter in 0..<1000 {
                out.line("Count = \(counter)")
            }
        }
        // Start the operation.
        try simpleOperation.start()
        // Print something to see whether we waited for the block to run.
        out.line("Main thread is here")
    }

    /// 7.11: `CountingOperation` started by hand; "Main thread is here" comes after the count.
    static func countingOperation(_ out: any ExampleOutput) throws {
        let simpleOperation = CountingOperation(startingCount: 0, endingCount: 1000, output: out)
        try simpleOperation.start()
        out.line("Main thread is here")
    }
}
