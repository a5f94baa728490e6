/// The queue's run state: a unit of its locked state, a value stored in `QueueCore` and guarded by `QueueCore.lock`.
///
/// States, forward only: `running` (accepting and running work) → `shuttingDown` (the handle was released, which
/// happens only with nothing outstanding, since the core retains its handle until then; workers exit at their next
/// look and are joined by `QueueCore.shutdown`). The only transition is `beginShutdown`, by the `shutdownBegan`
/// event. Issue 18's explicit shutdown adds its modes here (draining, cancelling) between the two.
struct QueueLifecycle {
    enum State: UInt8 { case running, shuttingDown }

    private(set) var state = State.running

    /// Workers must exit, and no thread may be started.
    @inline(__always)
    var isShuttingDown: Bool { self.state == .shuttingDown }

    /// `running` → `shuttingDown`; a second call is a no-op (forward only).
    mutating func beginShutdown() { self.state = .shuttingDown }
}
