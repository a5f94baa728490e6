import Testing

@testable import Spindle

/// `Admission` and `QueueLifecycle` without threads: what fits, who is granted, refused or withdrawn, in order.
@Suite struct AdmissionTests {
    func waiter(_ n: Int) -> ProducerWaiter { ProducerWaiter((0..<n).map { _ in SpindleBlockOperation {} }) }

    func isWaiting(_ w: ProducerWaiter) -> Bool { if case .waiting = w.outcome { true } else { false } }
    func isGranted(_ w: ProducerWaiter) -> Bool { if case .granted = w.outcome { true } else { false } }

    @Test func unboundedFitsEverythingAndABlockedProducerStopsNewcomers() {
        var admission = Admission()
        #expect(admission.fits(1_000_000, counted: 5) && admission.check())
        admission.set(capacity: 4, policy: .reject)
        #expect(admission.policy == .reject && admission.capacity == 4)
        #expect(admission.fits(2, counted: 2) && !admission.fits(3, counted: 2))
        admission.enqueue(self.waiter(1))
        #expect(!admission.fits(1, counted: 0), "nobody overtakes a blocked producer")
        admission.set(capacity: 4, policy: nil)
        #expect(admission.policy == .reject, "nil keeps the policy")
        #expect(admission.check())
    }

    /// `decide` with the two caller questions answered `runs` and `waits`, recording which were asked.
    func decide(_ admission: Admission, _ n: Int, counted: Int, policy: SpindleFullQueuePolicy? = nil,
                runs: Bool = true, waits: Bool = true) -> (decision: Admission.AddDecision, asked: [String]) {
        var asked: [String] = []
        let decision = admission.decide(
            count: n, counted: counted, policy: policy, queueName: "q",
            canRunOnCaller: { asked.append("runs"); return runs }, mayWait: { asked.append("waits"); return waits })
        return (decision, asked)
    }

    @Test func decideFollowsTheCapacityThenThePolicy() {
        var admission = Admission()
        do {  // unbounded: everything is admitted, nobody is asked anything
            let (d, asked) = self.decide(admission, 1_000, counted: 1_000)
            #expect({ if case .admit = d { true } else { false } }() && asked.isEmpty)
        }
        admission.set(capacity: 3, policy: .reject)
        do {  // larger than the capacity: refused whatever the policy
            let (d, asked) = self.decide(admission, 4, counted: 0, policy: .block)
            #expect({ if case .refuse(.batchExceedsCapacity(_, 4, 3)) = d { true } else { false } }() && asked.isEmpty)
        }
        do {
            let (d, _) = self.decide(admission, 2, counted: 1)
            #expect({ if case .admit = d { true } else { false } }())
        }
        do {  // full, the queue's policy: refused
            let (d, asked) = self.decide(admission, 2, counted: 2)
            #expect({ if case .refuse(.queueFull(_, 3)) = d { true } else { false } }() && asked.isEmpty)
        }
        do {  // full, caller-runs: runs on the caller if it can, else refused
            let (d, asked) = self.decide(admission, 1, counted: 3, policy: .callerRuns)
            #expect({ if case .runOnCaller = d { true } else { false } }() && asked == ["runs"])
            let (d2, _) = self.decide(admission, 1, counted: 3, policy: .callerRuns, runs: false)
            #expect({ if case .refuse(.queueFull(_, 3)) = d2 { true } else { false } }())
        }
        do {  // full, block: waits, unless the caller would wait for room it holds
            let (d, asked) = self.decide(admission, 1, counted: 3, policy: .block)
            #expect({ if case .wait = d { true } else { false } }() && asked == ["waits"])
            let (d2, _) = self.decide(admission, 1, counted: 3, policy: .block, waits: false)
            #expect({ if case .refuse(.waitOnOwnQueue(_)) = d2 { true } else { false } }())
        }
        do {  // room, but a producer is blocked: the newcomer does not overtake it
            admission.enqueue(self.waiter(1))
            let (d, _) = self.decide(admission, 1, counted: 0, policy: .block)
            #expect({ if case .wait = d { true } else { false } }())
        }
        #expect(admission.check())
    }

    @Test func grantsAreStrictlyFifoAndStopAtTheFirstThatDoesNotFit() {
        var admission = Admission()
        admission.set(capacity: 5, policy: .block)
        let a = self.waiter(2), b = self.waiter(3), c = self.waiter(1)
        for w in [a, b, c] { admission.enqueue(w) }
        #expect(admission.blockedCounts.producers == 3 && admission.blockedCounts.operations == 6)
        // 1 member counted: a (2) fits, then b (3) would make 6 > 5, so c waits behind b even though it fits.
        let first = admission.grant(counted: 1, refusingOversized: false, queueName: "q")
        #expect(first.granted.map(ObjectIdentifier.init) == [ObjectIdentifier(a)])
        #expect(first.signals?.count == 1 && self.isGranted(a) && self.isWaiting(b) && self.isWaiting(c))
        #expect(admission.check())
        // Nothing changed: O(1), nobody granted.
        let none = admission.grant(counted: 3, refusingOversized: false, queueName: "q")
        #expect(none.granted.isEmpty && none.signals == nil)
        let rest = admission.grant(counted: 0, refusingOversized: false, queueName: "q")
        #expect(rest.granted.map(ObjectIdentifier.init) == [ObjectIdentifier(b), ObjectIdentifier(c)])
        #expect(!admission.hasProducers && admission.producers == nil && admission.check())
    }

    @Test func loweringTheCapacityRefusesBatchesThatCanNeverFitOutOfTurn() {
        var admission = Admission()
        admission.set(capacity: 10, policy: .block)
        let big = self.waiter(6), small = self.waiter(2)
        admission.enqueue(big)
        admission.enqueue(small)
        admission.set(capacity: 4, policy: nil)
        let result = admission.grant(counted: 0, refusingOversized: true, queueName: "q")
        #expect(result.granted.map(ObjectIdentifier.init) == [ObjectIdentifier(small)])
        #expect(result.signals?.count == 2)
        guard case .refused(.batchExceedsCapacity(name: "q", count: 6, capacity: 4)) = big.outcome else {
            Issue.record("the oversized batch is refused, got \(big.outcome)")
            return
        }
        #expect(admission.check())
    }

    @Test func aWithdrawnProducerLeavesTheLineAndOthersKeepTheirPlace() {
        var admission = Admission()
        admission.set(capacity: 1, policy: .block)
        let a = self.waiter(1), b = self.waiter(1)
        admission.enqueue(a)
        admission.enqueue(b)
        admission.withdraw(a)
        guard case .withdrawn = a.outcome else {
            Issue.record("withdrawn, got \(a.outcome)")
            return
        }
        #expect(admission.producers?.count == 1 && admission.producers?.first === b && admission.check())
        admission.withdraw(b)
        #expect(admission.producers == nil && admission.check(), "nil again when the last one leaves")
    }

    @Test func aShutdownRefusesEveryBlockedProducer() {
        var admission = Admission()
        admission.set(capacity: 1, policy: .block)
        #expect(admission.refuseAll(.queueShutDown(name: "q")) == nil, "nobody waits: nothing to signal")
        let a = ProducerWaiter([SpindleBlockOperation {}])
        let b = ProducerWaiter([SpindleBlockOperation {}, SpindleBlockOperation {}])
        admission.enqueue(a)
        admission.enqueue(b)
        let signals = admission.refuseAll(.queueShutDown(name: "q"))
        #expect(signals?.count == 2 && signals?[0] === a.semaphore && signals?[1] === b.semaphore)
        for waiter in [a, b] {
            guard case .refused(let error) = waiter.outcome else {
                Issue.record("not refused: \(waiter.outcome)")
                continue
            }
            #expect(error.description == SpindleError.queueShutDown(name: "q").description)
        }
        #expect(admission.producers == nil && admission.check())
    }
}
