import Glibc
import Testing

@testable import Spindle

/// Adding operations: misuse is a typed error that changes nothing (contract item 1; catalogue J72, J73), the
/// queue's listing and names (J71), `current` (J80) and where operations start (B12).
@Suite struct QueueAddingTests {
    // MARK: - Misuse (J72, J73)

    @Test func addingAFinishedOperationThrowsAndChangesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let op = qtNamed("done")
        try op.start()
        #expect(op.isFinished)
        qtExpectError(.operationFinished(name: "done")) { try queue.addOperation(op) }
        #expect(queue.operationCount == 0)
        #expect(queue.operations.isEmpty)
        #expect(op.isFinished)
    }

    @Test func addingAnExecutingOperationThrowsAndChangesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let started = QTGate(), release = QTGate()
        let op = qtNamed("busy") {
            started.open()
            release.wait()
        }
        let runner = try SpindleThread.spawnJoinable(name: "qt-runner") { try? op.start() }
        #expect(started.wait())
        qtExpectError(.operationExecuting(name: "busy")) { try queue.addOperation(op) }
        #expect(queue.operationCount == 0)
        #expect(op.isExecuting)
        release.open()
        try runner.join()
        #expect(op.isFinished)
    }

    @Test func addingAnOperationTwiceToTheSameQueueThrowsAndChangesNothing() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        queue.isSuspended = true
        let op = qtNamed("twice")
        try queue.addOperation(op)
        qtExpectError(.operationAlreadyInQueue(name: "twice")) { try queue.addOperation(op) }
        #expect(queue.operationCount == 1)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(op.isFinished)
        // Once finished it cannot come back either.
        qtExpectError(.operationFinished(name: "twice")) { try queue.addOperation(op) }
    }

    @Test func addingAnOperationOwnedByAnotherQueueThrowsAndChangesNothing() throws {
        let first = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let second = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        first.isSuspended = true
        let op = qtNamed("owned")
        try first.addOperation(op)
        qtExpectError(.operationAlreadyInQueue(name: "owned")) { try second.addOperation(op) }
        #expect(second.operationCount == 0)
        #expect(first.operationCount == 1)
        first.isSuspended = false
        qtDrain(first)
        qtDrain(second)
    }

    @Test func aRunningQueuedOperationCannotBeAddedAgain() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let started = QTGate(), release = QTGate()
        let op = qtNamed("running") {
            started.open()
            release.wait()
        }
        try queue.addOperation(op)
        #expect(started.wait())
        qtExpectError(.operationExecuting(name: "running")) { try queue.addOperation(op) }
        #expect(queue.operationCount == 1)
        release.open()
        qtDrain(queue)
    }

    // Misuse of an operation with no name must throw like a named one. It crashes today (SIGILL): the error
    // paths of `SpindleOperationQueue.claim` build the error's name with `l.name ?? op.displayName` while holding
    // the operation's lock, and `displayName` reads `name`, which takes that lock again (a recursive lock: a trap,
    // or a hang, which the child's watchdog turns into exit 9). Run in a child process so this test alone fails.
    @Test func addingAnUnnamedOperationTwiceThrowsInsteadOfCrashing() async {
        await #expect(processExitsWith: .success) {
            qtStartExitTestWatchdog()
            let queue = try! SpindleOperationQueue(maxConcurrentOperationCount: 1)
            queue.isSuspended = true
            let op = SpindleBlockOperation {}
            try! queue.addOperation(op)
            do {
                try queue.addOperation(op)
                exit(2)  // must throw
            } catch {
                guard case .operationAlreadyInQueue? = error as? SpindleError else { exit(3) }
            }
            queue.isSuspended = false
            guard (try? queue.waitUntilAllOperationsAreFinished(timeout: .seconds(10))) == true else { exit(4) }
        }
    }

    @Test func addingAnUnnamedFinishedOperationThrowsInsteadOfCrashing() async {
        await #expect(processExitsWith: .success) {
            qtStartExitTestWatchdog()
            let queue = try! SpindleOperationQueue(maxConcurrentOperationCount: 1)
            let op = SpindleBlockOperation {}
            try! op.start()
            do {
                try queue.addOperation(op)
                exit(2)
            } catch {
                guard case .operationFinished? = error as? SpindleError else { exit(3) }
            }
            guard queue.operationCount == 0 else { exit(4) }
        }
    }

    @Test func aBatchWithOneBadOperationAddsNone() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let other = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        other.isSuspended = true
        let owned = qtNamed("owned")
        try other.addOperation(owned)
        let finished = qtNamed("finished")
        try finished.start()
        let ran = QTCounter()
        let good = (0..<3).map { i in qtNamed("good\(i)") { ran.increment() } }
        qtExpectError(.operationFinished(name: "finished")) {
            try queue.addOperations([good[0], good[1], finished, good[2]])
        }
        qtExpectError(.operationAlreadyInQueue(name: "owned")) { try queue.addOperations([good[0], owned, good[1]]) }
        #expect(queue.operationCount == 0)
        #expect(good.allSatisfy { !$0.isFinished && !$0.isExecuting })
        // The good ones were not claimed: they can be added (elsewhere even) and run.
        try queue.addOperations(Array(good[0..<2]))
        try other.addOperation(good[2])
        qtDrain(queue)
        #expect(ran.count == 2)
        other.isSuspended = false
        qtDrain(other)
        #expect(ran.count == 3)
    }

    @Test func aBatchWithADuplicateThrowsAndAddsNone() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let a = qtNamed("a"), b = qtNamed("b")
        qtExpectError(.duplicateInBatch(name: "a")) { try queue.addOperations([a, b, a]) }
        #expect(queue.operationCount == 0)
        try queue.addOperations([a, b], waitUntilFinished: true)
        #expect(a.isFinished && b.isFinished)
        qtDrain(queue)
    }

    @Test func anEmptyBatchIsFine() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        try queue.addOperations([])
        try queue.addOperations([], waitUntilFinished: true)
        #expect(queue.operationCount == 0)
    }

    @Test func aCancelledIdleOperationCanBeAddedAndFinishesUnrun() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let ran = QTFlag()
        let op = SpindleBlockOperation { ran.set() }
        op.cancel()
        try queue.addOperation(op)
        qtDrain(queue)
        #expect(op.isFinished && op.isCancelled && !ran.isSet)
    }

    // MARK: - Listing and names (J71)

    @Test func operationsAreListedInInsertionOrder() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let ops = (0..<10).map { qtNamed("op\($0)") }
        for op in ops[0..<4] { try queue.addOperation(op) }
        try queue.addOperations(Array(ops[4...]))
        ops[9].queuePriority = .veryHigh  // priority does not reorder the listing
        #expect(queue.operationCount == 10)
        #expect(queue.operations.map { $0.name ?? "" } == ops.map { $0.name ?? "" })
        queue.isSuspended = false
        qtDrain(queue)
        #expect(queue.operations.isEmpty)
    }

    @Test func defaultNameIsNonEmptyAndDistinctAndSetNamesAreKept() throws {
        let a = SpindleOperationQueue(), b = SpindleOperationQueue()
        #expect(!a.name.isEmpty)
        #expect(a.name != b.name)
        let named = SpindleOperationQueue(name: "uploads")
        #expect(named.name == "uploads")
        named.name = "downloads"
        #expect(named.name == "downloads")
        #expect(named.description.contains("downloads"))
    }

    // MARK: - current (J80) and the starting thread (B12)

    @Test func currentIsTheQueueInsideAnOperationAndNilOnAPlainThread() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let seen = QTLog<Bool>()
        let expected = ObjectIdentifier(queue)  // not the queue itself: see QueueLifetimeTests' lock bug
        for _ in 0..<3 {
            queue.addOperation { seen.append(SpindleOperationQueue.current.map(ObjectIdentifier.init) == expected) }
        }
        qtDrain(queue)
        #expect(seen.all == [true, true, true])
        let plain = QTLog<Bool>()
        #expect(qtOnOtherThread { plain.append(SpindleOperationQueue.current == nil) })
        #expect(plain.all == [true])
        #expect(SpindleOperationQueue.current == nil)
        // A hand-started operation is on no queue either.
        let byHand = SpindleBlockOperation { plain.append(SpindleOperationQueue.current == nil) }
        try byHand.start()
        #expect(plain.all == [true, true])
    }

    @Test func anOperationAddedToAQueueNeverStartsOnTheAddingThread() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 4)
        let adder = qtTid()
        let tids = QTLog<Int32>()
        for _ in 0..<50 { queue.addOperation { tids.append(qtTid()) } }
        let waited = SpindleBlockOperation { tids.append(qtTid()) }
        try queue.addOperations([waited], waitUntilFinished: true)
        let concurrent = QTTidConcurrentOperation(log: tids)
        try queue.addOperation(concurrent)
        qtDrain(queue)
        #expect(tids.count == 52)
        #expect(!tids.all.contains(adder))
        #expect(concurrent.startTid.all.count == 1)
        #expect(!concurrent.startTid.all.contains(adder), "start() of a concurrent operation runs on a worker too")
    }
}

/// A concurrent operation that records the thread of its `start()` and of its `main`, then finishes.
final class QTTidConcurrentOperation: SpindleConcurrentOperation, @unchecked Sendable {
    let log: QTLog<Int32>
    let startTid = QTLog<Int32>()
    init(log: QTLog<Int32>) {
        self.log = log
        super.init()
    }
    override func start() throws {
        self.startTid.append(qtTid())
        try super.start()
    }
    override func main() throws {
        self.log.append(qtTid())
        try self.finish()
    }
}
