import Synchronization

/// An operation made of one or more blocks that run concurrently (Apple's behaviour): the first on the thread
/// that runs the operation, the others on helper threads; it finishes when every block has returned.
///
/// Guards: `first` and `more` under `blocksLock` (inline); they are frozen once the operation starts
/// (`addExecutionBlock` then throws). The first block is stored inline, so a one-block operation is one
/// allocation (plus the block's captures). Helper threads: at most `maximumHelperThreads` at once, each taking the next block from a shared
/// atomic index; they are joined before `main` returns.
open class SpindleBlockOperation: SpindleOperation, @unchecked Sendable {
    private let blocksLock = InlineLock()
    @exclusivity(unchecked) private var first: (@Sendable () -> Void)? = nil  // protected by blocksLock
    @exclusivity(unchecked) private var more: [@Sendable () -> Void] = []  // protected by blocksLock

    private func withBlocks<R, E: Error>(
        _ body: (inout (@Sendable () -> Void)?, inout [@Sendable () -> Void]) throws(E) -> R
    ) throws(E) -> R {
        self.blocksLock.lock()
        defer { self.blocksLock.unlock() }
        return try body(&self.first, &self.more)
    }

    /// The most helper threads one block operation uses at once (the other blocks wait their turn).
    public static let maximumHelperThreads = 64

    /// An operation with no blocks yet (add them with `addExecutionBlock`).
    public override init() { super.init() }

    /// An operation with one block.
    public init(_ block: @escaping @Sendable () -> Void) {
        self.first = block
        super.init()
    }

    /// The blocks, in the order they were added.
    public final var executionBlocks: [@Sendable () -> Void] {
        self.withBlocks { first, more in first.map { [$0] + more } ?? [] }
    }

    /// Adds a block. - Throws: `blockOperationStarted` once the operation is executing or finished.
    public final func addExecutionBlock(_ block: @escaping @Sendable () -> Void) throws(SpindleError) {
        try self.withBlocks { first, more throws(SpindleError) in
            guard self.currentState.lifecycle < .executing else { throw .blockOperationStarted(name: self.displayName) }
            if first == nil { first = block } else { more.append(block) }
        }
    }

    /// Runs every block (unless cancelled) and returns when all have returned.
    open override func main() throws {
        // The lock orders this read after any addExecutionBlock that saw the operation not yet executing.
        let (single, more) = self.withBlocks { ($0, $1) }
        guard !self.isCancelled, let single else { return }
        if more.isEmpty {
            single()
            return
        }
        let list = [single] + more
        let next = Atomic<Int>(1)
        let work: @Sendable () -> Void = {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                if index >= list.count { return }
                list[index]()
            }
        }
        var helpers: [SpindleThread] = []
        let helperCount = min(list.count - 1, SpindleBlockOperation.maximumHelperThreads)
        for i in 0..<helperCount {
            do {
                helpers.append(try SpindleThread.spawnJoinable(name: "spindle-block-\(i)", work))
            } catch {
                break  // out of threads: the remaining blocks run on the threads we have
            }
        }
        list[0]()
        work()
        for helper in helpers { try? helper.join() }
    }
}
