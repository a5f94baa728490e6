import Synchronization

/// Operations claimed by a queue and not yet through its bookkeeping after finishing (or given back). While the
/// count is above zero the queue holds one reference to its own handle (`QueueCore.addOutstanding`), so a handle
/// dropped by its user lives on until its work is done, and operations can point at it unretained.
///
/// Who may call what: `add()` any thread that is adding to the queue (it holds the handle); `drop(_:)` any
/// finishing path, never under `QueueCore.lock` (the last drop releases the handle, which may free it). Workers
/// drop in batches, so the adding thread keeps this counter's cache line to itself.
///
/// Orderings: acquiring-and-releasing read-modify-writes, so everything a finishing path did before its drop
/// happens before the handle's release by the last one.
struct OutstandingCount: ~Copyable {
    private let count = Atomic<Int>(0)

    init() {}

    /// One more; returns true for the first (0 → 1: retain the handle).
    @inline(__always)
    func add() -> Bool { self.count.add(1, ordering: .acquiringAndReleasing).oldValue == 0 }

    /// `n` fewer; returns true for the last (→ 0: release the handle).
    @inline(__always)
    func drop(_ n: Int) -> Bool { self.count.subtract(n, ordering: .acquiringAndReleasing).newValue == 0 }
}

/// `capacity != nil`, mirrored for the add path's one test before its lock-free push: written with
/// `QueueCore.lock` held (`set`), read by adding threads without it (`isBounded`, relaxed: an add that races a
/// capacity change is ordered either way, as if it came just before or just after it).
struct BoundedHint: ~Copyable {
    private let bounded = Atomic<Bool>(false)

    init() {}

    @inline(__always)
    var isBounded: Bool { self.bounded.load(ordering: .relaxed) }

    /// Caller holds `QueueCore.lock`.
    func set(_ value: Bool) { self.bounded.store(value, ordering: .sequentiallyConsistent) }
}
