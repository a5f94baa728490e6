import Testing

@testable import Spindle

/// Operation deadlines: firing before `main`, during it, after the operation finished; the recorded reason.
@Suite struct BeyondDeadlineTests {
    @Test func deadlineBeforeStartFinishesItWithoutRunningMain() throws {
        let queue = try SpindleOperationQueue(name: "bt-deadline-before", maxConcurrentOperationCount: 2)
        let blocker = qtNamed("blocker")  // never added: holds the operation back until started by hand
        let finished = QTGate()
        let op = BTCountingOp(name: "late")
        op.completionBlock = { finished.open() }
        try op.addDependency(blocker)
        op.cancel(after: .milliseconds(20))
        try queue.addOperation(op)
        #expect(finished.wait())
        #expect(op.isFinished && op.isCancelled)
        #expect(op.runs.count == 0)
        #expect(op.deadlineExpired)
        #expect(op.cancellationReason == .deadlineExpired)
        #expect(op.deadline == nil)
        try blocker.start()
        qtDrain(queue)
    }

    @Test func deadlineDuringMainCancelsItAndMainSeesIt() throws {
        let queue = SpindleOperationQueue(name: "bt-deadline-during")
        let started = QTGate()
        let sawCancel = QTFlag()
        let op = BTSpinUntilCancelledOp(started: started, sawCancel: sawCancel)
        try queue.addOperation(op)
        #expect(started.wait())
        op.cancel(after: .milliseconds(10))
        qtDrain(queue)
        #expect(sawCancel.isSet)
        #expect(op.deadlineExpired)
    }

    @Test func deadlineAfterFinishChangesNothingAndReleasesTheOperation() throws {
        let queue = SpindleOperationQueue(name: "bt-deadline-after")
        weak var weakOp: SpindleOperation?
        do {
            let op = BTCountingOp(name: "quick")
            weakOp = op
            op.cancel(after: .milliseconds(30))
            try queue.addOperation(op)
            qtDrain(queue)
            #expect(op.isFinished && !op.isCancelled)
            #expect(op.deadline == nil)  // its timer entry left with the finish
            #expect(op.runs.count == 1)
        }
        #expect(btWaitUntil { weakOp == nil })  // not kept alive by its deadline
        // A later deadline on another operation: once it fired, the first one's time has passed too.
        let fired = QTGate()
        let marker = BTCountingOp(name: "marker")
        marker.completionBlock = { fired.open() }
        try marker.addDependency(qtNamed("never"))
        marker.cancel(after: .milliseconds(60))
        try queue.addOperation(marker)
        #expect(fired.wait())
        #expect(marker.deadlineExpired)
        qtDrain(queue)
    }

    @Test func reasonsAreRecorded() throws {
        let plain = qtNamed("plain")
        #expect(plain.cancellationReason == nil)
        plain.cancel()
        #expect(plain.cancellationReason == .cancelled)
        #expect(!plain.deadlineExpired)

        let past = qtNamed("past")
        past.cancel(at: .now)  // already passed: at once, on this thread
        #expect(past.isCancelled && past.cancellationReason == .deadlineExpired)

        // A deadline never overrides an earlier plain cancel.
        let first = qtNamed("first")
        first.cancel()
        first.cancel(at: .now)
        #expect(first.cancellationReason == .cancelled)
    }

    @Test func theEarliestDeadlineWins() throws {
        let op = BTCountingOp(name: "earliest")
        let done = QTGate()
        op.completionBlock = { done.open() }
        try op.addDependency(qtNamed("never"))
        op.cancel(after: .seconds(3600))
        let late = try #require(op.deadline)
        op.cancel(after: .seconds(1800))
        let earlier = try #require(op.deadline)
        #expect(earlier < late)
        op.cancel(after: .seconds(7200))  // later: ignored
        #expect(op.deadline == earlier)
        op.cancel(after: .milliseconds(20))
        let queue = SpindleOperationQueue(name: "bt-earliest")
        try queue.addOperation(op)
        #expect(done.wait())
        #expect(op.deadlineExpired && op.runs.count == 0)
        qtDrain(queue)
    }

    @Test func manyDeadlinesFireInTimeOrderAndOnlyForUnfinishedOperations() throws {
        let queue = try SpindleOperationQueue(name: "bt-many-deadlines", maxConcurrentOperationCount: 4)
        let blocker = qtNamed("blocker")
        var expired: [BTCountingOp] = [], completed: [BTCountingOp] = []
        var armedAt: [String: SpindleDeadline] = [:]
        let fired = QTLog<String>()  // the order the deadlines cancelled their operations in
        for i in 0..<200 {
            let op = BTCountingOp(name: "d\(i)")
            if i % 2 == 0 {
                try op.addDependency(blocker)  // cannot finish before its deadline
                op.observe([.isCancelled]) { op, change in
                    if change.phase == .did, change.newValue.boolValue == true { fired.append(op.name ?? "?") }
                }
                op.cancel(after: .milliseconds(Int64(5 + i % 17)))
                armedAt[op.name!] = try #require(op.deadline)
                expired.append(op)
            } else {
                op.cancel(after: .seconds(3600))  // finishes long before
                completed.append(op)
            }
            try queue.addOperation(op)
        }
        // One deadline shared by all 200 waits: a deadline per wait would add up to 200 × qtDeadline (a hang, in
        // effect) if the operations never finished, e.g. when a fired deadline no longer lets a waiting one finish.
        let end = SpindleDeadline.after(.seconds(qtDeadline))
        let unfinished = (completed + expired).filter { (try? $0.waitUntilFinished(until: end)) != true }
        #expect(unfinished.isEmpty, "\(unfinished.count) did not finish: \(unfinished.prefix(4).map(\.displayName))")
        try blocker.start()
        qtDrain(queue)
        #expect(expired.allSatisfy { $0.deadlineExpired && $0.runs.count == 0 })
        // In time order: the cancellations came in the order of the deadlines.
        let inDeadlineOrder = expired.map { $0.name! }.sorted { armedAt[$0]! < armedAt[$1]! }
        #expect(fired.all == inDeadlineOrder, "deadlines fired out of time order")
        #expect(completed.allSatisfy { !$0.isCancelled && $0.runs.count == 1 && $0.deadline == nil })
    }
}

/// Spins in `main` until it is cancelled (bounded by the tests' deadline), telling when it started and whether
/// it saw the cancellation.
final class BTSpinUntilCancelledOp: SpindleOperation, @unchecked Sendable {
    let started: QTGate
    let sawCancel: QTFlag
    init(started: QTGate, sawCancel: QTFlag) {
        self.started = started
        self.sawCancel = sawCancel
        super.init()
    }
    override func main() throws {
        self.started.open()
        let end = monotonicSeconds() + qtDeadline
        while monotonicSeconds() < end {
            if self.isCancelled {
                self.sawCancel.set()
                return
            }
        }
    }
}
