import Spindle

// Seed 000, section 7.12 "Running tasks asynchronously with operations": a queue runs operations on threads of
// its own, so the thread that adds them goes on at once.

/// The book's application delegate with the two methods the invocation operations call.
final class AsynchronousAppDelegate {
    let out: any ExampleOutput

    init(output: any ExampleOutput) { self.out = output }

    func firstOperationEntry(_ paramObject: Int) {
        self.out.line("[\(Self.self) \(#function)]")
        self.out.line("Parameter Object = \(paramObject)")
        self.out.line("Main Thread = \(SpindleThread.main)")
        self.out.line("Current Thread = \(SpindleThread.current)")
    }

    func secondOperationEntry(_ paramObject: Int) {
        self.out.line("[\(Self.self) \(#function)]")
        self.out.line("Parameter Object = \(paramObject)")
        self.out.line("Main Thread = \(SpindleThread.main)")
        self.out.line("Current Thread = \(SpindleThread.current)")
    }
}

/// The book's `SimpleOperation`, declared concurrent (`isConcurrent` YES): a `SpindleConcurrentOperation` whose
/// `main` runs on a thread of its own and reports the end with `finish()` where the book sends the KVO
/// notifications by hand.
final class SimpleOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let givenObject: Int
    let out: any ExampleOutput

    init(object: Int = 123, output: any ExampleOutput) {
        self.givenObject = object
        self.out = output
        super.init()
    }

    override func main() throws {
        var taskIsFinished = false
        while !taskIsFinished && !self.isCancelled {
            self.out.line("-[\(Self.self) \(#function)]")
            self.out.line("Parameter Object = \(self.givenObject)")
            self.out.line("Main Thread = \(SpindleThread.main)")
            self.out.line("Current Thread = \(SpindleThread.current)")
            taskIsFinished = true
        }
        // The one call that reports the end: isExecuting goes false, isFinished true, the queue frees the slot.
        try self.finish()
    }
}

extension SpindleExamples {
    /// 7.12: two invocation operations (111 and 222) on a queue; the adding thread goes on at once.
    static func invocationQueue(_ out: any ExampleOutput) throws {
        let delegate = AsynchronousAppDelegate(output: out)
        let firstOperation = SpindleInvocationOperation(
            target: delegate, method: AsynchronousAppDelegate.firstOperationEntry, argument: 111)
        let secondOperation = SpindleInvocationOperation(
            target: delegate, method: AsynchronousAppDelegate.secondOperationEntry, argument: 222)
        let operationQueue = SpindleOperationQueue()
        // Add the operations to the queue.
        try operationQueue.addOperation(firstOperation)
        try operationQueue.addOperation(secondOperation)
        out.line("Main thread is here")
        // The book's application keeps running; a command-line example waits for the queue before it returns.
        try operationQueue.waitUntilAllOperationsAreFinished()
    }

    /// 7.12: two `SimpleOperation`s (concurrent operations) on a queue.
    static func simpleOperationQueue(_ out: any ExampleOutput) throws {
        let firstOperation = SimpleOperation(object: 111, output: out)
        let secondOperation = SimpleOperation(object: 222, output: out)
        let operationQueue = SpindleOperationQueue()
        try operationQueue.addOperation(firstOperation)
        try operationQueue.addOperation(secondOperation)
        out.line("Main thread is here")
        try operationQueue.waitUntilAllOperationsAreFinished()
    }
}
