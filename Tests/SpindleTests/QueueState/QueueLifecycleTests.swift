import Testing

@testable import Spindle

/// `QueueLifecycle` alone: every transition of its table, the illegal ones included (they return false and change
/// nothing), and the closed inbox it pairs with.
@Suite struct QueueLifecycleTests {
    typealias State = QueueLifecycle.State

    /// A lifecycle driven to `state` by its own transitions.
    func at(_ state: State) -> QueueLifecycle {
        var l = QueueLifecycle()
        switch state {
        case .running: break
        case .draining: _ = l.request(.drain)
        case .cancelling: _ = l.request(.cancel)
        case .stopping: _ = l.handleReleased()
        case .terminated:
            _ = l.handleReleased()
            _ = l.workersGone(live: 0)
        }
        #expect(l.state == state)
        return l
    }

    @Test func theTransitionTable() {
        let all: [State] = [.running, .draining, .cancelling, .stopping, .terminated]
        for from in all {
            var l = self.at(from)
            #expect(l.request(.drain) == (from == .running))
            #expect(l.state == (from == .running ? .draining : from))

            l = self.at(from)
            #expect(l.request(.cancel) == (from == .running || from == .draining))
            #expect(l.state == (from == .running || from == .draining ? .cancelling : from))

            l = self.at(from)
            #expect(l.emptied() == (from == .draining || from == .cancelling))
            #expect(l.state == (from == .draining || from == .cancelling ? .stopping : from))

            l = self.at(from)
            #expect(l.handleReleased() == (from < .stopping))
            #expect(l.state == (from < .stopping ? .stopping : from))

            l = self.at(from)
            #expect(l.workersGone(live: 1) == false && l.state == from, "a live worker keeps it from terminating")
            #expect(l.workersGone(live: 0) == (from == .stopping))
            #expect(l.state == (from == .stopping ? .terminated : from))
        }
    }

    @Test func whatEachStatePermits() {
        let running = self.at(.running)
        #expect(running.acceptsWork && !running.isShutDown && !running.isShuttingDown && !running.isTerminated)
        for state in [State.draining, .cancelling] {
            let l = self.at(state)
            #expect(!l.acceptsWork && l.isShutDown && !l.isShuttingDown, "refuses adds, workers keep running")
        }
        let stopping = self.at(.stopping)
        #expect(!stopping.acceptsWork && stopping.isShuttingDown && !stopping.isTerminated)
        let terminated = self.at(.terminated)
        #expect(!terminated.acceptsWork && terminated.isShuttingDown && terminated.isTerminated)
    }

    @Test func aClosedInboxRefusesPushesAndKeepsNothing() throws {
        let inbox = Inbox()
        let accepted = SpindleBlockOperation {}
        let pushed = inbox.push(accepted)
        #expect(pushed)
        let taken = inbox.closeTakingAll()
        #expect(taken?.takeUnretainedValue() === accepted)
        taken?.release()  // the inbox's reference
        let (closed, empty, mayHold) = (inbox.isClosed, inbox.isEmpty, inbox.mayHoldWork)
        #expect(closed && empty && !mayHold)
        weak var weakRefused: SpindleBlockOperation?
        do {
            let refused = SpindleBlockOperation {}
            weakRefused = refused
            let refusedPush = inbox.push(refused)
            #expect(!refusedPush)
            #expect(refused.nextLink == nil)
        }
        #expect(weakRefused == nil, "a refused push retains nothing")
        let again = inbox.takeAllOldestFirst()
        let stillClosed = inbox.isClosed
        #expect(again == nil && stillClosed, "taking keeps it closed")
    }
}
