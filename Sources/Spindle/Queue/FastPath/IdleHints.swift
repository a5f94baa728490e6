import Synchronization

/// The adding thread's lock-free view of `IdleWorkers`: one byte, so the add path reads one atomic to decide
/// whether it must take the queue lock to wake a worker or start a thread.
///
/// Who may call what:
/// - `publish(_:)`: only with `QueueCore.lock` held, right after `IdleWorkers` changed (so the word is always
///   `IdleWorkers.hintWord` as of the last change, and writers never race each other);
/// - `needsWakeAfterPush()`: any thread, without the lock, after pushing on the inbox.
///
/// Orderings, and what pairs with what (all sequentially consistent; a Dekker pairing, so of the two threads
/// at least one sees the other):
/// - an adding thread's inbox push (a compare-and-swap) then `needsWakeAfterPush()`, against
/// - a worker's `publish` of the parked bit then its load of the inbox before it waits, and
/// - a worker's `publish` that clears the taker-coming bit (it stopped spinning, or it was the last woken worker on
///   its way and is back under the lock), then its load of the inbox (`drainInboxLocked`, at the top of its loop).
/// So either the worker sees the pushed operation, or the adder sees the worker parked (or no longer coming)
/// and wakes it. A stale "taker coming" only delays the adder's wake to that worker's own look at the inbox (which
/// then decides the next wake, see `IdleWorkers.wakeOrSpawn`); a stale "parked" or "can spawn" only costs the adder a
/// look under the lock.
struct IdleHints: ~Copyable {
    /// A worker will see new work without being woken: one spins, or a woken one is on its way.
    static let takerComingBit: UInt8 = 1
    static let parkedBit: UInt8 = 2
    static let canSpawnBit: UInt8 = 4

    private let word = Atomic<UInt8>(IdleHints.canSpawnBit)

    init() {}

    /// Stores the new summary. Caller holds `QueueCore.lock`.
    @inline(__always)
    func publish(_ value: UInt8) {
        self.word.store(value, ordering: .sequentiallyConsistent)
    }

    /// After an inbox push: whether someone must be woken or a thread started. Not while a worker spins or a woken
    /// one is on its way (it will see the inbox), nor when every worker is busy and no thread may be added (each
    /// comes back to the lock and admits the inbox before it can park).
    @inline(__always)
    func needsWakeAfterPush() -> Bool {
        let value = self.word.load(ordering: .sequentiallyConsistent)
        return value & IdleHints.takerComingBit == 0 && value & (IdleHints.parkedBit | IdleHints.canSpawnBit) != 0
    }
}

/// Pushes into the ready buckets made while a worker spins: the spinner polls it without the lock to see that
/// work arrived (besides the inbox). Stored among the fields workers write, not the adding thread's.
///
/// Who may call what: `announce()` only with `QueueCore.lock` held and only while `IdleWorkers.spinning` (so pushes
/// made while nobody spins cost nothing); `current` anyone (relaxed: a hint; the spinner re-checks under the lock).
struct PushCounter: ~Copyable {
    private let count = Atomic<Int>(0)

    init() {}

    @inline(__always)
    func announce() { self.count.add(1, ordering: .relaxed) }

    @inline(__always)
    var current: Int { self.count.load(ordering: .relaxed) }
}
