import Synchronization

extension SpindleOperation {
    /// What can be observed (KVO's key paths, typed).
    public enum Key: Sendable, Hashable, CaseIterable {
        case isReady, isExecuting, isFinished, isCancelled, queuePriority, dependencies
    }

    /// One change: `will` comes before the new value is visible (where Spindle can know it in advance),
    /// `did` after.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// Before (`will`) or after (`did`) the change.
        public enum Phase: Sendable, Hashable { case will, did }
        /// Whether this is the `will` or the `did` half of the change.
        public let phase: Phase
        /// The property that changes.
        public let key: Key
        /// "will isFinished", "did isExecuting", ... Any thread.
        public var description: String { "\(self.phase) \(self.key)" }
    }

    /// A registration; pass it to `removeObserver` to stop deliveries.
    public struct Observation: Sendable, Hashable {
        let id: UInt64
    }

    /// Observers and the events waiting for delivery (inside `Locked`). Each pending event carries the id the next
    /// observer would get at the moment it happened: only observers with a smaller id receive it.
    struct ObservationState {
        var observers: [(id: UInt64, keys: Set<Key>, handler: @Sendable (SpindleOperation, Change) -> Void)] = []
        var pending: [(change: Change, watermark: UInt64)] = []
        var delivering = false
        var nextID: UInt64 = 1
        /// Set when `did isFinished` is queued: nothing may follow it, so later changes (a racing `cancel`) are
        /// dropped.
        var sealed = false

        /// Records an event for the observers registered so far; returns whether the caller must drain.
        /// Allocates nothing when there are no observers (the common case on the finish path).
        mutating func append(_ change: Change, _ second: Change? = nil) -> Bool {
            if self.observers.isEmpty || self.sealed { return false }
            if change.key == .isFinished && change.phase == .did { self.sealed = true }
            self.pending.append((change, self.nextID))
            if let second { self.pending.append((second, self.nextID)) }
            if self.delivering { return false }
            self.delivering = true
            return true
        }
    }

    /// Registers `handler` for changes of `keys`.
    ///
    /// Delivery: on the thread that made the change (or, when changes race, on the thread already delivering for
    /// this operation), outside every lock, in the order the changes happened, one at a time. Every change after
    /// registration is delivered exactly once. On finishing, `did isExecuting` comes before `did isFinished`, and
    /// `did isFinished` is the last change ever delivered. If the operation had already finished when you
    /// registered, `handler` is called once with `did isFinished` (if observed) so no observer misses the end.
    /// Callable from any thread.
    @discardableResult
    public final func observe(_ keys: Set<Key> = Set(Key.allCases),
                              _ handler: @escaping @Sendable (SpindleOperation, Change) -> Void) -> Observation {
        let (id, alreadyFinished) = self.withLocked { l -> (UInt64, Bool) in
            let id = l.observation.nextID
            l.observation.nextID += 1
            l.observation.observers.append((id, keys, handler))
            self.hasObservers.store(true, ordering: .sequentiallyConsistent)
            return (id, self.currentState.lifecycle == .finished)
        }
        if alreadyFinished && keys.contains(.isFinished) { handler(self, Change(phase: .did, key: .isFinished)) }
        return Observation(id: id)
    }

    /// Stops deliveries to `observation`'s handler: no delivery to it begins after this returns; one another
    /// thread has already begun may still reach the handler (just after this returns) or finish. Callable from
    /// any thread, also from inside the handler itself (then nothing more reaches it).
    public final func removeObserver(_ observation: Observation) {
        self.withLocked { l in
            l.observation.observers.removeAll { $0.id == observation.id }
        }
    }

    // MARK: - Emitting

    final func emit(_ key: Key) {
        guard self.hasObservers.load(ordering: .relaxed) else { return }
        self.enqueue(Change(phase: .will, key: key), Change(phase: .did, key: key))
    }

    final func emitWill(_ key: Key) { self.enqueue(Change(phase: .will, key: key)) }
    final func emitDid(_ key: Key) { self.enqueue(Change(phase: .did, key: key)) }

    private func enqueue(_ change: Change, _ second: Change? = nil) {
        if self.withLocked({ $0.appendObservation(change, second) }) { self.drainObservations() }
    }

    /// Delivers pending events until none remain; only the thread that set `delivering` calls it (a combining
    /// queue: events keep their order, user code never runs under the lock).
    final func drainObservations() {
        typealias Batch = (changes: [(change: Change, watermark: UInt64)],
                           observers: [(id: UInt64, keys: Set<Key>, handler: @Sendable (SpindleOperation, Change) -> Void)])
        while true {
            let batch = self.withLocked { l -> Batch? in
                if l.observation.pending.isEmpty {
                    l.observation.delivering = false
                    return nil
                }
                let changes = l.observation.pending
                l.observation.pending = []
                return (changes, l.observation.observers)
            }
            guard let batch else { return }
            for (change, watermark) in batch.changes {
                for observer in batch.observers where observer.id < watermark && observer.keys.contains(change.key) {
                    // Re-check per call: a handler that removed itself (or another) gets nothing more.
                    let stillRegistered = self.withLocked { l in l.observation.observers.contains { $0.id == observer.id } }
                    if stillRegistered { observer.handler(self, change) }
                }
            }
        }
    }
}
