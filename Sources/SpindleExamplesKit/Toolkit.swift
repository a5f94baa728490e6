import Spindle

// Beyond the seeds: the pieces of Foundation's NSThread and KVO, and of the "Advanced NSOperations" toolkit, that
// the books do not show but ported code uses (issue 19).

/// A download that fails a given number of times before it succeeds (a flaky server).
final class FlakyServer: Sendable {
    struct Unavailable: Error, CustomStringConvertible {
        let attempt: Int
        var description: String { "503 on attempt \(self.attempt)" }
    }

    private let failures: Int
    private let calls = SpindleLockedValue(0)

    init(failures: Int) { self.failures = failures }

    /// The body on call `n`: throws `Unavailable` for the first `failures` calls.
    func download() throws -> String {
        let call = self.calls.withLockedValue { n -> Int in
            n += 1
            return n
        }
        if call <= self.failures { throw Unavailable(attempt: call) }
        return "recipe.json (\(call) calls)"
    }
}

extension SpindleExamples {
    /// `SpindleRetryOperation`: a download that fails twice succeeds on its third attempt; one that always fails
    /// stops after `maxAttempts` with the last attempt's error.
    static func retry(_ out: any ExampleOutput) throws {
        let queue = try SpindleOperationQueue(name: "downloads", maxConcurrentOperationCount: 2)
        let server = FlakyServer(failures: 2)
        let fetch = try SpindleRetryOperation(maxAttempts: 4, backoff: .exponential(first: .milliseconds(1))) { attempt in
            out.line("attempt \(attempt)")
            return SpindleInvocationOperation { try server.download() }
        }
        let down = FlakyServer(failures: .max)
        let hopeless = try SpindleRetryOperation(maxAttempts: 3, backoff: .constant(.milliseconds(1))) { _ in
            SpindleInvocationOperation { try down.download() }
        }
        try queue.addOperation(fetch)
        try fetch.waitUntilFinished()
        let attempt = fetch.succeededAttempt as? SpindleInvocationOperation<String>
        out.line("fetch: \(try attempt?.result() ?? "no result") after \(fetch.attemptsMade) attempts")
        try queue.addOperation(hopeless)
        try hopeless.waitUntilFinished()
        out.line("hopeless: \(hopeless.attemptsMade) attempts, error \(hopeless.error.map { "\($0)" } ?? "none")")
    }

    /// `SpindleThread` with NSThread's life: create, configure, start once, cancel; the body polls `isCancelled`.
    static func threadObject(_ out: any ExampleOutput) throws {
        let started = try SpindleSemaphore(value: 0)
        let done = try SpindleSemaphore(value: 0)
        let worker = SpindleThread(name: "poller") { thread in
            started.signal()
            var rounds = 0
            while !thread.isCancelled { rounds += 1 }  // real code would do a slice of work per round
            out.line("\(thread.name): cancelled, stopping")
            done.signal()
        }
        try worker.setStackSize(1 << 20)  // before start(), as NSThread's stackSize
        out.line("created: executing \(worker.isExecuting), finished \(worker.isFinished)")
        try worker.start()
        try expectSignal(started, "the thread to start")
        do {
            try worker.start()
        } catch {
            out.line("second start: \(error)")
        }
        worker.cancel()
        try expectSignal(done, "the thread to stop")

        let never = SpindleThread(name: "never") { _ in out.line("never: this does not print") }
        never.cancel()  // cancelled before start: the body never runs
        try never.startJoinable()
        try never.join()
        out.line("never: finished \(never.isFinished), cancelled \(never.isCancelled)")
    }

    /// Observed values: each change carries its typed old and new values; `.initial` delivers the current ones.
    static func observedValues(_ out: any ExampleOutput) throws {
        let op = SpindleBlockOperation { out.line("main runs") }
        op.observe([.queuePriority, .isFinished], options: .initial) { _, change in
            if change.phase == .did { out.line("\(change)") }
        }
        op.queuePriority = .high
        op.queuePriority = .veryHigh
        try op.start()
    }
}
