import Testing

@testable import Spindle

/// `SpindleGroupOperation`: children run on the group's inner queue once it starts, the group finishes exactly once
/// after every child, children join while it runs, cancellation cascades, errors are aggregated, and the group
/// holds no thread while its children run.
@Suite struct GroupOperationTests {
    @Test func itFinishesOnceAfterEveryChildAndItsCompletionBlock() throws {
        let queue = SpindleOperationQueue()
        let completions = QTCounter()
        let children = (0..<8).map { GTChild("c\($0)", completions: completions) }
        let group = try SpindleGroupOperation(operations: children, maxConcurrentOperationCount: 3)
        let witness = GTFinishWitness(group, children: { children }, completions: completions)
        let groupCompletion = QTCounter()
        group.completionBlock = { groupCompletion.increment() }
        try queue.addOperation(group)
        gtWait(group)
        #expect(children.allSatisfy { $0.runs.count == 1 })
        #expect(witness.finishedOnceAfterChildren, "the group finished before a child, or more than once")
        #expect(groupCompletion.count == 1 && group.error == nil && !group.hasFailed && !group.isCancelled)
        #expect(group.unfinishedChildCount == 0)
        qtDrain(queue)
    }

    @Test func childrenWaitInASuspendedInnerQueueUntilTheGroupStarts() throws {
        let children = (0..<3).map { GTChild("c\($0)") }
        let group = try SpindleGroupOperation(operations: children)
        #expect(group.inner.isSuspended && group.inner.operationCount == 3 && group.unfinishedChildCount == 3)
        #expect(qtWorkerThreadCount(group.inner) == 0, "a group that has not started needs no thread")
        #expect(children.allSatisfy { $0.runs.count == 0 && !$0.isFinished })
        try group.start()  // by hand: returns at once, the children run on the inner queue
        gtWait(group)
        #expect(children.allSatisfy { $0.runs.count == 1 })
    }

    @Test func anEmptyGroupFinishesWhenItStarts() throws {
        let group = try SpindleGroupOperation()
        try group.start()
        #expect(group.isFinished && !group.isExecuting && group.error == nil)
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let other = try SpindleGroupOperation()
        try queue.addOperation(other)
        gtWait(other)
        qtDrain(queue)
    }

    @Test func aChildAddedWhileTheGroupRunsIsWaitedFor() throws {
        let queue = SpindleOperationQueue()
        let first = GTChild("first", waits: true)
        let group = try SpindleGroupOperation(operations: [first])
        try queue.addOperation(group)
        #expect(first.started.wait())
        #expect(group.isExecuting)
        let late = GTChild("late", waits: true)
        try group.addOperation(late)
        first.proceed()
        #expect(late.started.wait(), "a child added while the group runs did not run")
        #expect(!group.isFinished, "the group finished while a child it accepted was running")
        late.proceed()
        gtWait(group)
        #expect(late.runs.count == 1 && first.runs.count == 1)
        qtDrain(queue)
    }

    @Test func childrenAddFollowUpsFromTheirMainWithAddOperationAndProduce() throws {
        let queue = SpindleOperationQueue()
        let ran = QTLog<String>()
        let group = try SpindleGroupOperation()
        let parent = GTChild("parent") { [unowned group] op in
            ran.append("parent")
            try group.addOperation(GTChild("added") { _ in ran.append("added") })
            try op.produce(GTChild("produced") { _ in ran.append("produced") })
        }
        try group.addOperation(parent)
        let witness = GTFinishWitness(group, children: { [] })
        let ranWhenFinished = QTLog<Int>()
        group.completionBlock = { ranWhenFinished.append(ran.count) }
        try queue.addOperation(group)
        gtWait(group)
        #expect(Set(ran.all) == ["parent", "added", "produced"] && ran.count == 3)
        #expect(ranWhenFinished.all == [3], "the group finished before its children's follow-ups")
        #expect(witness.finishedCount.count == 1)
        qtDrain(queue)
    }

    /// The sample's pattern: a subclass reacting to each child, adding a follow-up even after the last child.
    @Test func childDidFinishCanAddFollowUpsAfterTheLastChild() throws {
        final class Chain: SpindleGroupOperation, @unchecked Sendable {
            let seen = QTLog<String>()
            override func childDidFinish(_ child: SpindleOperation) {
                self.seen.append(child.name ?? "?")
                guard let name = child.name, name.count < 4 else { return }
                try! self.addOperation(GTChild(name + "+"))  // always accepted: the child is still counted
            }
        }
        let group = try Chain(operations: [GTChild("a")])
        try group.start()
        gtWait(group)
        #expect(group.seen.all == ["a", "a+", "a++", "a+++"])
    }

    @Test func cancellingTheGroupCancelsItsWaitingAndRunningChildren() throws {
        let queue = SpindleOperationQueue()
        let running = GTChild("running", waits: true)
        let waiting = (0..<3).map { GTChild("waiting\($0)") }
        let group = try SpindleGroupOperation(operations: [running] + waiting, maxConcurrentOperationCount: 1)
        try queue.addOperation(group)
        #expect(running.started.wait())
        group.cancel()
        gtWait(group)
        #expect(group.isCancelled && running.isCancelled && running.runs.count == 1)
        #expect(waiting.allSatisfy { $0.isCancelled && $0.isFinished && $0.runs.count == 0 },
                "\(waiting.map { "\($0.description) ran \($0.runs.count)x" })")
        let late = GTChild("late")
        expectSpindleError(.groupFinished(name: group.displayName)) { try group.addOperation(late) }
        qtDrain(queue)
    }

    @Test func aChildAddedAfterTheGroupWasCancelledIsFinishedUnrunAtOnce() throws {
        let queue = SpindleOperationQueue()
        let holder = GTChild("holder", waits: true)
        let group = try SpindleGroupOperation(operations: [holder])
        try queue.addOperation(group)
        #expect(holder.started.wait())
        group.cancel()  // the holder returns at once; a child added right now is either refused or finished unrun
        let completions = QTCounter()
        let late = GTChild("late", completions: completions)
        let refused: SpindleError?
        do {
            try group.addOperation(late)
            refused = nil
        } catch {
            refused = error
        }
        if let refused {
            #expect(refused.description == SpindleError.groupFinished(name: group.displayName).description)
            #expect(!late.isFinished && !late.isCancelled)
        } else {
            // On this thread, before the add returned.
            #expect(late.isCancelled && late.isFinished && late.runs.count == 0 && completions.count == 1)
        }
        gtWait(group)
        qtDrain(queue)
    }

    /// Cancelling a group that has not started finishes its children now (unrun); the group finishes when started.
    @Test func aGroupCancelledBeforeItStartedLetsItsChildrenFinishUnrun() throws {
        let completed = QTGate()
        let children = (0..<3).map { GTChild("c\($0)") }
        for child in children { child.completionBlock = { completed.open() } }
        let group = try SpindleGroupOperation(operations: children)
        group.cancel()
        #expect(children.allSatisfy { $0.isCancelled })
        let late = GTChild("late")
        late.completionBlock = { completed.open() }
        try group.addOperation(late)
        #expect(late.isFinished && late.isCancelled, "a child added to a cancelled group was not finished at once")
        for _ in 0..<4 { #expect(completed.wait(), "a child of a cancelled group that never started did not finish") }
        #expect(children.allSatisfy { $0.isFinished && $0.runs.count == 0 })
        #expect(!group.isFinished, "a group finished before it was started")
        try group.start()
        gtWait(group)
        #expect(group.isCancelled && group.unfinishedChildCount == 0)
    }

    @Test func aGroupCancelledBeforeItStartedFinishesUnrunAfterItsChildren() throws {
        let queue = SpindleOperationQueue()
        let completions = QTCounter()
        let children = (0..<4).map { GTChild("c\($0)", completions: completions) }
        let group = try SpindleGroupOperation(operations: children)
        let executed = QTFlag()
        group.observe([.isExecuting]) { _, _ in executed.set() }
        let witness = GTFinishWitness(group, children: { children }, completions: completions)
        group.cancel()
        try queue.addOperation(group)
        gtWait(group)
        #expect(group.isCancelled && !executed.isSet, "a group cancelled before it started reported executing")
        #expect(children.allSatisfy { $0.isCancelled && $0.runs.count == 0 })
        #expect(witness.finishedOnceAfterChildren)
        qtDrain(queue)
    }

    @Test func performOnACancelledGroupFinishesItAfterItsChildren() throws {
        let completions = QTCounter()
        let children = (0..<2).map { GTChild("c\($0)", completions: completions) }
        let group = try SpindleGroupOperation(operations: children)
        let witness = GTFinishWitness(group, children: { children }, completions: completions)
        group.cancel()
        #expect(SpindleOperation.perform(group))
        gtWait(group)
        #expect(witness.finishedOnceAfterChildren && children.allSatisfy { $0.runs.count == 0 && $0.isCancelled })
    }

    @Test func theChildrensErrorsAreTheGroupsErrors() throws {
        let children = [GTChild("ok"), GTChild("bad1", throwing: BTError(code: 1)),
                        GTChild("bad2", throwing: BTError(code: 2))]
        let group = try SpindleGroupOperation(operations: children, maxConcurrentOperationCount: 1)
        try group.start()
        gtWait(group)
        #expect(gtCodes(group.childErrors).sorted() == [1, 2])  // in the order they finished
        let carried = try #require(gtChildrenFailed(group.error))
        #expect(gtCodes(carried) == gtCodes(group.childErrors) && group.hasFailed)
        #expect("\(group.error!)".contains("2 child(ren) of group"))
        // A dependent that asks to be cancelled on a failed dependency is.
        let dependent = SpindleBlockOperation {}
        dependent.cancelsOnFailedDependency = true
        try dependent.addDependency(group)
        try dependent.start()
        #expect(dependent.isCancelled && dependent.cancellationReason == .dependencyFailed)
    }

    @Test func aGroupInsideAGroup() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let deep = (0..<3).map { GTChild("deep\($0)", throwing: $0 == 1 ? BTError(code: 7) : nil) }
        let inner = try SpindleGroupOperation(operations: deep)
        inner.name = "inner"
        let sibling = GTChild("sibling")
        let outer = try SpindleGroupOperation(operations: [inner, sibling])
        let witness = GTFinishWitness(outer, children: { deep + [inner, sibling] })
        try queue.addOperation(outer)
        gtWait(outer)
        #expect(witness.finishedOnceAfterChildren)
        #expect(gtCodes(inner.childErrors) == [7])
        let nested = try #require(outer.childErrors.first as? SpindleError)
        #expect(outer.childErrors.count == 1 && gtCodes(gtChildrenFailed(nested) ?? []) == [7])
        qtDrain(queue)
    }

    /// A width-1 queue running a group (and a plain operation behind it): the group holds the slot, no thread,
    /// while its children run on its inner queue.
    @Test func aGroupOnAWidthOneQueueDoesNotDeadlock() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 1)
        let groups = try (0..<3).map { i in
            try SpindleGroupOperation(operations: (0..<4).map { GTChild("g\(i)c\($0)") },
                                      maxConcurrentOperationCount: 1)
        }
        let after = GTChild("after")
        try queue.addOperations(groups + [after])
        for group in groups { gtWait(group) }
        gtWait(after)
        qtDrain(queue)
    }

    @Test func aDependentOfAGroupRunsAfterEveryChild() throws {
        let queue = SpindleOperationQueue()
        let children = (0..<5).map { GTChild("c\($0)") }
        let group = try SpindleGroupOperation(operations: children)
        let sawAll = QTFlag()
        let dependent = GTChild("dependent") { _ in if children.allSatisfy(\.isFinished) { sawAll.set() } }
        try dependent.addDependency(group)
        try queue.addOperations([dependent, group])
        gtWait(dependent)
        #expect(sawAll.isSet, "a dependent of a group ran before one of its children finished")
        qtDrain(queue)
    }

    @Test func aStartedGroupKeepsItselfAliveAndIsFreedWithItsThreadsAfterFinishing() throws {
        let child = GTChild("child", waits: true)
        let finished = QTGate()
        var weakGroup: QTWeak<SpindleGroupOperation>? = nil
        var weakInner: QTWeak<SpindleOperationQueue>? = nil
        do {
            let group = try SpindleGroupOperation(operations: [child], pool: nil)  // threads of its own
            group.completionBlock = { finished.open() }
            weakGroup = QTWeak(group)
            weakInner = QTWeak(group.inner)
            try group.start()
        }
        #expect(child.started.wait())
        child.proceed()
        #expect(finished.wait(), "a started group released by its caller did not finish")
        #expect(qtWaitUntil { weakGroup!.isGone && weakInner!.isGone }, "the group or its inner queue leaked")
        let tids = child.tids.all
        #expect(!tids.isEmpty && qtWaitUntil { tids.allSatisfy { !qtTaskExists($0) } },
                "the inner queue's thread outlived the released group")
    }

    /// The inner queue is shut down when the group finishes: with threads of its own (`pool: nil`), they leave (and
    /// the kernel thread ends) while the group is still held; the release joins them.
    @Test func theInnerThreadsLeaveWhenTheGroupFinishes() throws {
        let children = (0..<2).map { GTChild("c\($0)") }
        let group = try SpindleGroupOperation(operations: children, maxConcurrentOperationCount: 2, pool: nil)
        try group.start()
        gtWait(group)
        #expect(group.inner.isShutDown)
        let tids = children.flatMap { $0.tids.all }
        #expect(!tids.isEmpty && qtWaitUntil { tids.allSatisfy { !qtTaskExists($0) } },
                "the inner queue's threads outlived the group's finish")
        withExtendedLifetime(group) {}
    }

    @Test func aGroupReleasedBeforeItStartedCancelsItsChildren() throws {
        let completions = QTCounter()
        let children = (0..<3).map { GTChild("c\($0)", completions: completions) }
        var weakGroup: QTWeak<SpindleGroupOperation>? = nil
        do {
            let group = try SpindleGroupOperation(operations: children)
            weakGroup = QTWeak(group)
        }
        #expect(qtWaitUntil { weakGroup!.isGone && completions.count == 3 })
        #expect(children.allSatisfy { $0.isFinished && $0.isCancelled && $0.runs.count == 0 })
    }

    @Test func itsInnerQueueWidthIsConfigurable() throws {
        let rendezvous = QTRendezvous(parties: 3)
        let met = QTCounter()
        let children = (0..<3).map { i in GTChild("c\(i)") { _ in if rendezvous.arrive() { met.increment() } } }
        // Threads of its own: on the shared pool at most as many run at once as the pool has threads (the CPUs).
        let group = try SpindleGroupOperation(operations: children, maxConcurrentOperationCount: 1, pool: nil)
        #expect(group.maxConcurrentOperationCount == 1)
        try group.setMaxConcurrentOperationCount(3)  // three at once, or the rendezvous never completes
        #expect(group.maxConcurrentOperationCount == 3)
        try group.start()
        gtWait(group)
        #expect(met.count == 3)
    }
}
