import Testing

@testable import Spindle

/// `produce(_:)`: a running operation hands follow-ups to its queue (or its group), observers are told with a
/// `producedOperation` event, produced operations are nobody's dependencies, and misuse is refused.
@Suite struct ProducingOperationTests {
    private typealias Key = SpindleOperation.Key

    @Test func aProducedOperationRunsOnTheProducersQueueAndObserversAreTold() throws {
        let queue = SpindleOperationQueue(name: "home")
        let ranOn = QTLog<String>()
        let produced = GTChild("produced") { _ in ranOn.append(SpindleOperationQueue.current?.name ?? "none") }
        let producer = GTChild("producer") { op in try op.produce(produced) }
        let events = QTLog<String>()
        let payloads = QTLog<Bool>()
        producer.observe([.producedOperation]) { source, change in
            events.append("\(change)")
            payloads.append(source === producer && change.oldValue == nil && change.phase == .did
                && !change.isInitial && change.newValue.operationValue === produced
                && change.newValue == .operation(produced) && change.newValue.boolValue == nil)
        }
        try queue.addOperation(producer)
        gtWait(producer)
        gtWait(produced)
        #expect(produced.runs.count == 1 && ranOn.all == ["home"])
        #expect(events.all == ["did producedOperation: produced"] && payloads.all == [true])
        qtDrain(queue)
    }

    @Test func insideAGroupTheGroupWaitsForWhatAChildProduces() throws {
        let produced = GTChild("produced", waits: true)
        let child = GTChild("child") { op in try op.produce(produced) }
        let group = try SpindleGroupOperation(operations: [child])
        let witness = GTFinishWitness(group, children: { [child, produced] })
        try group.start()
        #expect(produced.started.wait())
        #expect(!group.isFinished && produced.parentGroup === group)
        produced.proceed()
        gtWait(group)
        #expect(witness.finishedOnceAfterChildren)
    }

    /// As in the sample, a produced operation is nobody's dependency: the producer's dependent runs while the
    /// produced operation is still blocked.
    @Test func aProducedOperationIsNoDependency() throws {
        // Room for the blocked produced operation and the dependent at once, whatever the CPU count.
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let produced = GTChild("produced", waits: true)
        let producer = GTChild("producer") { op in try op.produce(produced) }
        let dependent = GTChild("dependent")
        try dependent.addDependency(producer)
        try queue.addOperations([producer, dependent])
        #expect(produced.started.wait())
        gtWait(dependent)  // would time out if it waited for `produced`
        #expect(!produced.isFinished)
        produced.proceed()
        qtDrain(queue)
    }

    @Test func aConcurrentOperationProducesFromAnotherThreadBeforeItFinishes() throws {
        final class Fetch: SpindleConcurrentOperation, @unchecked Sendable {
            let next: SpindleOperation
            let outcome = QTLog<String>()
            let callbackDone = QTGate()
            init(next: SpindleOperation) { self.next = next }
            override func main() throws {
                let next = self.next
                try SpindleThread.detach(name: "callback") {
                    do { try self.produce(next) } catch { self.outcome.append("\(error)") }
                    try? self.finish()
                    do { try self.produce(GTChild("too-late")) } catch { self.outcome.append("\(error)") }
                    self.callbackDone.open()
                }
            }
        }
        let queue = SpindleOperationQueue()
        let next = GTChild("next")
        let fetch = Fetch(next: next)
        fetch.name = "fetch"
        try queue.addOperation(fetch)
        gtWait(fetch)
        gtWait(next)
        #expect(fetch.callbackDone.wait())
        #expect(fetch.outcome.all == [SpindleError.produceWhenNotExecuting(name: "fetch").description])
        qtDrain(queue)
    }

    @Test func misuseIsRefusedAndNothingIsAddedOrTold() throws {
        let told = QTCounter()
        let idle = GTChild("idle")
        idle.observe([.producedOperation]) { _, _ in told.increment() }
        expectSpindleError(.produceWhenNotExecuting(name: "idle")) { try idle.produce(GTChild("x")) }

        let byHand = GTChild("by-hand") { op in try op.produce(GTChild("y")) }
        byHand.observe([.producedOperation]) { _, _ in told.increment() }
        try byHand.start()
        #expect(byHand.error.map { "\($0)" } == SpindleError.produceWithoutQueue(name: "by-hand").description)

        let queue = SpindleOperationQueue()
        let elsewhere = SpindleOperationQueue()
        elsewhere.isSuspended = true
        let taken = GTChild("taken")
        try elsewhere.addOperation(taken)
        let errors = QTLog<String>()
        let producer = GTChild("producer") { op in
            for candidate in [taken, op] {
                do { try op.produce(candidate) } catch { errors.append("\(error)") }
            }
        }
        producer.observe([.producedOperation]) { _, _ in told.increment() }
        try queue.addOperation(producer)
        gtWait(producer)
        #expect(errors.all == [SpindleError.operationAlreadyInQueue(name: "taken").description,
                               SpindleError.operationExecuting(name: "producer").description])
        expectSpindleError(.produceWhenNotExecuting(name: "producer")) { try producer.produce(GTChild("z")) }
        #expect(told.count == 0, "an observer was told of an operation that was not produced")
        elsewhere.isSuspended = false
        qtDrain(elsewhere)
        qtDrain(queue)
    }

    @Test func theEventHasNoInitialValueAndIsObservedByDefault() throws {
        let queue = SpindleOperationQueue()
        let produced = GTChild("produced")
        let producer = GTChild("producer") { op in try op.produce(produced) }
        let initial = QTLog<String>()
        let all = QTLog<String>()
        producer.observe(options: .initial) { _, change in
            if change.isInitial { initial.append("\(change.key)") } else { all.append("\(change)") }
        }
        #expect(initial.all == ["isReady", "isExecuting", "isFinished", "isCancelled", "queuePriority",
                                "dependencies"])
        try queue.addOperation(producer)
        gtWait(producer)
        let seen = all.all
        let produceAt = try #require(seen.firstIndex(of: "did producedOperation: produced"))
        let executingAt = try #require(seen.firstIndex(of: "did isExecuting: false → true"))
        let finishedAt = try #require(seen.firstIndex(of: "did isFinished: false → true"))
        #expect(executingAt < produceAt && produceAt < finishedAt)
        qtDrain(queue)
    }
}
