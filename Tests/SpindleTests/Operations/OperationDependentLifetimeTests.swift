import Synchronization
import Testing

@testable import Spindle

/// An operation lists its dependents unretained (no retain cycle, no weak side tables): a dependent that goes away
/// first must unlist itself, and one going away while its dependency finishes must be either notified while still
/// alive or skipped, never touched after it is freed.
@Suite struct OperationDependentLifetimeTests {
    @Test func aDependentReleasedFirstIsUnlistedAndTheDependencyStillFinishes() throws {
        let a = OpProbe(name: "a")
        weak var weakB: OpProbe?
        do {
            let b = OpProbe(name: "b")
            try b.addDependency(a)
            weakB = b
            #expect(a.withLocked { $0.dependents.count } == 1)
        }
        #expect(weakB == nil, "the dependency does not keep its dependent alive")
        #expect(a.withLocked { $0.dependents.isEmpty }, "the freed dependent unlisted itself")
        try a.start()
        #expect(a.isFinished && a.mainRuns.value == 1)
    }

    @Test func aChainReleasedUnrunUnlistsEveryLink() throws {
        let root = OpProbe(name: "root")
        do {
            var previous: SpindleOperation = root
            for _ in 0..<1_000 {
                let op = SpindleBlockOperation {}
                try op.addDependency(previous)
                previous = op
            }
        }
        #expect(root.withLocked { $0.dependents.isEmpty })
        try root.start()
        #expect(root.isFinished)
    }

    @Test func dependentsReleasedWhileTheirDependencyFinishesAreNeverTouchedAfterwards() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        let notified = Atomic<Int>(0)
        for round in 0..<3_000 {
            let a = SpindleBlockOperation {}
            var b: SpindleBlockOperation? = SpindleBlockOperation {}
            if round % 2 == 0 {
                // With an observer, a notified dependent also runs user code while the race is on.
                b!.observe([.isReady]) { _, _ in notified.add(1, ordering: .relaxed) }
            }
            try b!.addDependency(a)
            try queue.addOperation(a)
            b = nil  // races with `a` finishing on a worker
            #expect(try a.waitUntilFinished(timeout: .seconds(30)))
            #expect(a.withLocked { $0.dependents.isEmpty })
        }
        #expect(try queue.waitUntilAllOperationsAreFinished(timeout: .seconds(30)))
        // Each observed dependent delivers will+did isReady at most twice (unready on addDependency, ready once).
        #expect(notified.load(ordering: .relaxed) <= 6_000)
    }

    @Test func aDependentAliveWhenItsDependencyFinishesIsNotified() throws {
        let queue = try SpindleOperationQueue(maxConcurrentOperationCount: 2)
        for _ in 0..<1_000 {
            let a = SpindleBlockOperation {}
            let b = SpindleBlockOperation {}
            try b.addDependency(a)
            try queue.addOperations([b, a])
            #expect(try b.waitUntilFinished(timeout: .seconds(30)))
            #expect(a.isFinished && !b.isCancelled)
        }
    }
}
