/// The one way to move an operation's state word (`SpindleOperation.state`) by compare-and-swap, for the queue
/// and the operation alike: read it, ask a pure transition of `OperationState` (which returns nil when the move
/// is not allowed), and retry on contention. Inlined, so a call with a closure literal costs what a hand-written
/// loop costs.
extension SpindleOperation {
    /// Moves the state word by `transition` (e.g. `{ $0.enqueuing() }`) until the compare-and-swap succeeds or
    /// `transition` returns nil. Returns whether it moved, and the state it moved to (or, if not, the last state
    /// seen, unchanged). Acquiring and releasing, like every move of the word.
    @inline(__always)
    final func advanceState(_ transition: (OperationState) -> OperationState?) -> (moved: Bool, state: OperationState) {
        var current = self.currentState
        while let next = transition(current) {
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done { return (true, next) }
            current = OperationState(raw: seen)
        }
        return (false, current)
    }

    /// Marks a newly created operation that no other thread can see yet as enqueued, without a compare-and-swap
    /// (what `advanceState { $0.enqueuing() }` does for a fresh idle operation). Publishing it afterwards (the
    /// inbox push) orders this store before anyone reads it.
    @inline(__always)
    final func markEnqueuedUnpublished() {
        self.state.store(OperationState.Lifecycle.enqueued.rawValue, ordering: .relaxed)
    }
}
