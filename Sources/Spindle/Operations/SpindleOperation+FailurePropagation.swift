/// Failure propagation (opt-in per dependent).
///
/// The opt-in is a bit of the state word (`OperationState.propagatesFailureBit`), and a finished operation's
/// failure is another (`failedBit`, set with `finished` when it has an error), so the checks cost no lock. Two
/// places act, so that no dependent with the opt-in ever runs `main` past a failed or cancelled dependency:
/// - eagerly, when a counted dependency finishes failed or cancelled: the dependent is cancelled before that
///   dependency's count is released (`dependencyFinished(failed:)`), i.e. while it is still held back;
/// - at the gate, in `enterExecution` (every start path: queue workers, `start()` by hand, `beginExecuting`):
///   dependencies that were not counted (finished before `addDependency`, or the opt-in set late) are looked at
///   there, before the operation can move to executing.
extension SpindleOperation {
    /// When true, this operation is cancelled (and finishes without running `main`, its `cancellationReason`
    /// `.dependencyFailed`) if any of its dependencies failed (`main` threw, or `finish(throwing:)`) or was
    /// cancelled. Default false: as with Apple's queues, a dependency counts as done however it ended. Set it
    /// before the operation starts. Any thread. A barrier (`addBarrierBlock`) never counts as failed: a cancel-all
    /// cancels it, and the operations behind it, added after, are not the cancel-all's.
    public final var cancelsOnFailedDependency: Bool {
        get { self.currentState.propagatesFailure }
        set {
            if newValue {
                self.state.bitwiseOr(OperationState.propagatesFailureBit, ordering: .acquiringAndReleasing)
            } else {
                self.state.bitwiseAnd(~OperationState.propagatesFailureBit, ordering: .acquiringAndReleasing)
            }
        }
    }

    /// The errors of its dependencies that failed, in dependency order (empty when none failed; a dependency
    /// that is still running contributes nothing yet). Any thread.
    public final var dependencyErrors: [any Error] { self.dependencies.compactMap { $0.error } }

    /// Whether it finished with an error (`main` threw, or `finish(throwing:)`). Lock-free. Any thread.
    public final var hasFailed: Bool { self.currentState.isFailed }

    /// Whether some dependency failed or was cancelled. A barrier does not count (see `completeExecution`): an
    /// operation with exclusivity categories depends on the barrier ahead of it, which a cancel-all cancels.
    final var hasFailedDependency: Bool {
        self.dependencies.contains { dependency in
            if dependency.isBarrier { return false }
            let s = dependency.currentState
            return s.isFailed || s.isCancelled
        }
    }
}

extension SpindleOperation {
    /// Makes `error` the operation's error (nil: none). The earlier one is released after the lock: a class error's
    /// deinit is user code, which never runs under a lock of ours. Out of line: called only when `main` threw, and
    /// by a finish with an error (which then stores its error under the finish's own lock).
    @inline(never)
    final func replaceError(with error: (any Error)?) {
        let replaced = self.withLocked { l -> (any Error)? in
            defer { l.error = error }
            return l.error
        }
        _ = replaced
    }
}
