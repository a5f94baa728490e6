/// Ready operations of one queue: five intrusive doubly-linked FIFO lists, one per priority level, plus one for
/// barriers (served first). Push, pop-highest and remove are O(1); nothing is allocated (the links live in the
/// operations). Not thread-safe: the owning `QueueCore` guards it with its lock.
struct ReadyBuckets {
    static let barrierLevel = 5
    private var heads: (SpindleOperation?, SpindleOperation?, SpindleOperation?, SpindleOperation?,
                        SpindleOperation?, SpindleOperation?) = (nil, nil, nil, nil, nil, nil)
    private var tails: (Unmanaged<SpindleOperation>?, Unmanaged<SpindleOperation>?, Unmanaged<SpindleOperation>?,
                        Unmanaged<SpindleOperation>?, Unmanaged<SpindleOperation>?, Unmanaged<SpindleOperation>?)
        = (nil, nil, nil, nil, nil, nil)
    /// Operations in all buckets.
    private(set) var count = 0
    /// Bit i set when bucket i is non-empty, so pop finds the highest level with one instruction.
    private var nonEmpty: UInt8 = 0

    private func head(_ level: Int) -> SpindleOperation? {
        switch level {
        case 0: return self.heads.0
        case 1: return self.heads.1
        case 2: return self.heads.2
        case 3: return self.heads.3
        case 4: return self.heads.4
        default: return self.heads.5
        }
    }
    private mutating func setHead(_ level: Int, _ op: SpindleOperation?) {
        switch level {
        case 0: self.heads.0 = op
        case 1: self.heads.1 = op
        case 2: self.heads.2 = op
        case 3: self.heads.3 = op
        case 4: self.heads.4 = op
        default: self.heads.5 = op
        }
    }
    private func tail(_ level: Int) -> SpindleOperation? {
        let t: Unmanaged<SpindleOperation>?
        switch level {
        case 0: t = self.tails.0
        case 1: t = self.tails.1
        case 2: t = self.tails.2
        case 3: t = self.tails.3
        case 4: t = self.tails.4
        default: t = self.tails.5
        }
        return t?.takeUnretainedValue()
    }
    private mutating func setTail(_ level: Int, _ op: SpindleOperation?) {
        let t = op.map { Unmanaged.passUnretained($0) }
        switch level {
        case 0: self.tails.0 = t
        case 1: self.tails.1 = t
        case 2: self.tails.2 = t
        case 3: self.tails.3 = t
        case 4: self.tails.4 = t
        default: self.tails.5 = t
        }
    }

    /// Appends `op` at the end of `level`.
    mutating func push(_ op: SpindleOperation, level: Int) {
        precondition(op.bucketLevel < 0, "ReadyBuckets: operation pushed twice")
        op.bucketLevel = Int8(level)
        op.bucketNext = nil
        if let last = self.tail(level) {
            last.bucketNext = op
            op.bucketPrev = last
        } else {
            op.bucketPrev = nil
            self.setHead(level, op)
        }
        self.setTail(level, op)
        self.nonEmpty |= 1 << UInt8(level)
        self.count += 1
    }

    /// Takes the first operation of the highest non-empty level.
    mutating func popHighest() -> SpindleOperation? {
        guard self.nonEmpty != 0 else { return nil }
        let level = 7 - self.nonEmpty.leadingZeroBitCount
        let op = self.head(level)!
        self.remove(op)
        return op
    }

    /// Unlinks `op` from its level.
    mutating func remove(_ op: SpindleOperation) {
        let level = Int(op.bucketLevel)
        precondition(level >= 0, "ReadyBuckets: removing an operation that is not in a bucket")
        let next = op.bucketNext
        if let prev = op.bucketPrev { prev.bucketNext = next } else { self.setHead(level, next) }
        if let next { next.bucketPrev = op.bucketPrev } else { self.setTail(level, op.bucketPrev) }
        op.bucketNext = nil
        op.bucketPrev = nil
        op.bucketLevel = -1
        if self.head(level) == nil { self.nonEmpty &= ~(1 << UInt8(level)) }
        self.count -= 1
    }
}
