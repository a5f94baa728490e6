/// The pool's line of requests: queues asking for one operation each to be started, first come first served. A
/// ring buffer of retained queue cores (one reference per request, taken by `push` and handed to whoever pops it),
/// grown by doubling; O(1) per push and pop, allocation-free once it has grown to the pool's usual backlog.
///
/// A plain value owned by `PoolCore` and guarded by its `lock`.
struct PoolRequests {
    private var slots: [Unmanaged<QueueCore>?] = Array(repeating: nil, count: 16)
    private var head = 0
    private(set) var count = 0

    var isEmpty: Bool { self.count == 0 }

    /// Appends `n` requests for `core` (retaining it once per request).
    mutating func push(_ core: QueueCore, count n: Int) {
        if self.count + n > self.slots.count { self.grow(toFit: self.count + n) }
        for _ in 0..<n {
            self.slots[(self.head + self.count) & (self.slots.count - 1)] = Unmanaged.passRetained(core)
            self.count += 1
        }
    }

    /// The oldest request; its reference passes to the caller, who releases it once it has served the queue.
    mutating func pop() -> Unmanaged<QueueCore>? {
        guard self.count > 0 else { return nil }
        let entry = self.slots[self.head]
        self.slots[self.head] = nil
        self.head = (self.head + 1) & (self.slots.count - 1)
        self.count -= 1
        return entry
    }

    /// Keeps the capacity a power of two, with the requests in order from index 0.
    private mutating func grow(toFit needed: Int) {
        var capacity = self.slots.count
        while capacity < needed { capacity *= 2 }
        var grown: [Unmanaged<QueueCore>?] = Array(repeating: nil, count: capacity)
        for i in 0..<self.count { grown[i] = self.slots[(self.head + i) & (self.slots.count - 1)] }
        self.slots = grown
        self.head = 0
    }
}
