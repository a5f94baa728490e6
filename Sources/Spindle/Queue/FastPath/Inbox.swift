import Synchronization

/// The lock-free way in: a stack (Treiber), newest first, of claimed operations linked through `nextLink`, each
/// carrying the queue's one retained reference. Adding threads push without the queue lock; whoever holds the
/// lock takes everything at once and admits it oldest first, so every locked view of the queue includes them in
/// the order they were added.
///
/// Closing (shutdown): bit 0 of the head word, which a pointer to an object never has, says the inbox is closed.
/// `closeTakingAll()` sets it and takes what was pushed in one exchange, under the lock, so every push either
/// landed before it (and is admitted by the shutdown, as accepted work) or fails (`push` returns false and the
/// caller gives the operation back): none is lost or admitted after the queue stopped accepting. The bit is never
/// cleared. Checking it costs the push nothing: its compare-and-swap loop reads the word anyway.
///
/// Who may call what:
/// - `push(_:)`: any thread, without the lock, for an operation it has claimed for this queue;
/// - `isClosed`: anyone (relaxed: an early refusal; the push decides);
/// - `takeAllOldestFirst()`, `closeTakingAll()`: only with `QueueCore.lock` held (`drainInboxSlowLocked`,
///   `shutdownRequested`);
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

    /// The closed bit (see above).
    static let closedBit: UInt = 1

    /// Pushes `op`, retaining it (the queue's reference), unless the inbox is closed: then returns false, having
    /// retained and changed nothing. Lock-free.
    @inline(__always)
    func push(_ op: SpindleOperation) -> Bool {
        var current = self.head.load(ordering: .relaxed)
        if current & Inbox.closedBit != 0 { return false }
        let link = Unmanaged.passRetained(op)
        let bits = UInt(bitPattern: link.toOpaque())
        while true {
            op.nextLink = Inbox.link(bits: current)
            let (done, seen) = self.head.compareExchange(
                expected: current, desired: bits, ordering: .sequentiallyConsistent)
            if done { return true }
            current = seen
            if current & Inbox.closedBit != 0 {
                op.nextLink = nil
                link.release()
                return false
            }
        }
    }

    /// Whether the inbox was closed (relaxed).
    @inline(__always)
    var isClosed: Bool { self.head.load(ordering: .relaxed) & Inbox.closedBit != 0 }

    /// Whether nothing is waiting to be admitted (sequentially consistent).
    @inline(__always)
    var isEmpty: Bool { self.head.load(ordering: .sequentiallyConsistent) & ~Inbox.closedBit == 0 }

    /// Whether something may be waiting (relaxed; for a spinning worker's poll).
    @inline(__always)
    var mayHoldWork: Bool { self.head.load(ordering: .relaxed) & ~Inbox.closedBit != 0 }

    /// Empties the inbox and returns its operations as a chain through `nextLink`, oldest first, each with the
    /// queue's reference. Caller holds `QueueCore.lock`.
    func takeAllOldestFirst() -> Unmanaged<SpindleOperation>? {
        Inbox.reversed(self.head.exchange(self.head.load(ordering: .relaxed) & Inbox.closedBit,
                                          ordering: .sequentiallyConsistent))
    }

    /// Closes the inbox and takes what it held, as `takeAllOldestFirst` does, in one exchange. Caller holds
    /// `QueueCore.lock`.
    func closeTakingAll() -> Unmanaged<SpindleOperation>? {
        Inbox.reversed(self.head.exchange(Inbox.closedBit, ordering: .sequentiallyConsistent))
    }

    /// The chain of a taken head word, oldest first.
    private static func reversed(_ word: UInt) -> Unmanaged<SpindleOperation>? {
        var node = Inbox.link(bits: word & ~Inbox.closedBit)
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
