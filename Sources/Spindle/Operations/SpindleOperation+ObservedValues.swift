extension SpindleOperation {
    /// The value of an observed key, typed (what KVO's change dictionary holds under `.oldKey` and `.newKey`):
    /// `bool` for `isReady`, `isExecuting`, `isFinished` and `isCancelled`, `priority` for `queuePriority`,
    /// `dependencies` for `dependencies`, `operation` for the event `producedOperation`.
    public enum ObservedValue: Sendable, Hashable, CustomStringConvertible {
        /// The value of `isReady`, `isExecuting`, `isFinished` or `isCancelled`.
        case bool(Bool)
        /// The value of `queuePriority`.
        case priority(QueuePriority)
        /// The value of `dependencies`: the operations, in the order they were added.
        case dependencies([SpindleOperation])
        /// The operation an event is about: for `producedOperation`, the operation produced.
        case operation(SpindleOperation)

        /// The flag, if this is the value of `isReady`, `isExecuting`, `isFinished` or `isCancelled`; else nil.
        public var boolValue: Bool? {
            if case .bool(let value) = self { return value }
            return nil
        }

        /// The priority, if this is the value of `queuePriority`; else nil.
        public var priorityValue: QueuePriority? {
            if case .priority(let value) = self { return value }
            return nil
        }

        /// The operations, if this is the value of `dependencies`; else nil.
        public var dependenciesValue: [SpindleOperation]? {
            if case .dependencies(let value) = self { return value }
            return nil
        }

        /// The operation, if this is the value of the event `producedOperation`; else nil.
        public var operationValue: SpindleOperation? {
            if case .operation(let value) = self { return value }
            return nil
        }

        /// Equal when of the same case with equal flags or priorities, or the same operations (by identity) in the
        /// same order. Any thread.
        public static func == (a: ObservedValue, b: ObservedValue) -> Bool {
            switch (a, b) {
            case (.bool(let x), .bool(let y)): return x == y
            case (.priority(let x), .priority(let y)): return x == y
            case (.dependencies(let x), .dependencies(let y)):
                return x.count == y.count && zip(x, y).allSatisfy { $0 === $1 }
            case (.operation(let x), .operation(let y)): return x === y
            default: return false
            }
        }

        /// Hashes the case and its payload (operations by identity). Any thread.
        public func hash(into hasher: inout Hasher) {
            switch self {
            case .bool(let value):
                hasher.combine(0)
                hasher.combine(value)
            case .priority(let value):
                hasher.combine(1)
                hasher.combine(value)
            case .dependencies(let operations):
                hasher.combine(2)
                hasher.combine(operations.count)
                for operation in operations { hasher.combine(ObjectIdentifier(operation)) }
            case .operation(let operation):
                hasher.combine(3)
                hasher.combine(ObjectIdentifier(operation))
            }
        }

        /// "true", "high", "[fetch, parse]" (display names; past four, "+N more"), "fetch". Any thread; the names
        /// of operations are read when this is called (each under its own operation's lock, never ours).
        public var description: String {
            switch self {
            case .bool(let value): return "\(value)"
            case .priority(let value): return "\(value)"
            case .dependencies(let operations):
                var names = operations.prefix(4).map(\.displayName)
                if operations.count > 4 { names.append("+\(operations.count - 4) more") }
                return "[\(names.joined(separator: ", "))]"
            case .operation(let operation): return operation.displayName
            }
        }
    }

    /// Options of `observe` (KVO's `NSKeyValueObservingOptions`; old and new values and the prior `will`
    /// notification are always delivered, so the only option is `.initial`).
    public struct ObservingOptions: OptionSet, Sendable, Hashable {
        /// The raw bits.
        public let rawValue: UInt8
        /// An option set from raw bits. Any thread; throws nothing.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Deliver each observed property's current value once, at registration (KVO's `.initial`): one change per
        /// key (none for the event `producedOperation`, which has no value), `isInitial`, phase `did`, no old value,
        /// in `Key.allCases` order, before any later change.
        public static let initial = ObservingOptions(rawValue: 1)
    }
}

extension SpindleOperation.Change {
    /// A change of `key` from `old` to `new`.
    init(_ phase: Phase, _ key: SpindleOperation.Key, from old: SpindleOperation.ObservedValue,
         to new: SpindleOperation.ObservedValue) {
        self.init(phase: phase, key: key, oldValue: old, newValue: new, isInitial: false)
    }

    /// The `did isFinished` change (false → true).
    static let didFinish = SpindleOperation.Change(.did, .isFinished, from: .bool(false), to: .bool(true))
}

extension SpindleOperation {
    /// The initial changes for `keys` (in `Key.allCases` order): the current values. Called under the operation's
    /// lock, as the observer is registered, so they are consistent with every change recorded after them (a change
    /// whose state word moved before, but that is recorded only after, may show in both; see `observe`).
    func initialChanges(for keys: Set<Key>, in l: inout Locked) -> [Change] {
        let state = self.currentState
        return Key.allCases.filter { keys.contains($0) && $0 != .producedOperation }.map { key in
            let value: ObservedValue
            switch key {
            case .isReady: value = .bool(state.isReady)
            case .isExecuting: value = .bool(state.lifecycle == .executing)
            case .isFinished: value = .bool(state.lifecycle == .finished)
            case .isCancelled: value = .bool(state.isCancelled)
            case .queuePriority:
                value = .priority(.rounding(Int(self.priorityStorage.load(ordering: .sequentiallyConsistent))))
            case .dependencies: value = .dependencies(l.dependencies.array)
            case .producedOperation: preconditionFailure("an event has no initial value")  // filtered out above
            }
            return Change(phase: .did, key: key, oldValue: nil, newValue: value, isInitial: true)
        }
    }

    /// Records that `key` changed from `old` to `new` (a `will` and a `did`, or only one of them) and delivers it
    /// if this thread must. Does nothing, allocating nothing, without observers.
    final func emit(_ key: Key, from old: ObservedValue, to new: ObservedValue, will: Bool = true, did: Bool = true) {
        guard self.hasObservers.load(ordering: .relaxed) else { return }
        if self.withLocked({ $0.recordObservation(key, from: old, to: new, will: will, did: did, now: self.currentState) }) {
            self.drainObservations()
        }
    }

    /// `isExecuting` or `isFinished` changed to `new`: its old value is `!new`. (Never `isReady` or `isCancelled`:
    /// their changes are reconciled with the state word, `emitReadinessFlags`.)
    final func emitFlag(_ key: Key, to new: Bool, will: Bool = true, did: Bool = true) {
        assert(key == .isExecuting || key == .isFinished, "\(key) is reconciled, not emitted")
        self.emit(key, from: .bool(!new), to: .bool(new), will: will, did: did)
    }

    /// `isReady` or `isCancelled` may have changed: records what moved since observers were last told, reading the
    /// state word under the lock (see `ObservationState.shownReady`). Nothing without observers.
    final func emitReadinessFlags() {
        guard self.hasObservers.load(ordering: .relaxed) else { return }
        let drain = self.withLocked { l -> Bool in
            guard let extras = l.extras else { return false }
            return extras.observation.recordFlags(now: self.currentState)
        }
        if drain { self.drainObservations() }
    }

    /// Sets the queue priority of an observed operation: the exchange and its record under one lock, so racing
    /// sets are delivered in the order their values replaced each other, each with its own old and new values.
    /// Returns whether the priority changed (then the change has been delivered, or handed to the delivering thread).
    final func exchangeObservedPriority(_ priority: QueuePriority) -> Bool {
        let raw = Int8(priority.rawValue)
        let (old, drain) = self.withLocked { l -> (Int8, Bool) in
            let old = self.priorityStorage.exchange(raw, ordering: .sequentiallyConsistent)
            guard old != raw else { return (old, false) }
            let drain = l.recordObservation(.queuePriority, from: .priority(.rounding(Int(old))),
                                            to: .priority(priority), now: self.currentState)
            return (old, drain)
        }
        if drain { self.drainObservations() }
        return old != raw
    }
}
