import Synchronization

extension SpindleOperation {
    /// What can be observed (KVO's key paths, typed): the properties, and one event, `producedOperation` (the
    /// operation handed an operation to its queue or group with `produce(_:)`; the sample's
    /// `operation(_:didProduceOperation:)`).
    public enum Key: Sendable, Hashable, CaseIterable {
        case isReady, isExecuting, isFinished, isCancelled, queuePriority, dependencies, producedOperation
    }

    /// One change: `will` comes before the new value is visible (where Spindle can know it in advance),
    /// `did` after. Each carries the key's old and new values as they were at that change, captured when it was
    /// recorded (not read again at delivery), so a late delivery still tells what happened.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// Before (`will`) or after (`did`) the change.
        public enum Phase: Sendable, Hashable { case will, did }
        /// Whether this is the `will` or the `did` half of the change (`did` for an initial delivery).
        public let phase: Phase
        /// The property that changes.
        public let key: Key
        /// The value before the change; nil only for an initial delivery (`isInitial`), which has no before, and
        /// for the event `producedOperation`, which changes no property.
        public let oldValue: ObservedValue?
        /// The value after the change, in the `will` too (every change Spindle reports is known before it is
        /// visible, as KVO's `.prior` with `.new` would tell); for an initial delivery, the value at registration;
        /// for `producedOperation` (a `did` only), the operation produced (`.operation`).
        public let newValue: ObservedValue
        /// Whether this is the delivery `ObservingOptions.initial` asked for (the current value at registration)
        /// rather than a change.
        public let isInitial: Bool
        /// "will isFinished: false → true", "did queuePriority: normal → high", "initial isReady: true",
        /// "did producedOperation: fetch". Any thread.
        public var description: String {
            if self.isInitial { return "initial \(self.key): \(self.newValue)" }
            if self.oldValue == nil { return "\(self.phase) \(self.key): \(self.newValue)" }
            return "\(self.phase) \(self.key): \(self.oldValue.map { "\($0)" } ?? "nil") → \(self.newValue)"
        }
    }

    /// A registration; pass it to `removeObserver` to stop deliveries.
    public struct Observation: Sendable, Hashable {
        let id: UInt64
    }

    typealias Observer = (id: UInt64, keys: Set<Key>, handler: @Sendable (SpindleOperation, Change) -> Void)

    /// Observers and the events waiting for delivery (inside `Locked`). Each pending event carries the id the next
    /// observer would get at the moment it happened: only observers with a smaller id receive it; or, for an initial
    /// delivery, the one observer it is for (`target`, 0 for every observer).
    struct ObservationState {
        var observers: [Observer] = []
        var pending: [(change: Change, watermark: UInt64, target: UInt64)] = []
        var delivering = false
        var nextID: UInt64 = 1
        /// Set when `did isFinished` is queued, or an observer is registered after the end: nothing may follow it,
        /// so later changes (a racing `cancel`, a priority set after the end) are dropped.
        var sealed = false
        /// The values of `isReady` and `isCancelled` as the observers know them: read from the state word when the
        /// first observer registers, then moved only by `reconcile`. These two flags change by a compare-and-swap
        /// outside the lock and are recorded after it, so racing records could come in the opposite order of the
        /// swaps; instead, every record (of any key) first compares the state word, read under the lock, with these
        /// and records the difference. So each key's changes form a chain (each old value is the previous new
        /// one), the last one recorded is the current value, and a `cancel` is recorded before the `isFinished`
        /// that follows it. A flicker whose two swaps both happened before one reconcile is not reported.
        var shownReady = true
        var shownCancelled = false

        /// Whether a change of `key` recorded now would reach anyone: not sealed, and an observer watches `key`.
        func wants(_ key: Key) -> Bool {
            !self.observers.isEmpty && !self.sealed && self.observers.contains { $0.keys.contains(key) }
        }

        /// Records a change of `key` from `old` to `new` (its `will`, its `did`, or both) for the observers
        /// registered so far; returns whether the caller must drain. Allocates nothing when there are no observers
        /// (the common case on the finish path), and records nothing no observer watches.
        /// `now` is the state word, read under the lock: `isReady` and `isCancelled` are reconciled with it first.
        mutating func record(_ key: Key, from old: ObservedValue, to new: ObservedValue, will: Bool, did: Bool,
                             now: OperationState) -> Bool
        {
            if self.observers.isEmpty || self.sealed { return false }
            let before = self.pending.count
            if key == .dependencies {
                // A new or removed dependency comes before the readiness it changes (as Foundation's KVO tells it).
                self.append(key, from: old, to: new, will: will, did: did)
                self.reconcile(now)
            } else {
                self.reconcile(now)
                if key == .isFinished && did { self.sealed = true }
                self.append(key, from: old, to: new, will: will, did: did)
            }
            return self.pending.count > before && self.claimDelivery()
        }

        /// Records the changes of `isReady` and `isCancelled` between what observers were told and `now` (the state
        /// word, read under the lock); returns whether the caller must drain.
        mutating func recordFlags(now: OperationState) -> Bool {
            if self.observers.isEmpty || self.sealed { return false }
            let before = self.pending.count
            self.reconcile(now)
            return self.pending.count > before && self.claimDelivery()
        }

        /// Called when the first observer registers: what the flags are now is what observers start from.
        mutating func startShowing(_ now: OperationState) {
            self.shownReady = now.isReady
            self.shownCancelled = now.isCancelled
        }

        /// Brings `shownCancelled` and `shownReady` (in that order: a cancel makes an operation ready) to `now`,
        /// queueing a `will` and a `did` for each that moved.
        private mutating func reconcile(_ now: OperationState) {
            if now.isCancelled != self.shownCancelled {
                self.shownCancelled = now.isCancelled
                self.append(.isCancelled, from: .bool(!now.isCancelled), to: .bool(now.isCancelled), will: true, did: true)
            }
            if now.isReady != self.shownReady {
                self.shownReady = now.isReady
                self.append(.isReady, from: .bool(!now.isReady), to: .bool(now.isReady), will: true, did: true)
            }
        }

        /// Queues the change for the observers registered so far that watch `key`.
        private mutating func append(_ key: Key, from old: ObservedValue, to new: ObservedValue, will: Bool, did: Bool) {
            guard self.observers.contains(where: { $0.keys.contains(key) }) else { return }
            if will { self.pending.append((Change(.will, key, from: old, to: new), self.nextID, 0)) }
            if did { self.pending.append((Change(.did, key, from: old, to: new), self.nextID, 0)) }
        }

        /// Records the event `key` (a `did` carrying `value`, no old value) for the observers registered so far
        /// that watch it; returns whether the caller must drain. Nothing after the end (sealed).
        mutating func recordEvent(_ key: Key, _ value: ObservedValue) -> Bool {
            if self.observers.isEmpty || self.sealed { return false }
            guard self.observers.contains(where: { $0.keys.contains(key) }) else { return false }
            let change = Change(phase: .did, key: key, oldValue: nil, newValue: value, isInitial: false)
            self.pending.append((change, self.nextID, 0))
            return self.claimDelivery()
        }

        /// Queues `changes` for observer `id` alone, ahead of every change recorded later, even once sealed;
        /// returns whether the caller must drain.
        mutating func queue(_ changes: [Change], for id: UInt64) -> Bool {
            if changes.isEmpty { return false }
            for change in changes { self.pending.append((change, 0, id)) }
            return self.claimDelivery()
        }

        /// Makes the caller the delivering thread unless another one is: returns whether it must drain.
        private mutating func claimDelivery() -> Bool {
            if self.delivering { return false }
            self.delivering = true
            return true
        }
    }

    /// Registers `handler` for changes of `keys`.
    ///
    /// Delivery: on the thread that made the change (or, when changes race, on the thread already delivering for
    /// this operation), outside every lock, in the order the changes happened, one at a time. Every change after
    /// registration is delivered exactly once, with the old and new values of that change. On finishing,
    /// `did isExecuting` comes before `did isFinished`, and `did isFinished` is the last change ever delivered. If
    /// the operation had already finished when you registered, `handler` is called once with `did isFinished` (if
    /// observed) so no observer misses the end.
    ///
    /// With `options: .initial`, `handler` first gets each observed property's value as it was at registration (one
    /// change per key, none for the event `producedOperation`; `isInitial`, before any later change and before that
    /// late `did isFinished`): on the calling thread before this returns; or, if this operation's changes are being
    /// delivered at that moment (by another thread, or by this one when called from a handler), by the delivering
    /// thread, before any later change to this observer. A state change whose atomic step came just before
    /// registration but is recorded just after (a racing `start` or finish) can show both in the initial value and
    /// as a change delivered after it; not so for `isReady` and `isCancelled`, whose moves are told to the earlier
    /// observers only (see `shownReady`).
    /// Callable from any thread.
    @discardableResult
    public final func observe(_ keys: Set<Key> = Set(Key.allCases), options: ObservingOptions = [],
                              _ handler: @escaping @Sendable (SpindleOperation, Change) -> Void) -> Observation {
        let (id, lateFinish, drain) = self.withLocked { l -> (UInt64, Bool, Bool) in
            // Flags that moved before this registration are told to the earlier observers only (their watermark is
            // this id), so the new observer starts from the current values.
            var flagsDrain = false
            if l.observation.observers.isEmpty {
                l.observation.startShowing(self.currentState)
            } else {
                flagsDrain = l.observation.recordFlags(now: self.currentState)
            }
            let id = l.observation.nextID
            l.observation.nextID += 1
            l.observation.observers.append((id, keys, handler))
            self.hasObservers.store(true, ordering: .sequentiallyConsistent)
            let finished = self.currentState.lifecycle == .finished
            if finished { l.observation.sealed = true }
            let lateFinish = finished && keys.contains(.isFinished)
            guard options.contains(.initial) else { return (id, lateFinish, flagsDrain) }
            var initial = self.initialChanges(for: keys, in: &l)
            if lateFinish { initial.append(.didFinish) }  // in the same queue, so after the initial values
            let initialDrain = l.observation.queue(initial, for: id)
            return (id, false, flagsDrain || initialDrain)
        }
        if drain { self.drainObservations() }
        if lateFinish { handler(self, .didFinish) }
        return Observation(id: id)
    }

    /// Stops deliveries to `observation`'s handler: no delivery to it begins after this returns; one another
    /// thread has already begun may still reach the handler (just after this returns) or finish. Callable from
    /// any thread, also from inside the handler itself (then nothing more reaches it).
    public final func removeObserver(_ observation: Observation) {
        let removed = self.withLocked { l -> [Observer] in
            let removed = l.observation.observers.filter { $0.id == observation.id }
            l.observation.observers.removeAll { $0.id == observation.id }
            return removed
        }
        _ = removed  // the handler (and its captures) released here, outside the lock: their deinit is user code
    }

    // MARK: - Delivering

    /// Delivers pending events until none remain; only the thread that set `delivering` calls it (a combining
    /// queue: events keep their order, user code never runs under the lock).
    final func drainObservations() {
        typealias Batch = (changes: [(change: Change, watermark: UInt64, target: UInt64)], observers: [Observer])
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
            for (change, watermark, target) in batch.changes {
                for observer in batch.observers
                where (target == 0 ? observer.id < watermark : observer.id == target)
                    && observer.keys.contains(change.key)
                {
                    // Re-check per call: a handler that removed itself (or another) gets nothing more.
                    let stillRegistered = self.withLocked { l in l.observation.observers.contains { $0.id == observer.id } }
                    if stillRegistered { observer.handler(self, change) }
                }
            }
        }
    }
}
