import Glibc
import Synchronization
import Testing

@testable import Spindle

private final class ReviewDCanary: Sendable {}

private final class ReviewDBox<T>: @unchecked Sendable {
    private let lock = SpindleLockedValue<T?>(nil)
    func set(_ v: T) { self.lock.withLockedValue { $0 = v } }
    var value: T? { self.lock.withLockedValue { $0 } }
}

/// A review of the fourth round's fixes (each failed on them, before the follow-up): a replaced diagnostics handler kept
/// its captures; `run` from an async operation of a wide queue, and `.callerRuns` with a finished dependency or from a
/// task outliving its operation, were refused; and the overflow storage of thread-locals past the keys is checked per thread.
@Suite("Review of the fourth round of fixes", .serialized, .timeLimit(.minutes(2)))
struct SessionFixesReviewTests {
    // D1. SpindleDiagnostics.setHandler never frees the box, so a replaced handler's captures live for ever.
    @Test func aReplacedDiagnosticsHandlerReleasesItsCaptures() {
        weak var weakCanary: ReviewDCanary?
        do {
            let canary = ReviewDCanary()
            weakCanary = canary
            let previous = SpindleDiagnostics.setHandler { _ in _ = canary }
            _ = SpindleDiagnostics.setHandler(previous)  // replaced: nothing refers to our handler any more
        }
        #expect(weakCanary == nil, "the replaced handler (and everything it captured) is kept for ever")
    }

    // D2. run from an async operation of a WIDE, non-full queue: a free slot is there, it used to work.
    @Test func runFromOwnAsyncOperationOfAWideQueueStillWorks() async throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let outcome = QTLog<String>()
        let op = SpindleAsyncOperation {
            do { outcome.append("\(try await queue.run { 7 })") } catch { outcome.append("\(error)") }
        }
        try queue.addOperation(op)
        try await op.waitUntilFinished()
        #expect(outcome.all == ["7"])
    }

    // D3. .callerRuns from inside an operation: a dependency that IS finished (isFinished == true; its completion
    // block still running) is refused as if unfinished (the code tests `isSettled`, the doc says "unfinished").
    @Test func callerRunsFromAnOperationAcceptsAFinishedDependency() throws {
        let full = try SpindleOperationQueue(name: "rd-full", maxConcurrentOperationCount: 1, capacity: 1,
                                             whenFull: .callerRuns)
        full.isSuspended = true
        try full.addOperation(SpindleBlockOperation {})
        let other = try SpindleOperationQueue(name: "rd-other", maxConcurrentOperationCount: 2)
        let inCompletion = OracleSemaphore()
        let releaseCompletion = OracleSemaphore()
        let dependency = SpindleBlockOperation {}
        dependency.completionBlock = {
            inCompletion.post()
            _ = releaseCompletion.wait(seconds: 5)  // a rescue only: the add below would wait for this
        }
        try other.addOperation(dependency)
        #expect(inCompletion.wait())
        #expect(dependency.isFinished)
        let outcome = QTLog<String>()
        let done = OracleSemaphore()
        let adder = SpindleBlockOperation {
            let dependent = SpindleBlockOperation { outcome.append("ran") }
            try? dependent.addDependency(dependency)
            do { try full.addOperation(dependent) } catch { outcome.append("\(error)") }
            done.post()
        }
        try other.addOperation(adder)
        #expect(done.wait(seconds: 20))
        releaseCompletion.post()
        #expect(outcome.all == ["ran"], "refused although its dependency had finished")
        full.isSuspended = false
        qtDrain(full)
        qtDrain(other)
    }

    // D4. .callerRuns from a task spawned (unstructured) by an async operation that has since FINISHED: the task
    // runs no operation, yet the inherited task-local makes the add refuse any unfinished dependency.
    @Test func callerRunsFromATaskOutlivingItsAsyncOperationWaitsForTheDependency() async throws {
        let full = try SpindleOperationQueue(name: "rd-full2", maxConcurrentOperationCount: 1, capacity: 1,
                                             whenFull: .callerRuns)
        full.isSuspended = true
        try full.addOperation(SpindleBlockOperation {})
        let depQueue = try SpindleOperationQueue(name: "rd-dep", maxConcurrentOperationCount: 1)
        let go = OracleSemaphore()
        let dependency = SpindleBlockOperation { _ = go.wait(seconds: 3) }  // unfinished until go (or 3 s)
        let spawned = ReviewDBox<Task<String, Never>>()
        let opFinished = try SpindleSemaphore(value: 0)
        let op = SpindleAsyncOperation {
            spawned.set(Task {
                try? await opFinished.wait()  // the operation is over (signalled once it has finished)
                let dependent = SpindleBlockOperation {}
                try? dependent.addDependency(dependency)
                do { try full.addOperation(dependent) } catch { return "\(error)" }
                return dependent.isFinished ? "ran" : "not run"
            })
        }
        try depQueue.addOperation(dependency)
        let runner = try SpindleOperationQueue(name: "rd-runner", maxConcurrentOperationCount: 1)
        try runner.addOperation(op)
        try await op.waitUntilFinished()
        opFinished.signal()
        let result = await spawned.value!.value
        go.post()
        #expect(result == "ran", "a task that runs no operation is refused: \(result)")
        full.isSuspended = false
        qtDrain(full)
        qtDrain(depQueue)
    }
}

private func reviewDExhaustPthreadKeys() -> Int {
    var made = 0
    while true {
        var key = pthread_key_t()
        if pthread_key_create(&key, nil) != 0 { return made }
        made += 1
    }
}

private final class ReviewDCounter: @unchecked Sendable {
    static let freed = Atomic<Int>(0)
    deinit { ReviewDCounter.freed.add(1, ordering: .relaxed) }
}

extension SessionFixesReviewTests {
    // With Spindle in use before the keys ran out, a thread-local made after keeps a value per thread and frees it
    // at the thread's exit. (A process that runs out before its first use of Spindle traps at that use: Spindle
    // needs one key of its own; a known limit.)
    @Test func threadLocalPastTheKeysWithAThreadContext() async {
        await #expect(processExitsWith: .success) {
            _ = SpindleThread.current
            _ = reviewDExhaustPthreadKeys()
            let local = SpindleThreadLocal<ReviewDCounter?>(initial: { ReviewDCounter() })
            _ = local.value
            let t = try! SpindleThread.spawnJoinable(name: "tl") { _ = local.value }
            try! t.join()
            exit(ReviewDCounter.freed.load(ordering: .relaxed) == 1 ? 0 : 4)
        }
    }
}
