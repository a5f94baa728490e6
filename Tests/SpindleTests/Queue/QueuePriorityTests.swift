import Testing

@testable import Spindle

/// Priority orders only ready operations, highest first, FIFO within a level; changes while waiting take effect;
/// dependencies beat priority (contract item 8; catalogue E43, F47–F50).
@Suite struct QueuePriorityTests {
    typealias Priority = SpindleOperation.QueuePriority

    private func recordingOp(_ label: String, _ log: QTLog<String>, _ priority: Priority) -> SpindleBlockOperation {
        let op = qtNamed(label) { log.append(label) }
        op.queuePriority = priority
        return op
    }

    @Test func suspendedSerialQueueRunsByPriorityThenFIFOAfterResume() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = QTLog<String>()
        // Interleaved arrival: levels in a scrambled order, three rounds.
        let arrival: [Priority] = [.normal, .veryLow, .high, .low, .veryHigh]
        for round in 0..<3 {
            for level in arrival {
                try queue.addOperation(self.recordingOp("\(level)-\(round)", log, level))
            }
        }
        #expect(queue.operationCount == 15)
        #expect(log.count == 0)
        queue.isSuspended = false
        qtDrain(queue)
        let expected = [Priority.veryHigh, .high, .normal, .low, .veryLow].flatMap { level in
            (0..<3).map { "\(level)-\($0)" }
        }
        #expect(log.all == expected)
    }

    @Test func equalPrioritiesRunInTheOrderAdded() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        for i in 0..<50 { try queue.addOperation(self.recordingOp("\(i)", log, .normal)) }
        qtDrain(queue)
        #expect(log.all == (0..<50).map { "\($0)" })
    }

    @Test func priorityRaisedWhileWaitingOnASuspendedQueueMovesAhead() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = QTLog<String>()
        let a = self.recordingOp("a", log, .normal)
        let b = self.recordingOp("b", log, .normal)
        let c = self.recordingOp("c", log, .normal)
        let d = self.recordingOp("d", log, .high)
        try queue.addOperations([a, b, c, d])
        c.queuePriority = .veryHigh
        d.queuePriority = .veryLow
        #expect(c.queuePriority == .veryHigh)
        queue.isSuspended = false
        qtDrain(queue)
        #expect(log.all == ["c", "a", "b", "d"])
    }

    @Test func priorityRaisedWhileWaitingBehindARunningOperationMovesAhead() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        let started = QTGate(), release = QTGate()
        queue.addOperation {
            started.open()
            release.wait()
            log.append("blocker")
        }
        #expect(started.wait())
        let ops = (0..<4).map { self.recordingOp("\($0)", log, .normal) }
        try queue.addOperations(ops)
        ops[3].queuePriority = .high
        ops[2].queuePriority = .veryHigh
        release.open()
        qtDrain(queue)
        #expect(log.all == ["blocker", "2", "3", "0", "1"])
    }

    @Test func aBatchOnARunningSerialQueueRespectsPriority() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let log = QTLog<String>()
        // The queue is running and has a warm worker parked: the batch must still be ordered as a whole.
        queue.addOperation {}
        qtDrain(queue)
        let levels: [Priority] = [.veryLow, .low, .normal, .high, .veryHigh]
        let ops = levels.map { self.recordingOp("\($0)", log, $0) }
        try queue.addOperations(ops)
        qtDrain(queue)
        #expect(log.all == ["veryHigh", "high", "normal", "low", "veryLow"])
    }

    @Test func dependenciesBeatPriority() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = QTLog<String>()
        let x = self.recordingOp("x", log, .veryLow)
        let y = self.recordingOp("y", log, .veryHigh)
        let z = self.recordingOp("z", log, .normal)
        try y.addDependency(x)
        try queue.addOperations([y, z, x])
        queue.isSuspended = false
        qtDrain(queue)
        // Only ready operations are ordered: z (normal) and x (veryLow) first; y once x has finished.
        #expect(log.all == ["z", "x", "y"])
    }

    @Test func priorityOrdersOnlyReadyOperations() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        queue.isSuspended = true
        let log = QTLog<String>()
        let external = qtNamed("external")  // never added anywhere: keeps `blocked` waiting
        let blocked = self.recordingOp("blocked", log, .veryHigh)
        try blocked.addDependency(external)
        let low = self.recordingOp("low", log, .veryLow)
        try queue.addOperations([blocked, low])
        queue.isSuspended = false
        #expect(try low.waitUntilFinished(timeout: .seconds(qtDeadline)))
        #expect(log.all == ["low"])
        #expect(!blocked.isExecuting && !blocked.isFinished)
        blocked.removeDependency(external)
        qtDrain(queue)
        #expect(log.all == ["low", "blocked"])
    }
}
