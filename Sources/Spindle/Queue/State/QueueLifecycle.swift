/// The queue's run state: a unit of its locked state, a value stored in `QueueCore` and guarded by `QueueCore.lock`.
/// Pure: each transition is a function of the state and what the caller tells it, returning what changed; the core
/// acts on that (closes the inbox, cancels members, wakes workers, signals waiters) in `QueueCore+Lifecycle`.
///
/// States, forward only, each defined by what it permits:
/// - `running`: accepts work and runs it;
/// - `draining`: accepts nothing new (adds throw `queueShutDown`); runs everything already accepted;
/// - `cancelling`: accepts nothing new; everything accepted was cancelled at the transition and finishes cancelled
///   (its completion block runs); operations running then were told and finish when they return;
/// - `stopping`: no members are left; workers exit at their next look and no thread is started;
/// - `terminated`: every worker has left its loop (the threads are joined by the first termination wait to see
///   it, or by the queue's release). Final.
///
/// Transitions and their triggers:
/// - `running` → `draining` (`shutdown(.drain)`), `running` → `cancelling` (`shutdown(.cancel)`),
///   `draining` → `cancelling` (`shutdown(.cancel)` after a drain began: the escalation, as Java's `shutdownNow`
///   after `shutdown`); any other request is a no-op (`request` returns false);
/// - `draining`/`cancelling` → `stopping`: the membership is empty (`emptied`: the finish of the last member, or the
///   request itself on an empty queue);
/// - `running` → `stopping`: the handle was released (`handleReleased`), which happens only with nothing
///   outstanding, so with no members;
/// - `stopping` → `terminated`: no worker is left in its loop and no thread is being started (`workersGone`,
///   after a worker exits, a start fails or registers late, or at once when there are no threads).
/// The subtle one: `stopping` → `terminated` can be decided by a thread that is not a worker (the request on a
/// queue that never started a thread, a run-loop-served queue, a failed start) as well as by the last worker out.
/// Callers must call `workersGone` after every action that might make it true.
struct QueueLifecycle {
    enum State: UInt8, Comparable {
        case running, draining, cancelling, stopping, terminated

        static func < (a: State, b: State) -> Bool { a.rawValue < b.rawValue }
    }

    /// How a shutdown request treats the work already accepted.
    enum Mode { case drain, cancel }

    private(set) var state = State.running
    /// The worker threads were taken to be joined (by a termination wait or the handle's release): a thread that
    /// registers after that is joined by its own starter.
    private(set) var threadsCollected = false

    /// Adds are accepted.
    @inline(__always)
    var acceptsWork: Bool { self.state == .running }

    /// Workers must exit, and no thread may be started.
    @inline(__always)
    var isShuttingDown: Bool { self.state >= .stopping }

    /// A shutdown was requested (or the handle released).
    var isShutDown: Bool { self.state != .running }

    var isTerminated: Bool { self.state == .terminated }

    /// A shutdown request. Returns whether the state moved (false: already there or further on; the request is a
    /// no-op). The caller cancels the members when this moved to `cancelling`, and calls `emptied` if there are
    /// none.
    mutating func request(_ mode: Mode) -> Bool {
        let target: State = mode == .drain ? .draining : .cancelling
        guard self.state < target, self.state < .stopping else { return false }
        self.state = target
        return true
    }

    /// The membership is empty: `draining`/`cancelling` → `stopping`. Returns whether it moved (the caller then
    /// wakes every parked worker).
    mutating func emptied() -> Bool {
        guard self.state == .draining || self.state == .cancelling else { return false }
        self.state = .stopping
        return true
    }

    /// The handle was released (so there are no members): whatever came before → `stopping` (unless further).
    /// Returns whether it moved.
    mutating func handleReleased() -> Bool {
        guard self.state < .stopping else { return false }
        self.state = .stopping
        return true
    }

    /// No worker is in its loop and none is being started (`live` is 0): `stopping` → `terminated`. Returns
    /// whether it moved (the caller then wakes the termination waiters).
    mutating func workersGone(live: Int) -> Bool {
        guard self.state == .stopping, live == 0 else { return false }
        self.state = .terminated
        return true
    }

    /// The threads are being taken for joining.
    mutating func collectThreads() { self.threadsCollected = true }
}
