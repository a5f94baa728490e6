import CShim
import Glibc
import Synchronization
import Testing
@testable import Spindle

/// What a thread saw of its priority: Spindle's value and the kernel's nice value, inside and after `main`.
private struct PrioritySnapshot: Sendable {
    var insidePriority = -1.0
    var insideNice: Int32 = 99
    var afterPriority = -1.0
    var afterNice: Int32 = 99
    var beforeNice: Int32 = 99
}

/// Runs an operation with thread priority `wanted` by hand on a fresh thread spawned with `threadPriority`
/// (a fresh thread, so the test runner's own threads are never re-niced).
private func runWithPriority(_ wanted: Double?, onThreadWith threadPriority: Double) throws -> PrioritySnapshot? {
    let snapshot = OpBox(PrioritySnapshot())
    let runner = try OpThread.run("op-priority", priority: threadPriority) {
        let tid = cshim_gettid()
        let op = OpProbe { _ in
            var s = snapshot.value
            s.insidePriority = SpindleThread.current.priority
            s.insideNice = opNiceValue(tid: tid)
            snapshot.value = s
        }
        if let wanted { op.threadPriority = wanted }
        var s = snapshot.value
        s.beforeNice = opNiceValue(tid: tid)
        snapshot.value = s
        try? op.start()
        s = snapshot.value
        s.afterPriority = SpindleThread.current.priority
        s.afterNice = opNiceValue(tid: tid)
        snapshot.value = s
    }
    guard runner.finish() else { return nil }
    return snapshot.value
}

/// SEMANTICS F45, F46, F51: queue priority and thread priority of an operation.
@Suite struct OperationPriorityTests {
    // F45
    @Test func defaultQueuePriorityIsNormal() {
        #expect(SpindleOperation().queuePriority == .normal)
        #expect(SpindleBlockOperation().queuePriority == .normal)
    }

    @Test func queuePriorityRoundTripsAndIsObservable() {
        let op = SpindleOperation()
        let changes = opRecordChanges(op, keys: [.queuePriority])
        for priority in SpindleOperation.QueuePriority.allCases {
            op.queuePriority = priority
            #expect(op.queuePriority == priority)
        }
        // normal → veryLow → low → normal → high → veryHigh: five changes.
        #expect(changes.all.filter { $0 == "did queuePriority" }.count == 5)
        op.queuePriority = .veryHigh
        #expect(changes.all.filter { $0 == "did queuePriority" }.count == 5, "setting the same value emits nothing")
        #expect(opProtocolViolations(changes.all).isEmpty)
    }

    // F46: raw values move toward normal and stop at the first level.
    @Test(arguments: [
        (10_000, SpindleOperation.QueuePriority.veryHigh), (-10_000, .veryLow), (-6, .low), (-2, .normal),
        (2, .normal), (6, .high), (8, .veryHigh), (4, .high), (0, .normal), (-4, .low), (-8, .veryLow),
        (3, .normal), (-3, .normal), (7, .high), (-7, .low), (9, .veryHigh), (-9, .veryLow),
        (Int.max, .veryHigh), (Int.min, .veryLow),
    ])
    func rawPrioritiesRoundTowardNormal(raw: Int, expected: SpindleOperation.QueuePriority) {
        #expect(SpindleOperation.QueuePriority.rounding(raw) == expected)
    }

    @Test func levelsAreOrdered() {
        let levels: [SpindleOperation.QueuePriority] = [.veryLow, .low, .normal, .high, .veryHigh]
        #expect(levels == levels.sorted())
        #expect(levels.map(\.rawValue) == [-8, -4, 0, 4, 8])
        #expect(levels.map { SpindleOperation.QueuePriority.rounding($0.rawValue) } == levels)
    }

    @Test func storedRawValueReadsRounded() {
        let op = SpindleOperation()
        op.priorityStorage.store(6, ordering: .relaxed)
        #expect(op.queuePriority == .high)
        op.priorityStorage.store(-128, ordering: .relaxed)
        #expect(op.queuePriority == .veryLow)
    }

    // F51
    @Test func threadPriorityDefaultsToHalfAndIsClamped() {
        let op = SpindleOperation()
        #expect(op.threadPriority == 0.5)
        op.threadPriority = 0.8
        #expect(op.threadPriority == 0.8)
        op.threadPriority = 1.7
        #expect(op.threadPriority == 1)
        op.threadPriority = -3
        #expect(op.threadPriority == 0)
        op.threadPriority = .infinity
        #expect(op.threadPriority == 1)
        op.threadPriority = -.infinity
        #expect(op.threadPriority == 0)
        op.threadPriority = .nan
        #expect(op.threadPriority.isFinite && op.threadPriority >= 0 && op.threadPriority <= 1)
    }

    @Test func lowerThreadPriorityIsAppliedWhileMainRunsAndRestoredAfter() throws {
        let s = try #require(try runWithPriority(0.25, onThreadWith: 0.5))
        #expect(s.beforeNice == SpindleThread.niceValue(forPriority: 0.5))
        #expect(s.insidePriority == 0.25)
        #expect(s.insideNice == SpindleThread.niceValue(forPriority: 0.25))
        #expect(s.insideNice == 10)
        #expect(s.afterPriority == 0.5)
        #expect(s.afterNice == SpindleThread.niceValue(forPriority: 0.5), "the kernel value is restored too")
    }

    // Raising above nice 0 needs CAP_SYS_NICE; without it the kernel keeps its value, so only run it as root.
    @Test(.enabled(if: geteuid() == 0, "needs CAP_SYS_NICE"))
    func higherThreadPriorityIsAppliedWhileMainRunsAndRestoredAfter() throws {
        let s = try #require(try runWithPriority(0.9, onThreadWith: 0.5))
        #expect(s.insidePriority == 0.9)
        #expect(s.insideNice == SpindleThread.niceValue(forPriority: 0.9))
        #expect(s.afterPriority == 0.5)
        #expect(s.afterNice == SpindleThread.niceValue(forPriority: 0.5))
    }

    @Test func defaultThreadPriorityIsAppliedOnALoweredThreadAndTheThreadsOwnIsRestored() throws {
        let s = try #require(try runWithPriority(nil, onThreadWith: 0.2))
        #expect(s.beforeNice == SpindleThread.niceValue(forPriority: 0.2))
        #expect(s.insidePriority == 0.5)
        #expect(s.insideNice == SpindleThread.niceValue(forPriority: 0.5))
        #expect(s.afterPriority == 0.2)
        #expect(s.afterNice == SpindleThread.niceValue(forPriority: 0.2))
    }

    @Test func threadPriorityIsRestoredWhenMainThrows() throws {
        struct Oops: Error {}
        let after = OpBox<(Double, Int32)>((-1, 99))
        let runner = try OpThread.run("op-priority") {
            let op = OpProbe { _ in throw Oops() }
            op.threadPriority = 0.1
            try? op.start()
            after.value = (SpindleThread.current.priority, opNiceValue(tid: cshim_gettid()))
        }
        #expect(runner.finish())
        #expect(after.value.0 == 0.5)
        #expect(after.value.1 == SpindleThread.niceValue(forPriority: 0.5))
    }
}
