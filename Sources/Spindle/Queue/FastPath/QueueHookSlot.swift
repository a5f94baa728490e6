import Synchronization

/// A queue's hooks (`SpindleOperationQueueHooks`), boxed once per set, so reading them takes one retain.
/// Immutable: shared by every event that read it.
final class QueueHookBox: Sendable {
    let hooks: SpindleOperationQueueHooks

    init(_ hooks: SpindleOperationQueueHooks) { self.hooks = hooks }
}

/// Where a queue's hooks are published (`SpindleOperationQueue.hooks`): a queue without hooks pays one relaxed load
/// and a nil test per add, start and finish; with hooks, an event takes this slot's tiny lock to retain the box,
/// and calls the hooks after unlocking.
///
/// Guards: `box` holds one retained reference to the current `QueueHookBox` (nil: no hooks). It is written only
/// with `lock` held; it is read without the lock only to learn whether it is nil, and with the lock to take a
/// reference. `lock` is a leaf: nothing is taken while it is held, and no user code runs under it (the old box is
/// released by the setter after unlocking: its closures' captures may run a `deinit`).
///
/// States: no hooks (`box` nil) or hooks (a box); `replace` moves between them, or from one box to another, in one
/// exchange under `lock`. A box once replaced is never published again.
///
/// Who may call what: `current` any thread, holding no lock of ours (it takes `lock`); `replace` any thread,
/// holding no lock of ours.
///
/// Orderings: the unlocked load is relaxed. It only decides whether to look; the box's contents are published by
/// `lock` (the writer's unlock releases, the reader's lock acquires). A set that happens before an event (by program
/// order, or through the add that published the operation to the thread that runs or finishes it) is seen by it:
/// the load is coherent with the store it happens after. A set racing an event may or may not be seen by it.
struct QueueHookSlot: ~Copyable {
    private let box = Atomic<Unmanaged<QueueHookBox>?>(nil)
    private let lock = InlineLock()

    init() {}

    deinit {
        self.box.load(ordering: .relaxed)?.release()
    }

    /// The hooks now, retained for the caller; nil (one relaxed load) when none are set.
    @inline(__always)
    var current: QueueHookBox? {
        guard self.box.load(ordering: .relaxed) != nil else { return nil }
        return self.currentSlow()
    }

    @inline(never)
    private func currentSlow() -> QueueHookBox? {
        self.lock.lock()
        let hooks = self.box.load(ordering: .relaxed)?.takeUnretainedValue()  // retained here, under the lock
        self.lock.unlock()
        return hooks
    }

    /// Publishes `new` (nil: no hooks) and returns the box it replaced, for the caller to drop after this returned.
    func replace(with new: QueueHookBox?) -> QueueHookBox? {
        let retained = new.map { Unmanaged.passRetained($0) }
        self.lock.lock()
        let old = self.box.exchange(retained, ordering: .relaxed)
        self.lock.unlock()
        return old?.takeRetainedValue()
    }
}
