import Testing

@testable import Spindle

/// `SpindleGroupOperation` misuse (a typed error, nothing changed) and waits from inside the group.
@Suite struct GroupOperationMisuseTests {
    @Test func addingToAFinishedGroupThrowsAndLeavesTheOperationUntouched() throws {
        let group = try SpindleGroupOperation(operations: [GTChild("only")])
        try group.start()
        gtWait(group)
        let late = GTChild("late")
        expectSpindleError(.groupFinished(name: group.displayName)) { try group.addOperation(late) }
        expectSpindleError(.groupFinished(name: group.displayName)) { try group.addOperations([late]) }
        #expect(group.unfinishedChildCount == 0 && late.parentGroup == nil)
        try late.start()  // still an ordinary idle operation
        #expect(late.runs.count == 1)
    }

    @Test func aGroupCannotContainItselfOrAGroupItIsInside() throws {
        let innermost = try SpindleGroupOperation()
        innermost.name = "innermost"
        let middle = try SpindleGroupOperation(operations: [innermost])
        middle.name = "middle"
        let outer = try SpindleGroupOperation(operations: [middle])
        outer.name = "outer"
        expectSpindleError(.groupCycle(group: "outer", child: "outer")) { try outer.addOperation(outer) }
        expectSpindleError(.groupCycle(group: "innermost", child: "outer")) { try innermost.addOperation(outer) }
        expectSpindleError(.groupCycle(group: "innermost", child: "middle")) { try innermost.addOperation(middle) }
        #expect(innermost.unfinishedChildCount == 0 && outer.unfinishedChildCount == 1)
        try outer.start()
        gtWait(outer)
        #expect(middle.isFinished && innermost.isFinished)
    }

    /// A child that waited for its own group (or a group around it) would never finish, nor would the group: the
    /// dependency is refused as a cycle, in either order of making the two links, and nothing changes.
    @Test func aChildCannotWaitForAGroupItIsInside() throws {
        let child = GTChild("child")
        let inner = try SpindleGroupOperation(operations: [child])
        inner.name = "inner"
        let outer = try SpindleGroupOperation(operations: [inner])
        outer.name = "outer"
        expectSpindleError(.dependencyCycle(cycle: ["child", "inner (contains child)"])) {
            try child.addDependency(inner)
        }
        expectSpindleError(.dependencyCycle(cycle: ["child", "outer (contains child)"])) {
            try child.addDependency(outer)
        }
        let bridge = GTChild("bridge")  // outside both groups, waiting for the outer one
        try bridge.addDependency(outer)
        expectSpindleError(.dependencyCycle(cycle: ["child", "bridge", "outer (contains child)"])) {
            try child.addDependency(bridge)
        }
        #expect(child.dependencies.isEmpty)

        // The other order: the dependency first, then the add to the group.
        let late = GTChild("late")
        try late.addDependency(bridge)
        expectSpindleError(.dependencyCycle(cycle: ["late", "bridge", "outer (contains late)"])) {
            try inner.addOperation(late)
        }
        #expect(late.parentGroup == nil && inner.unfinishedChildCount == 1)

        let queue = SpindleOperationQueue(name: "group-cycles")
        try queue.addOperations([outer, bridge])
        gtWait(bridge)
        #expect(child.runs.count == 1 && outer.isFinished)
        try late.start()  // untouched by the refused add: an ordinary operation
        #expect(late.runs.count == 1)
    }

    /// A child waiting for the queue that runs its group would wait for the group's slot, which is held until the
    /// child is through: refused with `waitOnOwnQueue` (found by review: the untimed forms hung).
    @Test func aChildCannotWaitForItsGroupsQueue() throws {
        let queue = try SpindleOperationQueue(name: "outer-serial", maxConcurrentOperationCount: 1)
        let outcomes = QTLog<String>()
        let child = GTChild("child") { _ in
            outcomes.append(opErrorCase { try queue.waitUntilAllOperationsAreFinished() } ?? "no error")
            outcomes.append(opErrorCase { try queue.addOperations([GTChild("x")], waitUntilFinished: true) } ?? "no error")
            outcomes.append(opErrorCase { _ = try queue.addOperationAndWait { 1 } } ?? "no error")
        }
        let inner = try SpindleGroupOperation(operations: [child])
        let outer = try SpindleGroupOperation(operations: [inner])
        try queue.addOperation(outer)
        gtWait(outer)
        #expect(outcomes.all == ["waitOnOwnQueue", "waitOnOwnQueue", "waitOnOwnQueue"])
        try queue.waitUntilAllOperationsAreFinished()
    }

    @Test func anOperationInAQueueOrAnotherGroupCannotBeAdded() throws {
        let queue = SpindleOperationQueue()
        queue.isSuspended = true
        let queued = GTChild("queued")
        try queue.addOperation(queued)
        let other = try SpindleGroupOperation()
        let taken = GTChild("taken")
        try other.addOperation(taken)
        let group = try SpindleGroupOperation()
        expectSpindleError(.operationAlreadyInQueue(name: "queued")) { try group.addOperation(queued) }
        expectSpindleError(.operationAlreadyInQueue(name: "taken")) { try group.addOperation(taken) }
        #expect(group.unfinishedChildCount == 0 && taken.parentGroup === other && queued.parentGroup == nil)
        let finished = GTChild("finished")
        try finished.start()
        expectSpindleError(.operationFinished(name: "finished")) { try group.addOperation(finished) }
        queue.isSuspended = false
        qtDrain(queue)
        try other.start()
        gtWait(other)
    }

    @Test func aBatchIsAllOrNothing() throws {
        let group = try SpindleGroupOperation()
        let a = GTChild("a")
        let b = GTChild("b")
        expectSpindleError(.duplicateInBatch(name: "a")) { try group.addOperations([a, b, a]) }
        let finished = GTChild("finished")
        try finished.start()
        expectSpindleError(.operationFinished(name: "finished")) { try group.addOperations([a, b, finished]) }
        #expect(group.unfinishedChildCount == 0 && group.inner.operationCount == 0)
        #expect(a.parentGroup == nil && b.parentGroup == nil && !a.isFinished && !b.isFinished)
        try group.addOperations([a, b])  // both still fine
        try group.start()
        gtWait(group)
        #expect(a.runs.count == 1 && b.runs.count == 1)
    }

    @Test func aGroupFinishesByItselfStartsOnceAndNeedsAValidWidth() throws {
        let child = GTChild("child", waits: true)
        let group = try SpindleGroupOperation(operations: [child])
        group.name = "g"
        expectSpindleError(.groupFinishesByItself(name: "g")) { try group.finish() }
        try group.start()
        expectSpindleError(.operationExecuting(name: "g")) { try group.start() }
        expectSpindleError(.groupFinishesByItself(name: "g")) { try group.finish(throwing: BTError(code: 1)) }
        #expect(group.isExecuting)
        child.proceed()
        gtWait(group)
        #expect(group.error == nil)
        expectSpindleError(.invalidConcurrencyLimit(-2)) { _ = try SpindleGroupOperation(maxConcurrentOperationCount: -2) }
        expectSpindleError(.invalidConcurrencyLimit(-5)) { try group.setMaxConcurrentOperationCount(-5) }
        expectSpindleError(.operationFinished(name: "finished")) {
            let finished = GTChild("finished")
            try finished.start()
            _ = try SpindleGroupOperation(operations: [finished])
        }
    }

    /// A child (or a grandchild, or a child's completion block, or `childDidFinish`) waiting for its group would
    /// wait for itself: refused with a typed error, never a hang. Waiting from outside works.
    @Test func waitingForTheGroupFromInsideThrows() throws {
        let outcomes = QTLog<String>()
        final class Hook: SpindleGroupOperation, @unchecked Sendable {
            let outcomes = QTLog<String>()
            override func childDidFinish(_ child: SpindleOperation) {
                do { _ = try self.waitUntilFinished(timeout: .seconds(5)) } catch { self.outcomes.append("\(error)") }
            }
        }
        let outer = try Hook()
        outer.name = "outer"
        let inner = try SpindleGroupOperation()
        inner.name = "inner"
        let child = GTChild("child") { [unowned outer, unowned inner] _ in
            do { try outer.waitUntilFinished() } catch { outcomes.append("main outer: \(error)") }
            do { _ = try inner.waitUntilFinished(timeout: .seconds(5)) } catch { outcomes.append("main inner: \(error)") }
        }
        child.completionBlock = { [unowned outer] in
            do { try outer.waitUntilFinished() } catch { outcomes.append("completion outer: \(error)") }
        }
        try inner.addOperation(child)
        try outer.addOperation(inner)
        let queue = SpindleOperationQueue()
        try queue.addOperation(outer)
        try outer.waitUntilFinished()  // from outside: fine
        #expect(outer.isFinished && inner.isFinished && child.isFinished)
        let refusedOuter = SpindleError.waitOnOwnGroup(name: "outer").description
        let refusedInner = SpindleError.waitOnOwnGroup(name: "inner").description
        #expect(outcomes.all == ["main outer: \(refusedOuter)", "main inner: \(refusedInner)",
                                 "completion outer: \(refusedOuter)"])
        #expect(outer.outcomes.all == [SpindleError.waitOnSelf(name: "outer").description])
        qtDrain(queue)
    }

    @Test func anAsyncChildAwaitingItsGroupIsRefused() async throws {
        final class Awaiting: SpindleAsyncOperation, @unchecked Sendable {
            let outcome = QTLog<String>()
            weak var group: SpindleGroupOperation?
            override func asyncMain() async throws {
                do { try await self.group?.waitUntilFinished() } catch { self.outcome.append("\(error)") }
            }
        }
        let child = Awaiting()
        let group = try SpindleGroupOperation(operations: [child])
        group.name = "g"
        child.group = group
        try group.start()
        try await group.waitUntilFinished()
        #expect(child.outcome.all == [SpindleError.waitOnOwnGroup(name: "g").description])
    }
}
