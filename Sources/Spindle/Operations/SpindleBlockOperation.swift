import Synchronization

/// An operation made of one or more blocks that run concurrently (Apple's behaviour): the first on the thread
/// that runs the operation, the others shared between that thread and up to `maximumHelperThreads` detached helper
/// threads; it finishes when every block has returned. Helpers join one at a time: each one that finds blocks left
/// starts the next, so short blocks are mostly run by the operation's own thread, while blocks that block get a
/// thread each. Helper threads exit as soon as no block is left (none is kept).
///
/// Guards: `first` (the block given to `init`, if any) is immutable; the blocks added later (`extras.moreBlocks`)
/// are under the operation's own `lockWord` and frozen once the operation starts (`addExecutionBlock` then
/// throws). The first block is stored inline, so a one-block operation is one allocation of 104 bytes (plus the
/// block's captures); being a `let`, it is called borrowed, without retaining and releasing its captures (which
/// the adding thread may be touching too). A run with several blocks
/// shares them through a `BlockRun` (see there).
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
        // here on the blocks are frozen (addExecutionBlock throws).
        let added = self.withLocked { l in l.extras?.moreBlocks.isEmpty == false }
        guard !self.isCancelled else { return }
        if !added {
            self.first?()  // borrowed from the immutable field: no retain or release of its captures
            return
        }
        let blocks = self.withLocked { l in (self.first.map { [$0] } ?? []) + (l.extras?.moreBlocks ?? []) }
        if blocks.count == 1 {
            blocks[0]()
            return
        }
        let run = BlockRun(blocks)
        run.callHelper()
        run.work()
        run.finish()
    }
}

/// One multi-block run: the blocks, the next one to take, and the helpers taking part.
///
/// Each block is taken exactly once through `next` (atomic). A helper announces itself in `active` and then checks
/// `closed`; the owner, once it ran out of blocks, sets `closed` and waits until `active` is zero. Both steps are
/// sequentially consistent, so a helper that starts late sees `closed` and leaves without touching a block, and
/// the owner never returns while a helper still runs one. The last helper out after `closed` signals `done`.
/// States: open (helpers may join) → closed (set by the owner) → drained (active == 0; the owner returns).
final class BlockRun: @unchecked Sendable {
    let blocks: [@Sendable () -> Void]  // immutable
    private let next = Atomic<Int>(1)  // block 0 is the owner's
    private let active = Atomic<Int>(0)
    private let closed = Atomic<Bool>(false)
    private let done = try! SpindleSemaphore(value: 0)  // 0 is a valid value
    private let called = Atomic<Int>(0)  // helpers called in so far

    init(_ blocks: [@Sendable () -> Void]) { self.blocks = blocks }

    /// The owner: block 0, then whatever is left.
    func work() {
        self.blocks[0]()
        self.drain()
    }

    /// Starts one more helper thread if blocks are left and the cap allows. Out of threads: the threads already
    /// taking part run the rest.
    func callHelper() {
        guard self.next.load(ordering: .relaxed) < self.blocks.count else { return }
        guard self.called.add(1, ordering: .relaxed).newValue <= SpindleBlockOperation.maximumHelperThreads else { return }
        _ = try? SpindleThread.detach(name: "spindle-block") { [self] in self.help() }
    }

    /// A helper thread: starts the next helper, then takes blocks, unless the run is already closed.
    func help() {
        self.active.add(1, ordering: .sequentiallyConsistent)
        if !self.closed.load(ordering: .sequentiallyConsistent) {
            self.callHelper()
            self.drain()
        }
        if self.active.subtract(1, ordering: .sequentiallyConsistent).newValue == 0
            && self.closed.load(ordering: .sequentiallyConsistent)
        {
            self.done.signal()
        }
    }

    /// The owner, after `work`: closes the run and waits for helpers still running a block.
    func finish() {
        self.closed.store(true, ordering: .sequentiallyConsistent)
        if self.active.load(ordering: .sequentiallyConsistent) > 0 { self.done.wait() }
    }

    private func drain() {
        while true {
            let index = self.next.add(1, ordering: .relaxed).oldValue
            if index >= self.blocks.count { return }
            self.blocks[index]()
        }
    }
}
