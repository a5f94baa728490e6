/// Deadlines and cancellation reasons.
///
/// An armed deadline is one `DeadlineEntry` in `DeadlineTimer.shared`, referenced from the operation's
/// `lockedState.deadlineEntry` (under its lock). The finish path takes the entry out of the heap; the timer thread
/// fires an entry only if the operation still references it, so a deadline never cancels an operation that has
/// begun finishing. An operation that never gets a deadline pays one nil test in its finish path.
///
/// The reason is recorded under the operation's lock by whoever cancels for a reason of ours (deadline, failed
/// dependency), just before it calls `cancel()`, and only while the operation is neither cancelled nor finishing;
/// a plain `cancel()` records nothing and reads as `.cancelled`. When a plain `cancel()` races a deadline, either
/// reason may be reported.
extension SpindleOperation {
    /// Cancels the operation at `deadline` if it has not finished by then (as `cancel()` does: before it starts, it
    /// will finish without running `main`; while `main` runs, `isCancelled` turns true), and records
    /// `cancellationReason == .deadlineExpired`. After it finished, nothing happens. A deadline already past
    /// cancels at once, on the calling thread. Arming several deadlines keeps the earliest. Deadlines fire on one
    /// shared timer thread ("spindle.deadlines", started on first use), which calls an overridden `cancel()`
    /// there, outside every lock of ours. Any thread; throws nothing.
    public final func cancel(at deadline: SpindleDeadline) {
        guard deadline != .distantFuture else { return }
        let now = deadline.hasPassed
        var timerFailure: Int32 = 0
        let cancelNow = self.withLocked { l -> Bool in
            let s = self.currentState
            guard s.lifecycle < .finishing, !s.isCancelled else { return false }
            if now { return true }
            if let entry = l.deadlineEntry {
                DeadlineTimer.shared.advance(entry, to: deadline.uptimeNanoseconds)
            } else {
                let entry = DeadlineEntry(operation: self, deadline: deadline.uptimeNanoseconds)
                l.deadlineEntry = entry
                timerFailure = DeadlineTimer.shared.insert(entry)
            }
            return false
        }
        if timerFailure != 0 { SpindleDiagnostics.report(.deadlineTimerFailedToStart(errno: timerFailure)) }
        if cancelNow { self.cancel(for: .deadlineExpired) }
    }

    /// `cancel(at: .after(timeout))`: the timeout counts from this call. Zero or negative cancels at once.
    /// Any thread; throws nothing.
    public final func cancel(after timeout: Duration) {
        self.cancel(at: .after(timeout))
    }

    /// The armed deadline, if any (nil once it fired or the operation finished). Any thread.
    public final var deadline: SpindleDeadline? {
        self.withLocked { l in l.deadlineEntry.map { SpindleDeadline(uptimeNanoseconds: $0.deadline) } }
    }

    /// Why it was cancelled: nil while not cancelled; `.deadlineExpired` or `.dependencyFailed` when Spindle
    /// cancelled it for that reason; `.cancelled` for any other `cancel()`. Any thread.
    public final var cancellationReason: SpindleCancellationReason? {
        guard self.isCancelled else { return nil }
        return self.withLocked { $0.cancellationReason } ?? .cancelled
    }

    /// Whether it was cancelled because its deadline passed (`cancellationReason == .deadlineExpired`).
    public final var deadlineExpired: Bool { self.cancellationReason == .deadlineExpired }

    /// Records `reason` and cancels, unless it is already cancelled or finishing (then nothing).
    final func cancel(for reason: SpindleCancellationReason) {
        let proceed = self.withLocked { l -> Bool in
            let s = self.currentState
            guard s.lifecycle < .finishing, !s.isCancelled else { return false }
            if l.cancellationReason == nil { l.cancellationReason = reason }
            return true
        }
        if proceed { self.cancel() }
    }

    /// The timer thread reached `entry`: cancel for the deadline if the entry is still this operation's.
    final func deadlineFired(_ entry: DeadlineEntry) {
        let proceed = self.withLocked { l -> Bool in
            guard l.deadlineEntry === entry else { return false }
            l.deadlineEntry = nil
            let s = self.currentState
            guard s.lifecycle < .finishing, !s.isCancelled else { return false }
            if l.cancellationReason == nil { l.cancellationReason = .deadlineExpired }
            return true
        }
        if proceed { self.cancel() }
    }
}
