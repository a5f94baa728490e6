/// Tasks awaiting the queue's drain (`waitUntilAllOperationsAreFinished() async`): a unit of the queue's locked
/// state, a value stored in `QueueCore` and guarded by `QueueCore.lock`. It decides and never acts: the finish path
/// that empties the queue takes every semaphore (`takeAll`) and signals them after unlocking.
///
/// `list` is nil, not empty, whenever nobody waits, so the finish path tests one rarely-set field.
/// States of one waiter: registered (`add`, only while the queue has members) → taken by the drain (`takeAll`) or
/// withdrawn by its cancelled task (`withdraw`), exactly one of them, both under the lock.
/// Invariant (`check()`): `list` is nil or non-empty.
struct DrainWaiters {
    private(set) var list: [SpindleSemaphore]? = nil

    /// Whether any task waits.
    @inline(__always)
    var isEmpty: Bool { self.list == nil }

    mutating func add(_ semaphore: SpindleSemaphore) {
        self.list = (self.list ?? []) + [semaphore]
    }

    /// Takes `semaphore` out, if the drain has not taken it already.
    mutating func withdraw(_ semaphore: SpindleSemaphore) {
        guard var list = self.list, let index = list.firstIndex(where: { $0 === semaphore }) else { return }
        list.remove(at: index)
        self.list = list.isEmpty ? nil : list
    }

    /// The queue drained: every waiter, for the caller to signal after unlocking.
    mutating func takeAll() -> [SpindleSemaphore]? {
        defer { self.list = nil }
        return self.list
    }

    func check() -> Bool { self.list.map { !$0.isEmpty } ?? true }
}
