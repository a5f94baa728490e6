/// The count that decides when a `SpindleGroupOperation` finishes: pure transitions (no lock, no atomics), kept
/// under the group's `lock`, so one test can check the whole table.
///
/// `pending` counts the children added and not yet through: a child is counted from the moment its add begins (so a
/// count can never reach zero while an add is in flight) until its finish path is complete, or its add failed.
///
/// Phases (forward only):
/// - `gathering`: the group has not started; children wait in its suspended inner queue. `pending` only grows, or
///   shrinks when an add fails; reaching zero seals nothing. → `running` (`start`).
/// - `running`: the group started (it executes; or, cancelled before it started, its children drain unrun).
///   `admit` counts, `release` uncounts. → `sealed` when `pending` reaches zero (at `start`, if there are no
///   children, or when the last counted child is through).
/// - `sealed`: terminal. `admit` refuses (the group is finishing or finished); nothing is counted any more.
///
/// Exactly one transition into `sealed` happens, and the caller that made it (the only one told `true`) finishes
/// the group: that is the "finishes exactly once" of the group.
struct GroupChildCount: Equatable, Sendable, CustomStringConvertible {
    enum Phase: Equatable, Sendable { case gathering, running, sealed }

    private(set) var phase = Phase.gathering
    private(set) var pending = 0

    /// What `start` found.
    enum Start: Equatable, Sendable {
        /// `gathering` → `running`; `sealed`: there was nothing pending, so it sealed at once.
        case started(sealed: Bool)
        /// Already started by another call (running or sealed): nothing changed.
        case alreadyStarted(sealed: Bool)
    }

    /// `count` children begin to be added: counted, unless sealed (returns false, nothing changed).
    mutating func admit(_ count: Int) -> Bool {
        precondition(count >= 0, "GroupChildCount: negative admit")
        guard self.phase != .sealed else { return false }
        self.pending += count
        return true
    }

    /// `count` counted children are through (finished and settled, or their add failed). Returns true when this
    /// sealed the count (running, nothing left): the caller finishes the group.
    mutating func release(_ count: Int) -> Bool {
        precondition(count >= 0 && count <= self.pending, "GroupChildCount: release of more than was counted")
        self.pending -= count
        return self.sealIfDone()
    }

    /// The group starts: `gathering` → `running`, sealing at once if nothing is pending.
    mutating func start() -> Start {
        guard self.phase == .gathering else { return .alreadyStarted(sealed: self.phase == .sealed) }
        self.phase = .running
        return .started(sealed: self.sealIfDone())
    }

    private mutating func sealIfDone() -> Bool {
        guard self.phase == .running, self.pending == 0 else { return false }
        self.phase = .sealed
        return true
    }

    /// "running pending=3". Any thread (it is a value).
    var description: String { "\(self.phase) pending=\(self.pending)" }
}
