/// Ready operations of one queue: five intrusive doubly-linked FIFO lists, one per priority level, plus one for
/// barriers (served first). Push, pop-highest and remove are O(1); nothing is allocated (the links live in the
/// operations) and no reference count is touched: the links are unmanaged, since every operation in a bucket is a
/// member of the queue, which holds it (see `QueueCore`, "References"). Not thread-safe: the owning `QueueCore`
/// guards it with its lock.
struct ReadyBuckets {
    typealias Link = Unmanaged<SpindleOperation>
    static let barrierLevel = 5
    /// `bucketLevel` of an operation in no bucket.
    static let noLevel: Int8 = -1
    /// Each level's first and last operation, by level. Tuples, so the storage is inline (no allocation), read and
    /// written by offset (`slot`): one indexed load or store each. With a `switch` on the level to reach them (and
    /// `push` not inlined), `push` took 72 instructions per operation; now about 21 (callgrind, BENCHMARKS.md,
    /// "Cheaper buckets"). (`InlineArray` would say the same, but needs Swift 6.2; the package supports 6.1.)
    private typealias Row = (Link?, Link?, Link?, Link?, Link?, Link?)
    private var heads: Row = (nil, nil, nil, nil, nil, nil)
    private var tails: Row = (nil, nil, nil, nil, nil, nil)
    /// Operations in all buckets.
    private(set) var count = 0
    /// Bit i set when bucket i is non-empty, so pop finds the highest level with one instruction.
    private var nonEmpty: UInt8 = 0

    /// Level `level`'s entry in `row`, in place (0 ... 5; traps otherwise).
    @inline(__always)
    private static func slot(_ row: inout Row, _ level: Int) -> Link? {
        precondition(UInt(bitPattern: level) < 6, "ReadyBuckets: no such level")
        return withUnsafeMutableBytes(of: &row) {
            $0.load(fromByteOffset: level &* MemoryLayout<Link?>.stride, as: Link?.self)
        }
    }

    /// Sets level `level`'s entry in `row` (0 ... 5; traps otherwise).
    @inline(__always)
    private static func setSlot(_ row: inout Row, _ level: Int, _ link: Link?) {
        precondition(UInt(bitPattern: level) < 6, "ReadyBuckets: no such level")
        withUnsafeMutableBytes(of: &row) {
            $0.storeBytes(of: link, toByteOffset: level &* MemoryLayout<Link?>.stride, as: Link?.self)
        }
    }

    // In place (`inout`): a read through `withUnsafeBytes(of:)` of the stored tuple copied it first. (`peekHighest`,
    // which is not mutating, still copies the six words: three instructions in the same profile.)
    @inline(__always) private mutating func head(_ level: Int) -> Link? { ReadyBuckets.slot(&self.heads, level) }
    @inline(__always) private mutating func tail(_ level: Int) -> Link? { ReadyBuckets.slot(&self.tails, level) }
    @inline(__always) private mutating func setHead(_ level: Int, _ link: Link?) {
        ReadyBuckets.setSlot(&self.heads, level, link)
    }
    @inline(__always) private mutating func setTail(_ level: Int, _ link: Link?) {
        ReadyBuckets.setSlot(&self.tails, level, link)
    }

    /// Appends `op` at the end of `level`.
    @inline(__always)
    mutating func push(_ link: Link, level: Int) {
        link._withUnsafeGuaranteedRef { op in
            precondition(op.bucketLevel == ReadyBuckets.noLevel, "ReadyBuckets: operation pushed twice")
            op.bucketLevel = Int8(level)
            op.nextLink = nil
            op.bucketPrev = self.tail(level)
        }
        if let last = self.tail(level) {
            last._withUnsafeGuaranteedRef { $0.nextLink = link }
        } else {
            self.setHead(level, link)
        }
        self.setTail(level, link)
        self.nonEmpty |= 1 << UInt8(truncatingIfNeeded: level)
        self.count += 1
    }

    /// The first operation of the highest non-empty level, left in place.
    @inline(__always)
    func peekHighest() -> Link? {
        guard self.nonEmpty != 0 else { return nil }
        var heads = self.heads
        return ReadyBuckets.slot(&heads, 7 - self.nonEmpty.leadingZeroBitCount)
    }

    /// Takes the first operation of the highest non-empty level.
    @inline(__always)
    mutating func popHighest() -> Link? {
        guard let link = self.peekHighest() else { return nil }
        self.remove(link)
        return link
    }

    /// Puts `op` back at the front of `level` (a worker returning operations it reserved but did not start).
    mutating func pushFront(_ link: Link, level: Int) {
        let first = self.head(level)
        link._withUnsafeGuaranteedRef { op in
            op.bucketLevel = Int8(level)
            op.nextLink = first
            op.bucketPrev = nil
        }
        if let first { first._withUnsafeGuaranteedRef { $0.bucketPrev = link } } else { self.setTail(level, link) }
        self.setHead(level, link)
        self.nonEmpty |= 1 << UInt8(truncatingIfNeeded: level)
        self.count += 1
    }

    /// Unlinks `op` from its level.
    @inline(__always)
    mutating func remove(_ link: Link) {
        let (level, prev, next) = link._withUnsafeGuaranteedRef { op -> (Int, Link?, Link?) in
            let level = Int(op.bucketLevel)
            precondition(level >= 0, "ReadyBuckets: removing an operation that is not in a bucket")
            let result = (level, op.bucketPrev, op.nextLink)
            op.nextLink = nil
            op.bucketPrev = nil
            op.bucketLevel = -1
            return result
        }
        if let prev { prev._withUnsafeGuaranteedRef { $0.nextLink = next } } else { self.setHead(level, next) }
        if let next { next._withUnsafeGuaranteedRef { $0.bucketPrev = prev } } else { self.setTail(level, prev) }
        if self.head(level) == nil { self.nonEmpty &= ~(1 << UInt8(truncatingIfNeeded: level)) }
        self.count -= 1
    }
}
