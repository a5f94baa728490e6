import Spindle

// Seed 004 "NSOperation and NSOperationQueue": a queue created with maxConcurrentOperationCount = 2 runs at most
// two operations at once (more than 1 is parallel, exactly 1 is one after another, -1 lets the system decide).

/// The book's `Test` class: an object that owns a queue of width 2.
final class Test {
    let queue: SpindleOperationQueue

    init() {
        self.queue = SpindleOperationQueue()
        self.queue.maxConcurrentOperationCount = 2  // as the book; setMaxConcurrentOperationCount(_:) throws instead
    }
}

extension SpindleExamples {
    /// Seed 004: six jobs on a queue of width 2; never more than two run at once.
    static func queueWidthTwo(_ out: any ExampleOutput) throws {
        let test = Test()
        out.line("maxConcurrentOperationCount = \(test.queue.maxConcurrentOperationCount)")
        let running = SpindleLockedValue(0)
        let mostAtOnce = SpindleLockedValue(0)
        for job in 1...6 {
            test.queue.addOperation {
                let now = running.withLockedValue { count -> Int in
                    count += 1
                    return count
                }
                mostAtOnce.withLockedValue { $0 = max($0, now) }
                out.line("job \(job) begins on \(SpindleThread.current) (running: \(now))")
                simulateWork(milliseconds: 80)
                running.withLockedValue { $0 -= 1 }
                out.line("job \(job) ends")
            }
        }
        try test.queue.waitUntilAllOperationsAreFinished()
        out.line("most jobs running at once: \(mostAtOnce.value)")
    }
}
