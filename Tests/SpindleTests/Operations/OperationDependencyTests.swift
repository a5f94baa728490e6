import Synchronization
import Testing
@testable import Spindle

/// A link of a long chain: checks that links run in order.
private final class ChainLink: SpindleOperation, @unchecked Sendable {
    let index: Int
    let next: OpCounter
    let outOfOrder: OpCounter

    init(index: Int, next: OpCounter, outOfOrder: OpCounter) {
        self.index = index
        self.next = next
        self.outOfOrder = outOfOrder
        super.init()
    }

    override func main() throws {
        if self.next.exchange(self.index + 1) != self.index {
            self.outOfOrder.increment()
        }
    }
}

private func ids(_ ops: [SpindleOperation]) -> [ObjectIdentifier] { ops.map(ObjectIdentifier.init) }

/// SEMANTICS E32–E37 and Part 1 item 2 (cycles rejected), without queues.
@Suite struct OperationDependencyTests {
    // E32
    @Test func dependencyIsListedAndHoldsTheOperationBack() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        #expect(ids(b.dependencies) == ids([a]))
        #expect(!b.isReady)
        #expect(a.isReady)
        #expect(a.dependencies.isEmpty)
    }

    // E33
    @Test func sameDependencyTwiceIsListedOnce() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        try b.addDependency(a)
        #expect(ids(b.dependencies) == ids([a]))
        try a.start()
        #expect(b.isReady, "counted once: one finish releases it")
    }

    @Test func manyDependenciesAreDeduplicatedAndKeepTheirOrder() throws {
        let deps = (0..<20).map { _ in OpProbe() }
        let b = OpProbe()
        for dep in deps + deps.reversed() { try b.addDependency(dep) }
        #expect(ids(b.dependencies) == ids(deps))
        for dep in deps.dropLast() { try dep.start() }
        #expect(!b.isReady)
        try deps.last!.start()
        #expect(b.isReady)
    }

    // E34
    @Test func selfDependencyThrowsAndChangesNothing() throws {
        let a = OpProbe(name: "loner")
        var thrown: SpindleError?
        do { try a.addDependency(a) } catch { thrown = error }
        #expect(thrown.map { Mirror(reflecting: $0).children.first?.label } == "selfDependency")
        #expect(thrown.flatMap(opErrorName) == "loner")
        #expect(a.dependencies.isEmpty)
        #expect(a.isReady)
        try a.start()
        #expect(a.mainRuns.value == 1)
    }

    // E35
    @Test func finishingTheDependencyMakesTheDependentReadyAndStaysListed() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        let changes = opRecordChanges(b, keys: [.isReady])
        try a.start()
        #expect(b.isReady)
        #expect(changes.all.contains("did isReady"))
        #expect(ids(b.dependencies) == ids([a]), "a finished dependency stays listed")
        try b.start()
        #expect(b.mainRuns.value == 1)
    }

    @Test func addingAFinishedDependencyKeepsTheOperationReady() throws {
        let a = OpProbe()
        try a.start()
        #expect(a.isReady, "a finished operation reports ready")
        let b = OpProbe()
        try b.addDependency(a)
        #expect(b.isReady)
        #expect(ids(b.dependencies) == ids([a]))
        try b.start()
        #expect(b.isFinished)
    }

    // E36
    @Test func removeDependencyMakesTheOperationReady() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        let changes = opRecordChanges(b, keys: [.isReady])
        b.removeDependency(a)
        #expect(b.isReady)
        #expect(b.dependencies.isEmpty)
        #expect(changes.all.contains("did isReady"))
        try b.start()
        #expect(b.mainRuns.value == 1)
        try a.start()
        #expect(a.isFinished)
    }

    @Test func removeDependencyKeepsOtherDependenciesCounted() throws {
        let a = OpProbe()
        let c = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        try b.addDependency(c)
        b.removeDependency(a)
        #expect(!b.isReady, "c still holds it back")
        b.removeDependency(OpProbe())
        #expect(b.dependencies.count == 1, "removing a non-dependency does nothing")
        try c.start()
        #expect(b.isReady)
    }

    @Test func removingAFinishedDependencyLeavesTheOperationReady() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        try a.start()
        b.removeDependency(a)
        #expect(b.isReady)
        #expect(b.dependencies.isEmpty)
        try b.start()
        #expect(b.isFinished)
    }

    // E37
    @Test func cancelledUnstartedDependencyKeepsTheDependentNotReady() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        a.cancel()
        #expect(!b.isReady)
        #expect(opErrorCase { try b.start() } == "operationNotReady")
        try a.start()
        #expect(a.isFinished && a.mainRuns.value == 0)
        #expect(b.isReady, "a cancelled dependency that finished releases the dependent")
    }

    // Part 1 item 2: cycles of length 2, 3 and 50 are rejected, named, and change nothing.
    @Test(arguments: [2, 3, 50])
    func cycleIsRejectedNamedAndChangesNothing(length: Int) throws {
        let ops = (0..<length).map { OpProbe(name: "op\($0)") }
        // op0 ← op1 ← … ← op(n-1): each depends on the previous one.
        for i in 1..<length { try ops[i].addDependency(ops[i - 1]) }
        let before = ops.map { ids($0.dependencies) }
        let readiness = ops.map(\.isReady)
        var cycle: [String]?
        do {
            try ops[0].addDependency(ops[length - 1])
        } catch .dependencyCycle(let names) {
            cycle = names
        } catch {
            Issue.record("unexpected \(error)")
        }
        #expect(cycle != nil, "closing the cycle throws dependencyCycle")
        if let cycle {
            #expect(Set(cycle) == Set(ops.map(\.displayName)), "the error names every operation on the cycle")
            #expect(cycle.first == "op0")
            #expect(SpindleError.dependencyCycle(cycle: cycle).description.contains("op\(length - 1)"))
        }
        #expect(ops.map { ids($0.dependencies) } == before, "the graph is unchanged")
        #expect(ops.map(\.isReady) == readiness)
        for op in ops { try op.start() }
        let allFinished = ops.allSatisfy(\.isFinished)
        #expect(allFinished, "the chain still runs in order")
    }

    @Test func aDiamondIsNotACycle() throws {
        let top = OpProbe(), left = OpProbe(), right = OpProbe(), bottom = OpProbe()
        try left.addDependency(top)
        try right.addDependency(top)
        try bottom.addDependency(left)
        try bottom.addDependency(right)
        #expect(opErrorCase { try top.addDependency(bottom) } == "dependencyCycle")
        for op in [top, left, right, bottom] { try op.start() }
        let allFinished = [top, left, right, bottom].allSatisfy(\.isFinished)
        #expect(allFinished)
    }

    @Test func aFinishedOperationCannotCloseACycle() throws {
        let a = OpProbe()
        let b = OpProbe()
        try b.addDependency(a)
        try a.start()
        try b.start()
        #expect(opErrorCase { try a.addDependency(b) } == nil, "b is finished: no live cycle")
    }

    // A 100,000-long chain built the common way (each new operation depends on the previous one).
    @Test func longChainBuildsAndRunsInOrder() throws {
        let count = 100_000
        let next = OpCounter()
        let outOfOrder = OpCounter()
        var ops: [ChainLink] = []
        ops.reserveCapacity(count)
        for i in 0..<count {
            let op = ChainLink(index: i, next: next, outOfOrder: outOfOrder)
            if let previous = ops.last { try op.addDependency(previous) }
            ops.append(op)
        }
        #expect(ops[0].isReady)
        #expect(!ops[1].isReady)
        #expect(!ops[count - 1].isReady)
        #expect(opErrorCase { try ops[count - 1].start() } == "operationNotReady")
        for op in ops { try op.start() }
        let allFinished = ops.allSatisfy(\.isFinished)
        #expect(allFinished)
        #expect(next.value == count)
        #expect(outOfOrder.value == 0)
        // Unlink before release: a 100,000-deep chain of strong dependency references would otherwise be
        // released recursively.
        for i in stride(from: count - 1, to: 0, by: -1) { ops[i].removeDependency(ops[i - 1]) }
    }

    // Part 1 item 9: nothing outlives what owns it. A dependency pair that is never run must be freed.
    @Test func unfinishedDependencyPairIsFreedWhenReleased() throws {
        weak var weakA: OpProbe?
        weak var weakB: OpProbe?
        do {
            let a = OpProbe()
            let b = OpProbe()
            try b.addDependency(a)
            weakA = a
            weakB = b
        }
        #expect(weakB == nil, "the dependent is freed (the dependency must not keep it alive)")
        #expect(weakA == nil, "the dependency is freed with its dependent")
    }

    @Test func finishedDependencyPairIsFreedWhenReleased() throws {
        weak var weakA: OpProbe?
        weak var weakB: OpProbe?
        do {
            let a = OpProbe()
            let b = OpProbe()
            try b.addDependency(a)
            try a.start()
            try b.start()
            weakA = a
            weakB = b
        }
        #expect(weakA == nil)
        #expect(weakB == nil)
    }
}
