import Spindle

/// Hands one `WorkOutcome` to the one task awaiting it: the first `resolve` wins, later ones do nothing. Whoever
/// learns the outcome first (the work finishing, a deadline, the awaiting task's cancellation) resolves it, on any
/// thread, before or after the task started waiting.
///
/// Guards: `state`, by its own lock (a leaf: nothing else is locked inside it). The continuation is resumed after
/// the lock is released.
public final class OutcomeLatch<Value: Sendable>: Sendable {
    private enum State {
        /// Nobody resolved it and nobody waits yet.
        case empty
        /// The task waits; nobody resolved it yet.
        case waiting(UnsafeContinuation<WorkOutcome<Value>, Never>)
        /// Resolved before the task waited: `wait` returns this at once.
        case resolved(WorkOutcome<Value>)
        /// Handed over (to the waiting task, or returned by `wait`). Terminal.
        case delivered
    }

    private let state = SpindleLockedValue(State.empty)

    /// An unresolved latch.
    public init() {}

    /// Resolves the latch with `outcome` unless it was resolved already; returns whether this call resolved it.
    /// Any thread.
    @discardableResult
    public func resolve(_ outcome: WorkOutcome<Value>) -> Bool {
        let waiter: UnsafeContinuation<WorkOutcome<Value>, Never>?? = self.state.withLockedValue { state in
            switch state {
            case .empty:
                state = .resolved(outcome)
                return .some(nil)
            case .waiting(let continuation):
                state = .delivered
                return .some(continuation)
            case .resolved, .delivered:
                return nil
            }
        }
        guard let waiter else { return false }
        waiter?.resume(returning: outcome)
        return true
    }

    /// Whether it has been resolved. Any thread.
    public var isResolved: Bool {
        self.state.withLockedValue { state in
            switch state {
            case .empty, .waiting: return false
            case .resolved, .delivered: return true
            }
        }
    }

    /// The outcome, suspending until someone resolves the latch. Call it once.
    public func wait() async -> WorkOutcome<Value> {
        await withUnsafeContinuation { (continuation: UnsafeContinuation<WorkOutcome<Value>, Never>) in
            let ready: WorkOutcome<Value>? = self.state.withLockedValue { state in
                switch state {
                case .empty:
                    state = .waiting(continuation)
                    return nil
                case .resolved(let outcome):
                    state = .delivered
                    return outcome
                case .waiting, .delivered:
                    preconditionFailure("OutcomeLatch.wait() called twice")
                }
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
