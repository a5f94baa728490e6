import CShim

/// The fields of an operation that most operations never use, kept out of the operation object so that a plain
/// operation stays small (one allocation that fits glibc's fast bins): created on the first write of any of them
/// and never freed before the operation.
///
/// Guards: every field is protected by the owning operation's `lockWord` (reach them through `withLocked`), except
/// `admittedAt`, which the owning queue reads and writes under its lock. Not shared between operations.
final class OperationExtras {
    // `@exclusivity(unchecked)` throughout: the operation's lock, not the runtime's dynamic checks, makes access
    // exclusive.
    @exclusivity(unchecked) var completionBlock: (@Sendable () -> Void)? = nil
    @exclusivity(unchecked) var name: String? = nil
    @exclusivity(unchecked) var dependencies = InlineFirstList<SpindleOperation>()
    @exclusivity(unchecked) var dependencySet: Set<ObjectIdentifier>? = nil  // built once dependencies grow past a few
    /// Unretained: a dependent is owned by its queue or its creator, not by us (no retain cycle). A dependent
    /// removes itself in its deinit while we have not released our dependents; the finish path retains each
    /// one that is not being destroyed before letting go of our lock (see `SpindleOperation.Locked.takeDependents`).
    @exclusivity(unchecked) var dependents = InlineFirstList<Unmanaged<SpindleOperation>>()
    @exclusivity(unchecked) var waiters: [SpindleSemaphore] = []
    @exclusivity(unchecked) var error: (any Error)? = nil
    @exclusivity(unchecked) var observation = SpindleOperation.ObservationState()
    @exclusivity(unchecked) var cancellationReason: SpindleCancellationReason? = nil  // set by whoever cancels for a reason of ours
    @exclusivity(unchecked) var deadlineEntry: DeadlineEntry? = nil  // armed deadline, in `DeadlineTimer.shared`'s heap
    @exclusivity(unchecked) var threadPriority: Double = 0.5  // meaningful once `SpindleOperation.hasThreadPriority` is set
    @exclusivity(unchecked) var moreBlocks: [@Sendable () -> Void] = []  // a `SpindleBlockOperation`'s blocks after the first
    /// The group this operation is a child of (see `SpindleGroupOperation`), from the group's `addOperation` until
    /// its finish path is complete (`releaseWaiters` takes it and tells the group). Weak: a group that never started
    /// can be released with its children inside (it then cancels them); a started one keeps itself alive.
    @exclusivity(unchecked) weak var parentGroup: SpindleGroupOperation? = nil
    /// Its conditions and exclusivity categories (a gated operation only). The reference is under the operation's
    /// lock; the gate's own fields say which lock guards each (`OperationGate`).
    @exclusivity(unchecked) var gate: OperationGate? = nil
    /// When its queue admitted it (ns, CLOCK_MONOTONIC), if that queue collects wait times. Under the queue's lock.
    @exclusivity(unchecked) var admittedAt: UInt64 = 0
}

extension SpindleOperation {
    /// An operation's lock-protected state (under `lockWord`): the fields every operation uses inline, the rest
    /// in `extras`. Reading a field that lives in `extras` allocates nothing (it reads as its default when there
    /// is no side object); writing one creates the side object, except writing a default where there is none.
    struct Locked {
        /// The owning queue, unretained: its handle is kept alive by the queue itself while any operation it
        /// claimed is unfinished (see `QueueCore.outstanding`), which covers every moment this is set.
        var queue: Unmanaged<SpindleOperationQueue>? = nil
        var extras: OperationExtras? = nil

        /// The side object, created on first use.
        var more: OperationExtras {
            mutating get {
                if let extras = self.extras { return extras }
                let extras = OperationExtras()
                self.extras = extras
                return extras
            }
        }

        var completionBlock: (@Sendable () -> Void)? {
            get { self.extras?.completionBlock }
            set { if newValue != nil || self.extras != nil { self.more.completionBlock = newValue } }
        }
        var name: String? {
            get { self.extras?.name }
            set { if newValue != nil || self.extras != nil { self.more.name = newValue } }
        }
        var dependencies: InlineFirstList<SpindleOperation> {
            get { self.extras?.dependencies ?? InlineFirstList() }
            _modify { let extras = self.more; yield &extras.dependencies }
        }
        var dependencySet: Set<ObjectIdentifier>? {
            get { self.extras?.dependencySet }
            _modify { let extras = self.more; yield &extras.dependencySet }
        }
        var dependents: InlineFirstList<Unmanaged<SpindleOperation>> {
            get { self.extras?.dependents ?? InlineFirstList() }
            _modify { let extras = self.more; yield &extras.dependents }
        }
        var waiters: [SpindleSemaphore] {
            get { self.extras?.waiters ?? [] }
            _modify { let extras = self.more; yield &extras.waiters }
        }
        var error: (any Error)? {
            get { self.extras?.error }
            set { if newValue != nil || self.extras != nil { self.more.error = newValue } }
        }
        var cancellationReason: SpindleCancellationReason? {
            get { self.extras?.cancellationReason }
            set { if newValue != nil || self.extras != nil { self.more.cancellationReason = newValue } }
        }
        var deadlineEntry: DeadlineEntry? {
            get { self.extras?.deadlineEntry }
            set { if newValue != nil || self.extras != nil { self.more.deadlineEntry = newValue } }
        }
        /// Observers and pending events; an operation that was never observed has none and allocates nothing here.
        var observation: ObservationState {
            get { self.extras?.observation ?? ObservationState() }
            _modify { let extras = self.more; yield &extras.observation }
        }

        /// Takes the dependents (leaving none), each retained, skipping any whose deinit has begun; without
        /// creating the side object. The caller releases them (outside every lock) after notifying them.
        @inline(__always)
        mutating func takeDependents() -> InlineFirstList<Unmanaged<SpindleOperation>> {
            guard let extras = self.extras, !extras.dependents.isEmpty else { return InlineFirstList() }
            return Locked.takeDependents(from: extras)
        }

        /// The rest of `takeDependents`, for an operation that has some: out of line, so the common case (none) is a
        /// load and a branch inlined into the finish path.
        @inline(never)
        private static func takeDependents(
            from extras: OperationExtras
        ) -> InlineFirstList<Unmanaged<SpindleOperation>> {
            var kept = InlineFirstList<Unmanaged<SpindleOperation>>()
            let listed = extras.dependents
            extras.dependents = InlineFirstList()
            listed.forEach { dependent in
                if cshim_try_retain(dependent.toOpaque()) != nil { kept.append(dependent) }
            }
            return kept
        }

        /// Takes the completion block (leaving none), without creating the side object.
        @inline(__always)
        mutating func takeCompletionBlock() -> (@Sendable () -> Void)? {
            guard let extras = self.extras, let block = extras.completionBlock else { return nil }
            extras.completionBlock = nil
            return block
        }

        /// Takes the waiters (leaving none), and the group it is a child of (unlinking it), without creating the side
        /// object.
        mutating func takeWaitersAndGroup() -> (waiters: [SpindleSemaphore], group: SpindleGroupOperation?) {
            guard let extras = self.extras else { return ([], nil) }
            let list = extras.waiters
            if !list.isEmpty { extras.waiters = [] }
            let group = extras.parentGroup
            if group != nil { extras.parentGroup = nil }
            return (list, group)
        }

        /// The group it is a child of, if any (reading creates nothing).
        var parentGroup: SpindleGroupOperation? { self.extras?.parentGroup }

        /// Records that `key` changed from `old` to `new` (see `ObservationState.record`); returns whether the
        /// caller must drain. Allocates nothing when the operation was never observed.
        /// `now`: the state word, read under the lock.
        mutating func recordObservation(_ key: Key, from old: ObservedValue, to new: ObservedValue,
                                        will: Bool = true, did: Bool = true, now: OperationState) -> Bool {
            guard let extras = self.extras else { return false }
            return extras.observation.record(key, from: old, to: new, will: will, did: did, now: now)
        }

        /// Records `did isFinished` (under the lock that makes it finished, `now` the finished state word), after
        /// any `isCancelled`/`isReady` change not recorded yet; returns whether the caller must drain. Allocates
        /// nothing when the operation was never observed.
        mutating func recordDidFinish(now: OperationState) -> Bool {
            guard let extras = self.extras else { return false }
            return extras.observation.record(.isFinished, from: .bool(false), to: .bool(true), will: false, did: true,
                                             now: now)
        }
    }
}
