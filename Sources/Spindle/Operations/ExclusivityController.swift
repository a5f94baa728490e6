/// Mutual exclusivity by category, across every queue of the process: at most one operation holds a category at a
/// time; the others wait in that category's line, first come first served, in the order their gates opened (their
/// dependencies done). An operation in several categories takes them one by one in sorted order, waiting in the
/// line of the first it cannot have while keeping those before it, so two operations never wait for each other
/// (the classic fixed lock order). Each step is O(1) per category: a dictionary lookup and a doubly linked line;
/// nothing is ever rescanned.
///
/// Guards: `lines` and every gate's controller half (`OperationGate.phase`, `order`, `held`, `operation`,
/// `lineNext`, `linePrev`) are under `lock`.
///
/// Lock order: `lock` is a leaf, after every other lock of Spindle (`DependencyGraph.lock → a queue's lock → an
/// operation's locked → DeadlineTimer.lock`, and this one may be taken under any of them, as the queue's
/// diagnostics do); nothing else is ever taken while it is held. No user code, no `dependencyFinished`, no
/// reference released to zero (an operation's deinit is user code) ever runs under it: the gates granted by a
/// release are returned to the caller, which continues them after unlocking.
///
/// State machine: each gate's `phase` (see `OperationGate`); each line: absent (no holder) → held with an empty
/// or non-empty line of waiters → (its holder releases) handed to the first waiter that is not cancelled, or
/// absent again when none is left. Invariant: a category with no holder has no line (a release hands it on at
/// once), so `lines` holds only categories in use.
///
/// After `fork()`: the child gets a new, empty controller (`PerProcess`; the parent's lock may be held by a thread
/// the child does not have). A gate the parent's controller knew (an operation the forking thread was running)
/// is simply forgotten when it is released in the child.
final class ExclusivityController: @unchecked Sendable {
    /// The controller of this process: categories are process-wide.
    static var shared: ExclusivityController { ExclusivityController.perProcess.current }
    private static let perProcess = PerProcess { ExclusivityController() }

    /// What `acquire` did.
    enum Acquisition {
        /// It holds every category now: the caller continues the gate.
        case acquired
        /// It waits in a line; the release that hands it its last category returns it to that releasing thread.
        case waiting
        /// It was cancelled or finished first: nothing is held, nothing will be.
        case abandoned
        /// One of its categories is held by a group it is inside, which holds it until this operation finished: it
        /// would wait for ever. Nothing is held; the caller fails the operation.
        case heldByEnclosingGroup(category: String, group: SpindleGroupOperation)
    }

    /// One category: its holder, and the gates waiting for it (first in, first out).
    private final class Line {
        var holder: OperationGate?
        var head: OperationGate? = nil
        var tail: Unmanaged<OperationGate>? = nil

        init(holder: OperationGate) { self.holder = holder }

        func append(_ gate: OperationGate) {
            gate.lineNext = nil
            gate.linePrev = self.tail
            if let tail = self.tail { tail.takeUnretainedValue().lineNext = gate } else { self.head = gate }
            self.tail = Unmanaged.passUnretained(gate)
        }

        func popFirst() -> OperationGate? {
            guard let first = self.head else { return nil }
            self.remove(first)
            return first
        }

        func remove(_ gate: OperationGate) {
            let next = gate.lineNext
            if let prev = gate.linePrev { prev.takeUnretainedValue().lineNext = next } else { self.head = next }
            if let next { next.linePrev = gate.linePrev } else { self.tail = gate.linePrev }
            gate.lineNext = nil
            gate.linePrev = nil
        }
    }

    let lock = SpindleMutex(.normal)
    @exclusivity(unchecked) private var lines: [String: Line] = [:]

    /// `operation`'s gate opened: takes `categories` (sorted, distinct) in order, or waits in the line of the
    /// first it cannot have. Refused, with nothing taken, when one of them is held by one of `enclosingGroups` (the
    /// groups the operation is inside): a group holds its categories until its last child finished, so that wait
    /// could never end. Any thread, no lock held.
    func acquire(_ gate: OperationGate, for operation: SpindleOperation, categories: [String],
                 enclosingGroups: [SpindleGroupOperation] = []) -> Acquisition {
        self.lock.lock()
        defer { self.lock.unlock() }
        guard gate.phase == .outside else { return .abandoned }  // cancelled (or finished) first
        if operation.isCancelled {
            gate.phase = .done  // its cancel() may not have reached us yet: it will find nothing to do
            return .abandoned
        }
        // A group's holding is stable here: it lets go only once this operation (its child) finished.
        for name in categories where !enclosingGroups.isEmpty {
            guard let holder = self.lines[name]?.holder?.operation else { continue }
            if let group = enclosingGroups.first(where: { $0 === holder }) {
                return .heldByEnclosingGroup(category: name, group: group)
            }
        }
        gate.order = categories
        gate.operation = operation
        gate.controller = ObjectIdentifier(self)
        return self.acquireRestLocked(gate) ? .acquired : .waiting
    }

    /// `gate`'s operation finished, or was cancelled before it began executing: it leaves its line and hands on
    /// every category it holds. Returns the gates that now hold all their categories (each with its operation,
    /// retained), which the caller continues, in order, after this returns. Idempotent. Any thread, no lock held.
    func release(_ gate: OperationGate) -> [(gate: OperationGate, operation: SpindleOperation)] {
        var granted: [(gate: OperationGate, operation: SpindleOperation)] = []
        var dropped: [SpindleOperation] = []
        self.lock.lock()
        self.retireLocked(gate, granted: &granted, dropped: &dropped)
        self.lock.unlock()
        withExtendedLifetime(dropped) {}  // the references the controller held go only now, outside the lock
        return granted
    }

    /// For diagnostics: where the gate stands, or nil if the controller does not know it.
    func describe(_ gate: OperationGate) -> String? {
        self.lock.withLock {
            switch gate.phase {
            case .outside, .done: return nil
            case .holding: return "holds exclusivity \(gate.order.joined(separator: ", "))"
            case .waiting: return "waits for exclusivity '\(gate.order[gate.held])'"
            }
        }
    }

    /// Whether someone holds `category` now (for tests and diagnostics).
    func isHeld(_ category: String) -> Bool { self.lock.withLock { self.lines[category] != nil } }

    // MARK: - Under the lock

    /// Takes the gate's categories from `held` on; returns true when it holds them all (phase `holding`), false
    /// when it waits in a line (phase `waiting`).
    private func acquireRestLocked(_ gate: OperationGate) -> Bool {
        while gate.held < gate.order.count {
            let name = gate.order[gate.held]
            if let line = self.lines[name] {
                // A line exists only while its category is held (the invariant), so this one waits.
                line.append(gate)
                gate.phase = .waiting
                return false
            }
            self.lines[name] = Line(holder: gate)
            gate.held += 1
        }
        gate.phase = .holding
        return true
    }

    /// Takes `gate` out of the controller: out of its line, and every category it holds handed on.
    private func retireLocked(_ gate: OperationGate, granted: inout [(gate: OperationGate, operation: SpindleOperation)],
                              dropped: inout [SpindleOperation]) {
        switch gate.phase {
        case .done: return
        case .outside:
            gate.phase = .done
            return
        case .waiting, .holding:
            guard gate.controller == ObjectIdentifier(self) else {  // a parent process's controller knew it
                self.forget(gate, dropped: &dropped)
                return
            }
            if gate.phase == .waiting { self.lines[gate.order[gate.held]]!.remove(gate) }
        }
        var toHandOn = Array(gate.order[0..<gate.held])
        self.forget(gate, dropped: &dropped)
        while let name = toHandOn.popLast() {
            self.handOnLocked(name, toHandOn: &toHandOn, granted: &granted, dropped: &dropped)
        }
    }

    /// The holder of `name` let go: the first waiter that is not cancelled takes it and goes on with its next
    /// categories; a cancelled one leaves the line, and what it holds is handed on too (`toHandOn`).
    private func handOnLocked(_ name: String, toHandOn: inout [String],
                              granted: inout [(gate: OperationGate, operation: SpindleOperation)],
                              dropped: inout [SpindleOperation]) {
        let line = self.lines[name]!
        line.holder = nil
        while let next = line.popFirst() {
            if next.operation!.isCancelled {
                // Its cancel() has not reached us yet (it will find it done): it must not hold anything.
                toHandOn.append(contentsOf: next.order[0..<next.held])
                self.forget(next, dropped: &dropped)
                continue
            }
            line.holder = next
            next.held += 1
            if self.acquireRestLocked(next) { granted.append((next, next.operation!)) }
            return
        }
        self.lines[name] = nil
    }

    /// Marks the gate done and lets go of its operation (into `dropped`, released after unlocking).
    private func forget(_ gate: OperationGate, dropped: inout [SpindleOperation]) {
        gate.phase = .done
        gate.held = 0
        if let operation = gate.operation { dropped.append(operation) }
        gate.operation = nil
    }
}
