import Synchronization

/// An operation made of one or more blocks that run concurrently (Apple's behaviour): the first on the thread
/// that runs the operation, the others shared between that thread and up to `maximumHelperThreads` helper threads
/// from a process-wide pool (`BlockHelperPool`); it finishes when every block has returned. Helpers join one at a
/// time: each one that finds blocks left calls the next, so short blocks are mostly run by the operation's own
/// thread, while blocks that block get a thread each. Helper threads are reused across runs and operations; they
/// park when idle and retire after two seconds without work. A helper thread keeps what a block leaves in it
/// (thread-locals), except its name and priority, which are put back after each run. Every block runs as the
/// operation, whichever thread it is on: `SpindleOperation.current` is the operation, its `threadPriority`
/// applies, and waiting for it (or for the queue running it) from a block throws `waitOnSelf`
/// (`waitOnOwnQueue`) instead of waiting for itself.
///
/// Guards: `first` (the block given to `init`, if any) is immutable; the blocks added later (`extras.moreBlocks`)
/// are under the operation's own `lockWord` and frozen once the operation starts (`addExecutionBlock` then
/// throws). The first block is stored inline, so a one-block operation is one allocation of 104 bytes (plus the
/// block's captures); being a `let`, it is called borrowed, without retaining and releasing its captures (which
/// the adding thread may be touching too). A run with several blocks shares them through a `BlockRun` (see
/// there). Lock order: the operation's lock is released before a run starts; the pool's lock is a leaf.
open class SpindleBlockOperation: SpindleOperation, @unchecked Sendable {
    private let first: (@Sendable () -> Void)?

    /// The most helper threads one block operation uses at once (the other blocks wait their turn).
    public static let maximumHelperThreads = 64


    /// An operation with no blocks yet (add them with `addExecutionBlock`).
    public override init() {
        self.first = nil
        super.init()
    }

    /// An operation with one block.
    public init(_ block: @escaping @Sendable () -> Void) {
        self.first = block
        super.init()
    }

    /// An operation with one block, spelt as Foundation's `BlockOperation(block:)`.
    public convenience init(block: @escaping @Sendable () -> Void) {
        self.init(block)
    }

    /// The blocks, in the order they were added.
    public final var executionBlocks: [@Sendable () -> Void] {
        self.withLocked { l in (self.first.map { [$0] } ?? []) + (l.extras?.moreBlocks ?? []) }
    }

    /// Adds a block. - Throws: `blockOperationStarted` once the operation is executing or finished.
    public final func addExecutionBlock(_ block: @escaping @Sendable () -> Void) throws(SpindleError) {
        let added = self.withLocked { l -> Bool in
            guard self.currentState.lifecycle < .executing else { return false }
            l.more.moreBlocks.append(block)
            return true
        }
        if !added { throw .blockOperationStarted(name: self.displayName) }
    }

    /// Runs every block (unless cancelled) and returns when all have returned.
    open override func main() throws {
        // The lock orders what follows after any addExecutionBlock that saw the operation not yet executing; from
        // here on the blocks are frozen (addExecutionBlock throws). The one-block case reads a flag only (no array
        // retained and released per run: `addOperation { }` runs this for every operation).
        let added = self.withLocked { l in l.extras?.moreBlocks.isEmpty == false }
        guard !self.isCancelled else { return }
        if !added {
            self.first?()  // borrowed from the immutable field: no retain or release of its captures
            return
        }
        let more = self.withLocked { l in l.extras?.moreBlocks ?? [] }  // shared, not copied
        if self.first == nil && more.count == 1 {
            more[0]()
            return
        }
        let blocks = BlockList(first: self.first, more: more)
        let run = ThreadContext.withCurrent { BlockRun(blocks, of: self, in: $0) }
        run.callHelper()  // block 0 is already the owner's (`next` starts at 1)
        run.work()
        run.finish()
        withExtendedLifetime(blocks) {}  // the run only points at them: see `BlockRun`
    }
}

/// One multi-block run: the blocks, the next one to take, and the helpers taking part.
///
/// Guards: the blocks are immutable. `next` (atomic) hands out each block exactly once: O(1) per block. `called`
/// (atomic) counts the helpers asked for, capped at `maximumHelperThreads`. `active` and `closed` (atomics,
/// sequentially consistent) are the hand-shake with helpers: a helper announces itself in `active` and then
/// checks `closed`; the owner, once it ran out of blocks, sets `closed` and then reads `active`. So a helper that
/// comes late sees `closed` and leaves without touching a block, and the owner never returns while a helper still
/// runs one. The owner waits in `BlockHelperPool.waitForHelpers` (under the pool's lock); the helper that brings
/// `active` to 0 after `closed` reports it under that lock (`help` returns true).
///
/// Lifetime: the blocks are owned by the owner (`main` keeps its `BlockList` until `finish` has returned, and
/// whoever runs `main` keeps the operation alive); the run only points at them and at the operation, unretained, and a helper touches them only while counted in `active` before CLOSED,
/// which the owner waits out. A run itself may outlive its operation (a request still queued in the pool, a late
/// helper), but the last reference to a block, and so its captures' deinit, is never dropped by a helper or
/// under the pool's lock.
///
/// States: OPEN (helpers may join; set at init) → CLOSED (set by the owner after its last block) → DRAINED
/// (`active` is 0 after CLOSED; the owner returns). A request for help still queued in the pool when the run is
/// CLOSED is dropped there without running anything.
///
/// Helpers are called in a chain: the owner asks for one before its first block; each helper that arrives takes
/// a block and then, if blocks are still left, asks for the next before running it. So 100 empty blocks wake one
/// helper (which usually finds nothing left), while blocks that each block get a thread each: whenever a block
/// is not yet taken, a helper is on its way or a thread is between blocks (`next` only grows, so a stale read
/// only calls one helper too many).
final class BlockRun: @unchecked Sendable {
    private unowned(unsafe) let blocks: BlockList  // immutable; alive while a helper may use it (see Lifetime)
    /// The operation whose `main` owns the run, and the queue whose worker runs it (if any): a helper runs its
    /// blocks as that operation, so waiting for it, or for that queue, from a block throws there as on the
    /// operation's own thread. Immutable; alive while a helper may use them (see Lifetime).
    private unowned(unsafe) let operation: SpindleOperation
    private unowned(unsafe) let queue: SpindleOperationQueue?
    /// The owner thread's `ThreadContext.starting` (the queue slot this run works in, compared by address only:
    /// a batch wait from a helper counts that slot once, `QueueCore+BatchWait`) and its `batchTaken`/`batchRan`
    /// (a helper's wait for an operation finished earlier in its worker's batch returns, as the owner's would).
    private let slot: UnsafeMutableRawPointer?
    private let batchTaken: Unmanaged<SpindleOperation>?
    private let batchRan: Unmanaged<SpindleOperation>?
    private let count: Int  // immutable
    private let next = Atomic<Int>(1)  // block 0 is the owner's
    private let active = Atomic<Int>(0)
    private let closed = Atomic<Bool>(false)
    private let called = Atomic<Int>(0)  // helpers asked for so far

    init(_ blocks: BlockList, of operation: SpindleOperation, in owner: ThreadContext) {
        self.blocks = blocks
        self.operation = operation
        self.queue = owner.queue
        self.slot = owner.starting
        self.batchTaken = owner.batchTaken
        self.batchRan = owner.batchRan
        self.count = blocks.count
    }

    /// Whether the owner has closed the run (a hint for the pool: a helper arriving now would find nothing).
    var isClosed: Bool { self.closed.load(ordering: .sequentiallyConsistent) }

    /// Whether a helper is inside the run (the owner's wait predicate).
    var hasHelpersInside: Bool { self.active.load(ordering: .sequentiallyConsistent) > 0 }

    /// The owner: block 0, then whatever is left.
    func work() {
        self.runBlock(0)
        self.drain()
    }

    /// Asks the pool for one more helper if blocks are left (not yet taken) and the cap allows. If no thread can be
    /// had, the threads already taking part run the rest.
    func callHelper() {
        guard self.next.load(ordering: .relaxed) < self.count else { return }
        guard self.called.add(1, ordering: .relaxed).newValue <= SpindleBlockOperation.maximumHelperThreads else {
            return
        }
        BlockHelperPool.shared.submit(self)
    }

    /// A helper (on a pool thread): unless the run is already closed, takes a block, calls the next helper if
    /// blocks are still left, and runs blocks until none is left. Returns whether it was the last helper out of a
    /// closed run (then it must tell the owner, under the pool's lock).
    func help(pool: BlockHelperPool) -> Bool {
        self.active.add(1, ordering: .sequentiallyConsistent)
        if !self.closed.load(ordering: .sequentiallyConsistent) {
            let index = self.next.add(1, ordering: .relaxed).oldValue
            if index < self.count {
                self.callHelper()  // after taking ours, so the next helper is called only for blocks left
                ThreadContext.withCurrent { context in
                    let (outerQueue, outerSlot) = (context.queue, context.starting)
                    let (outerTaken, outerRan) = (context.batchTaken, context.batchRan)
                    context.queue = self.queue
                    context.starting = self.slot
                    (context.batchTaken, context.batchRan) = (self.batchTaken, self.batchRan)
                    self.operation.runAsCurrent(in: context) {
                        self.runBlock(index)
                        self.drain()
                    }
                    context.queue = outerQueue
                    context.starting = outerSlot
                    (context.batchTaken, context.batchRan) = (outerTaken, outerRan)
                }
            }
        }
        pool.helperIsReturning()
        return self.active.subtract(1, ordering: .sequentiallyConsistent).newValue == 0
            && self.closed.load(ordering: .sequentiallyConsistent)
    }

    /// The owner, after `work`: closes the run and waits for helpers still running a block. On a pool thread the
    /// wait is one the pool sees (a helper's block may wait for work only this pool can serve: a stand-in serves
    /// it meanwhile).
    func finish() {
        self.closed.store(true, ordering: .sequentiallyConsistent)
        if self.active.load(ordering: .sequentiallyConsistent) > 0 {
            ThreadContext.current.blocking { BlockHelperPool.shared.waitForHelpers(of: self) }
        }
    }

    private func drain() {
        while true {
            let index = self.next.add(1, ordering: .relaxed).oldValue
            if index >= self.count { return }
            self.runBlock(index)
        }
    }

    @inline(__always)
    private func runBlock(_ index: Int) {
        let blocks = self.blocks
        if let first = blocks.first {
            if index == 0 { first() } else { blocks.more[index - 1]() }
        } else {
            blocks.more[index]()
        }
    }
}

/// The blocks of one multi-block run, in order: the operation's first block (if any), then the added ones.
/// Immutable (the added ones are the operation's frozen array, shared, not copied).
final class BlockList: Sendable {
    let first: (@Sendable () -> Void)?
    let more: [@Sendable () -> Void]
    let count: Int

    init(first: (@Sendable () -> Void)?, more: [@Sendable () -> Void]) {
        self.first = first
        self.more = more
        self.count = more.count + (first == nil ? 0 : 1)
    }
}
