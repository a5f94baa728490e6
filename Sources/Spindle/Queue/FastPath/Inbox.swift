import Synchronization

/// The lock-free way in: a stack (Treiber), newest first, of claimed operations linked through `nextLink`, each
/// carrying the queue's one retained reference. Adding threads push without the queue lock; whoever holds the
/// lock takes everything at once and admits it oldest first, so every locked view of the queue includes them in
/// the order they were added.
///
/// Who may call what:
/// - `push(_:)`: any thread, without the lock, for an operation it has claimed for this queue;
/// - `takeAllOldestFirst()`: only with `QueueCore.lock` held (`drainInboxSlowLocked`);
/// - `isEmpty`: anyone (sequentially consistent: the load that pairs with a push in the Dekker pairing below);
/// - `mayHoldWork`: a spinning worker without the lock (relaxed: a hint, re-checked under the lock).
///
/// Orderings: the push's compare-and-swap and `takeAllOldestFirst`'s exchange are sequentially consistent, and so
/// is the `isEmpty` a worker does after advertising itself parked (see `IdleHints`): of an adding thread (push,
/// then load the hints) and a parking worker (publish the hints, then load the inbox), at least one sees the
/// other. The exchange's acquire half makes each pushed operation's fields (its `nextLink`, its claim) visible to
/// the draining thread.
struct Inbox: ~Copyable {
    private let head = Atomic<UInt>(0)

    init() {}

    /// Pushes `op`, retaining it (the queue's reference). Lock-free.
    @inline(__always)
    func push(_ op: SpindleOperation) {
        let link = Unmanaged.passRetained(op)
        let bits = UInt(bitPattern: link.toOpaque())
        var current = self.head.load(ordering: .relaxed)
        while true {
            op.nextLink = Inbox.link(bits: current)
            let (done, seen) = self.head.compareExchange(
                expected: current, desired: bits, ordering: .sequentiallyConsistent)
            if done { return }
            current = seen
        }
    }

    /// Whether nothing is waiting to be admitted (sequentially consistent).
    @inline(__always)
    var isEmpty: Bool { self.head.load(ordering: .sequentiallyConsistent) == 0 }

    /// Whether something may be waiting (relaxed; for a spinning worker's poll).
    @inline(__always)
    var mayHoldWork: Bool { self.head.load(ordering: .relaxed) != 0 }

    /// Empties the inbox and returns its operations as a chain through `nextLink`, oldest first, each with the
    /// queue's reference. Caller holds `QueueCore.lock`.
    func takeAllOldestFirst() -> Unmanaged<SpindleOperation>? {
        var node = Inbox.link(bits: self.head.exchange(0, ordering: .sequentiallyConsistent))
        var oldestFirst: Unmanaged<SpindleOperation>? = nil
        while let link = node {  // reverse the stack
            link._withUnsafeGuaranteedRef { op in
                node = op.nextLink
                op.nextLink = oldestFirst
            }
            oldestFirst = link
        }
        return oldestFirst
    }

    @inline(__always)
    private static func link(bits: UInt) -> Unmanaged<SpindleOperation>? {
        guard let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        return Unmanaged.fromOpaque(pointer)
    }
}
