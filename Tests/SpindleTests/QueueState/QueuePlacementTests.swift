import Testing

@testable import Spindle

/// `QueuePlacement`: the transition table and who owns the queue's reference in each state.
@Suite struct QueuePlacementTests {
    static let all: [QueuePlacement] = [.outside, .held, .pending, .ready, .reserved, .taken, .handedBack]

    @Test func theTransitionTableIsExactlyTheDocumentedOne() {
        let allowed: Set<String> = [
            "outside→held", "outside→pending", "held→pending", "pending→ready", "ready→pending", "ready→taken",
            "ready→reserved", "reserved→ready", "taken→handedBack", "taken→outside", "reserved→outside",
            "handedBack→outside",
        ]
        for from in Self.all {
            for to in Self.all {
                #expect(from.allows(to) == allowed.contains("\(from)→\(to)"), "\(from) → \(to)")
            }
        }
    }

    @Test func theMemberListOwnsTheReferenceExactlyWhileNoWorkerHasIt() {
        let listOwned: Set<QueuePlacement> = [.held, .pending, .ready, .handedBack]
        for placement in Self.all {
            #expect(placement.listOwnsReference == listOwned.contains(placement), "\(placement)")
            #expect(placement.isMember == (placement != .outside), "\(placement)")
        }
    }

    /// Every path through the machine from admission back to `outside` passes a state where a worker owns the
    /// reference (it was taken or reserved), so an operation is never unlinked while the list still owns it
    /// except after a hand-back.
    @Test func everyWayOutPassesThroughAWorker() {
        var seen: Set<QueuePlacement> = []
        var frontier: [QueuePlacement] = [.outside]
        while let state = frontier.popLast() {
            for next in Self.all where state.allows(next) && !seen.contains(next) {
                seen.insert(next)
                frontier.append(next)
            }
        }
        #expect(seen == Set(Self.all))
        for from in Self.all where from.allows(.outside) {
            #expect([.taken, .reserved, .handedBack].contains(from), "\(from)")
        }
    }

    @Test func anOperationStartsOutside() {
        #expect(SpindleBlockOperation {}.placement == .outside)
    }
}
