import Synchronization
import Testing

@testable import Spindle

// Helpers for the Beyond suites (bounded queues, deadlines, failure propagation, snapshots). Names start with
// `bt`/`BT`. They reuse the queue suites' POSIX-semaphore oracles (`QTGate`, …); nothing sleeps as
// synchronisation: facts with no signal to wait on (a producer is blocked) are polled with `btWaitUntil`.

/// The error the failing operations throw.
struct BTError: Error, Equatable {
    let code: Int
}

/// An operation whose `main` throws `BTError(code)` (and counts its runs).
final class BTThrowingOp: SpindleOperation, @unchecked Sendable {
    let code: Int
    let runs = QTCounter()
    init(code: Int, name: String) {
        self.code = code
        super.init()
        self.name = name
    }
    override func main() throws {
        self.runs.increment()
        throw BTError(code: self.code)
    }
}

/// A block operation that counts its runs.
final class BTCountingOp: SpindleOperation, @unchecked Sendable {
    let runs = QTCounter()
    let body: @Sendable () -> Void
    init(name: String, _ body: @escaping @Sendable () -> Void = {}) {
        self.body = body
        super.init()
        self.name = name
    }
    override func main() throws {
        self.runs.increment()
        self.body()
    }
}

/// Polls `condition` until it holds or `seconds` pass (only for facts with no signal, like "a producer is blocked").
func btWaitUntil(seconds: Double = qtDeadline, _ condition: () -> Bool) -> Bool {
    waitUntil(deadline: seconds, condition)
}

/// Waits until the queue reports `count` blocked producers.
func btWaitForBlockedProducers(_ queue: SpindleOperationQueue, _ count: Int,
                               sourceLocation: SourceLocation = #_sourceLocation) {
    let ok = btWaitUntil { queue.snapshot().blockedProducers == count }
    #expect(ok, "expected \(count) blocked producers", sourceLocation: sourceLocation)
}

/// The async form: yields instead of sleeping, so it never holds a cooperative thread.
func btAwaitBlockedProducers(_ queue: SpindleOperationQueue, _ count: Int,
                             sourceLocation: SourceLocation = #_sourceLocation) async {
    let end = monotonicSeconds() + qtDeadline
    while queue.snapshot().blockedProducers != count && monotonicSeconds() < end { await Task.yield() }
    #expect(queue.snapshot().blockedProducers == count, "expected \(count) blocked producers",
            sourceLocation: sourceLocation)
}

/// Runs `body` on a new joinable thread; `join` waits for it (bounded by the gate's deadline).
final class BTThread: @unchecked Sendable {
    let done = QTGate()
    private var thread: SpindleThread?
    init(_ name: String = "bt", _ body: @escaping @Sendable () -> Void) throws {
        let done = self.done
        self.thread = try SpindleThread.spawnJoinable(name: name) {
            body()
            done.open()
        }
    }
    /// Whether it finished within the deadline (then it is joined).
    @discardableResult
    func join(seconds: Double = qtDeadline) -> Bool {
        guard self.done.wait(seconds: seconds) else { return false }
        try? self.thread?.join()
        self.thread = nil
        return true
    }
}
