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
    private var heads: (Link?, Link?, Link?, Link?, Link?, Link?) = (nil, nil, nil, nil, nil, nil)
    private var tails: (Link?, Link?, Link?, Link?, Link?, Link?) = (nil, nil, nil, nil, nil, nil)
    /// Operations in all buckets.
    private(set) var count = 0
    /// Bit i set when bucket i is non-empty, so pop finds the highest level with one instruction.
    private var nonEmpty: UInt8 = 0

    @inline(__always)
    private func head(_ level: Int) -> Link? {
        switch level {
        case 0: return self.heads.0
        case 1: return self.heads.1
        case 2: return self.heads.2
        case 3: return self.heads.3
        case 4: return self.heads.4
        default: return self.heads.5
        }
    }
    @inline(__always)
    private mutating func setHead(_ level: Int, _ op: Link?) {
        switch level {
        case 0: self.heads.0 = op
        case 1: self.heads.1 = op
        case 2: self.heads.2 = op
        case 3: self.heads.3 = op
        case 4: self.heads.4 = op
        default: self.heads.5 = op
        }
    }
    @inline(__always)
    private func tail(_ level: Int) -> Link? {
        switch level {
        case 0: return self.tails.0
        case 1: return self.tails.1
        case 2: return self.tails.2
        case 3: return self.tails.3
        case 4: return self.tails.4
        default: return self.tails.5
        }
    }
    @inline(__always)
    private mutating func setTail(_ level: Int, _ op: Link?) {
        switch level {
        case 0: self.tails.0 = op
        case 1: self.tails.1 = op
        case 2: self.tails.2 = op
        case 3: self.tails.3 = op
        case 4: self.tails.4 = op
        default: self.tails.5 = op
        }
    }

    /// Appends `op` at the end of `level`.
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
        self.nonEmpty |= 1 << UInt8(level)
        self.count += 1
    }

    /// The first operation of the highest non-empty level, left in place.
    @inline(__always)
    func peekHighest() -> Link? {
        guard self.nonEmpty != 0 else { return nil }
        return self.head(7 - self.nonEmpty.leadingZeroBitCount)
    }

    /// Takes the first operation of the highest non-empty level.
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
        self.nonEmpty |= 1 << UInt8(level)
        self.count += 1
    }

    /// Unlinks `op` from its level.
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
        if self.head(level) == nil { self.nonEmpty &= ~(1 << UInt8(level)) }
        self.count -= 1
    }
}
