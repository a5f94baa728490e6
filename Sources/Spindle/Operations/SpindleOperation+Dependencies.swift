/// The process-wide lock that serialises edits of the dependency graph, so that cycle detection sees a graph no
/// one else is changing. Lock order: this lock first, then (one at a time) operations' `locked`. The finish path
/// never takes it: a finishing operation only takes its own lock. Per process (`PerProcess`): a parent thread
/// editing a dependency at a `fork()` would leave it held for ever in the child.
enum DependencyGraph {
    private static let perProcess = PerProcess { SpindleMutex(.normal) }
    static var lock: SpindleMutex { perProcess.current }
}

extension SpindleOperation {
    /// The operations this one waits for, in the order they were added (finished ones stay listed).
    public final var dependencies: [SpindleOperation] { self.withLocked { $0.dependencies.array } }

    /// Makes this operation wait until `operation` has finished (across queues too). Adding the same dependency
    /// again does nothing. One added while it waits in a queue holds it back until `operation` has finished (also
    /// when the queue had found it ready, unless a worker has taken it); one added after it started (or was taken
    /// to start), once it is cancelled, or to an operation with conditions or exclusivity categories that its queue
    /// has already let through, is listed but does not hold it back.
    ///
    /// - Throws: `selfDependency` for `addDependency(self)`; `barrierTakesNoDependencies` on a barrier
    ///   (`addBarrierBlock`'s operation); `dependencyCycle` (naming the operations on the cycle) when `operation`
    ///   already waits, directly or not, for this one, or for a `SpindleGroupOperation` this one is inside (which
    ///   waits for it), or is such a group. Nothing changes then.
    ///
    /// Final. Porting an `addDependency` override (one that also records the dependency elsewhere): observe
    /// `.dependencies`, whose changes carry the list before and after.
    public final func addDependency(_ operation: SpindleOperation) throws(SpindleError) {
        if operation === self { throw .selfDependency(name: self.displayName) }
        if self.isBarrier { throw .barrierTakesNoDependencies(name: self.displayName) }
        // What the checks below reach, kept until after unlocking: a reference they took may be the last one (a
        // child its queue let go meanwhile, a group only its children point to), and its deinit is user code.
        var reached: [SpindleOperation] = []
        defer { withExtendedLifetime(reached) {} }
        let (becameUnready, drain) = try DependencyGraph.lock.withLock { () throws(SpindleError) -> (Bool, Bool) in
            let (listed, hasDependents, parent) = self.withLocked { l -> (Bool, Bool, SpindleGroupOperation?) in
                guard let extras = l.extras else { return (false, false, nil) }
                let listed = extras.dependencySet?.contains(ObjectIdentifier(operation))
                    ?? extras.dependencies.contains { $0 === operation }
                return (listed, !extras.dependents.isEmpty, extras.parentGroup)
            }
            if listed { return (false, false) }
            // A group waits for its children: one depending on its own child could never start.
            if self.isGroup, let group = self as? SpindleGroupOperation, group.encloses(operation) {
                throw .dependencyCycle(cycle: [self.displayName, "\(operation.displayName) (inside \(self.displayName))"])
            }
            // The groups this one is inside wait for it: depending on one of them (directly or not) is a cycle too.
            let groups = parent.map { [$0] + $0.enclosingGroups } ?? []
            reached += groups
            if let group = groups.first(where: { $0 === operation }) {
                throw .dependencyCycle(cycle: [self.displayName, "\(group.displayName) (contains \(self.displayName))"])
            }
            // Something waits for this one (dependents, the groups it is inside, or, for a group, its children): a
            // path back to it from `operation` would close a cycle.
            if hasDependents || !groups.isEmpty || self.isGroup,
                let cycle = self.pathOfUnfinishedDependencies(from: operation, to: [self] + groups,
                                                              startTarget: self.isGroup ? self : nil, reached: &reached)
            {
                throw .dependencyCycle(cycle: Self.describeCycle([self] + cycle, closingOn: self))
            }
            // Count it until `operation` has released its dependents (after its completion block), atomically
            // with that step (under its lock).
            let wasReady = self.isReady
            let counted: Bool
            if self.currentState.unschedulingAddingPendingDependency() != nil, let queue = self.owningQueue {
                // Its queue found it ready, but no worker has taken it yet (a suspended or busy queue, or held
                // behind a barrier): out of its bucket again, under the queue's lock, and counted (Foundation's "not
                // ready until its dependencies have finished" for an operation waiting in a queue).
                counted = queue.core.holdBackReady(self) {
                    operation.withLocked { upstream -> Bool in
                        guard !operation.dependentsReleased,
                            self.advanceState({ $0.unschedulingAddingPendingDependency() }).moved
                        else { return false }
                        upstream.dependents.append(Unmanaged.passUnretained(self))
                        return true
                    }
                }
            } else {
                counted = operation.withLocked { upstream -> Bool in
                    guard !operation.dependentsReleased, self.addPendingDependency() else { return false }
                    upstream.dependents.append(Unmanaged.passUnretained(self))
                    return true
                }
            }
            let drain = self.withLocked { l -> Bool in
                let extras = l.more
                // The list before and after, recorded under the lock that changes it (only if someone watches).
                let before = extras.observation.wants(.dependencies) ? extras.dependencies.array : nil
                extras.dependencies.append(operation)
                if extras.dependencySet != nil {
                    extras.dependencySet!.insert(ObjectIdentifier(operation))
                } else if extras.dependencies.count > 8 {
                    var set = Set<ObjectIdentifier>()
                    extras.dependencies.forEach { set.insert(ObjectIdentifier($0)) }
                    extras.dependencySet = set
                }
                guard let before else { return false }
                return extras.observation.record(.dependencies, from: .dependencies(before),
                                                 to: .dependencies(before + [operation]), will: true, did: true,
                                                 now: self.currentState)
            }
            return (counted && wasReady && !self.isReady, drain)
        }
        if drain { self.drainObservations() }
        if becameUnready { self.emitReadinessFlags() }
    }

    /// Stops waiting for `operation`. If nothing else holds this one back it becomes ready (and its queue starts
    /// it). Removing an operation that is not a dependency does nothing.
    public final func removeDependency(_ operation: SpindleOperation) {
        let (released, drain) = DependencyGraph.lock.withLock { () -> (Bool, Bool) in
            let (listed, drain) = self.withLocked { l -> (Bool, Bool) in
                guard let extras = l.extras, let index = extras.dependencies.firstIndex(where: { $0 === operation })
                else { return (false, false) }
                // The list before and after, recorded under the lock that changes it (only if someone watches).
                let before = extras.observation.wants(.dependencies) ? extras.dependencies.array : nil
                extras.dependencies.remove(at: index)
                extras.dependencySet?.remove(ObjectIdentifier(operation))
                guard let before else { return (true, false) }
                let after = extras.dependencies.array
                return (true, extras.observation.record(.dependencies, from: .dependencies(before),
                                                        to: .dependencies(after), will: true, did: true,
                                                        now: self.currentState))
            }
            guard listed else { return (false, false) }
            // If `operation` still lists us as a dependent, it has not finished: we were counted; uncount.
            let counted = operation.withLocked { upstream -> Bool in
                let me = Unmanaged.passUnretained(self).toOpaque()
                guard let index = upstream.dependents.firstIndex(where: { $0.toOpaque() == me }) else { return false }
                upstream.dependents.remove(at: index)
                return true
            }
            return (counted, drain)
        }
        if drain { self.drainObservations() }
        if released { self.dependencyFinished() }
    }

    /// One counted dependency finished (`failed`: with an error, or cancelled) or was removed; becoming ready tells
    /// observers and the queue. With `cancelsOnFailedDependency`, a failed one cancels this operation first, while
    /// the dependency still holds it back, so it can never start in between. When only an armed gate's hold is left,
    /// this thread opens the gate (`SpindleOperation+Conditions`). `selfServe`: called by a worker finishing the
    /// dependency, which may keep this operation for itself; returns whether it did.
    @discardableResult
    final func dependencyFinished(failed: Bool = false, selfServe: Bool = false) -> Bool {
        var current = self.currentState
        if failed && current.propagatesFailure {
            self.cancel(for: .dependencyFailed)
            current = self.currentState
        }
        while true {
            var next = current.removingPendingDependency()
            // An armed gate left with its hold alone: disarmed in this compare-and-swap, so this thread alone opens it.
            let opening = next.gateOpening()
            if let opening { next = opening }
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done {
                if opening != nil {
                    self.openGate()
                    return false
                }
                if !current.isReady && next.isReady { return self.becameReady(selfServe: selfServe) }
                return false
            }
            current = OperationState(raw: seen)
        }
    }

    /// Removes `dependent` (being destroyed, or about to be) from the dependents of each of `dependencies` that has
    /// not released them yet. O(dependents) per dependency still listing it.
    static func unlist(_ dependent: Unmanaged<SpindleOperation>, from dependencies: InlineFirstList<SpindleOperation>) {
        let me = dependent.toOpaque()
        dependencies.forEach { dependency in
            dependency.withLocked { l in
                guard !dependency.dependentsReleased, let extras = l.extras,
                    let index = extras.dependents.firstIndex(where: { $0.toOpaque() == me })
                else { return }
                extras.dependents.remove(at: index)
            }
        }
    }

    /// Counts one more pending dependency if the state allows it (see `OperationState.addingPendingDependency`).
    private func addPendingDependency() -> Bool {
        var current = self.currentState
        while let next = current.addingPendingDependency() {
            let (done, seen) = self.state.compareExchange(
                expected: current.raw, desired: next.raw, ordering: .acquiringAndReleasing)
            if done { return true }
            current = OperationState(raw: seen)
        }
        return false
    }

    /// Whether `start` (transitively, through unfinished operations) waits for `self`; returns the path
    /// start → … → self if so. Called under `DependencyGraph.lock`.
    ///
    /// What an operation waits for: its unfinished dependencies (their ends), and, inside a group that has not
    /// started, that group's start (its children run only once it does, so they wait for what it waits for). A
    /// target reached through a dependency is reached; one reached as a group's start only when it is
    /// `startTarget` (a group, in `addDependency`: its own start is what the new link holds back). A group's end
    /// waits for its unfinished children's ends (`linkedChildren`: the inner queue's members, and those being
    /// handed to it).
    ///
    /// Cost: a lock or two when `start` has no dependencies and is in no group (the common way graphs are built:
    /// new operations depend on older ones), otherwise a depth-first search of `start`'s unfinished ancestry only;
    /// finished operations cannot be on a live cycle and are not entered.
    ///
    /// `targets`: the search ends at the first of them it reaches (`self`, and the groups `self` is inside).
    /// `reached`: every operation the search took a reference to, for the caller to release after unlocking.
    func pathOfUnfinishedDependencies(from start: SpindleOperation, to targets: [SpindleOperation],
                                      startTarget: SpindleOperation? = nil, reached: inout [SpindleOperation])
        -> [SpindleOperation]?
    {
        /// What `node`'s start (`asStart`) or end waits for: its dependencies (reached as ends), then its group if
        /// that has not started yet; a group's end also waits for its children's ends.
        func waitsFor(_ node: SpindleOperation, asStart: Bool) -> [(SpindleOperation, asStart: Bool)] {
            let (deps, parent) = node.withLocked { ($0.dependencies.array, $0.parentGroup) }
            var next = deps.map { ($0, asStart: false) }
            if let parent, parent.currentState.lifecycle < .executing { next.append((parent, asStart: true)) }
            if !asStart, node.isGroup, let group = node as? SpindleGroupOperation {
                next += group.linkedChildren.lazy.map { ($0, asStart: false) }
            }
            return next
        }
        struct Key: Hashable {
            let node: ObjectIdentifier
            let asStart: Bool
        }
        let first = waitsFor(start, asStart: false)
        reached += first.lazy.map(\.0)
        if first.isEmpty { return nil }
        var visited: Set<Key> = [Key(node: ObjectIdentifier(start), asStart: false)]
        var stack: [(successors: [(SpindleOperation, asStart: Bool)], index: Int)] = [(first, 0)]
        var path: [SpindleOperation] = [start]
        while let (successors, index) = stack.last {
            if index >= successors.count {
                stack.removeLast()
                path.removeLast()
                continue
            }
            stack[stack.count - 1].index = index + 1
            let (next, asStart) = successors[index]
            if asStart ? next === startTarget : targets.contains(where: { $0 === next }) { return path + [next] }
            guard next.currentState.lifecycle != .finished,
                visited.insert(Key(node: ObjectIdentifier(next), asStart: asStart)).inserted
            else { continue }
            let successors = waitsFor(next, asStart: asStart)
            reached += successors.lazy.map(\.0)
            stack.append((successors, 0))
            path.append(next)
        }
        return nil
    }
}

extension SpindleOperation {
    /// The groups this operation is inside, innermost first (each waits for it), following the child → group links
    /// while they last (a child's link goes when its finish path completes). O(depth); one operation lock at a time.
    final var enclosingGroups: [SpindleGroupOperation] {
        var groups: [SpindleGroupOperation] = []
        var node = self.parentGroup
        while let group = node {
            groups.append(group)
            node = group.parentGroup
        }
        return groups
    }

    /// The names along `path` (each depends on the next), its last element named as the group containing
    /// `operation` when it is not `operation` itself.
    static func describeCycle(_ path: [SpindleOperation], closingOn operation: SpindleOperation) -> [String] {
        guard let last = path.last, last !== operation else { return path.map(\.displayName) }
        return path.dropLast().map(\.displayName) + ["\(last.displayName) (contains \(operation.displayName))"]
    }
}
