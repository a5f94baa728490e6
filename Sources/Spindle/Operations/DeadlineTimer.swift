/// One armed operation deadline: an entry of `DeadlineTimer.shared`'s heap.
///
/// Guards: `deadline` is written only while holding both its operation's lock and the timer's lock (so either
/// lock suffices to read it); `index` (its heap position, -1 once out of the heap) is under the timer's lock.
/// `operation` is a strong reference: the entry leaves the heap when the operation finishes or the deadline
/// fires, so it never keeps a finished operation alive.
final class DeadlineEntry: @unchecked Sendable {
    let operation: SpindleOperation
    @exclusivity(unchecked) var deadline: UInt64
    @exclusivity(unchecked) var index = -1

    init(operation: SpindleOperation, deadline: UInt64) {
        self.operation = operation
        self.deadline = deadline
    }
}

/// The process-wide timer that cancels operations whose deadline passed: one detached thread
/// ("spindle.deadlines"), started on the first deadline ever armed, sleeping on `condition` until the earliest
/// entry of a binary min-heap. Operations without a deadline never touch it.
///
/// Guards: `heap`, `started` and every entry's `index` are under `condition`'s mutex (`lock`). Lock order: an
/// operation's lock → this lock (arming an operation takes both); the timer thread never takes an operation's
/// lock while holding this one: it pops the due entries, unlocks, then cancels them (`deadlineFired`), so an
/// overridden `cancel()` (user code) runs on the timer thread outside every lock of ours.
///
/// State machine: not started → started (on the first `insert`; forward only). The thread: sleeping (no entry:
/// untimed wait; else a wait until the earliest deadline) → firing (due entries popped, lock released) →
/// sleeping. An insert that becomes the new earliest entry signals it so it re-arms its wait.
final class DeadlineTimer: @unchecked Sendable {
    static let shared = DeadlineTimer()

    let condition = SpindleCondition()
    @exclusivity(unchecked) private var heap: [DeadlineEntry] = []
    @exclusivity(unchecked) private var started = false

    /// Entries waiting in the heap (for tests and diagnostics).
    var count: Int { self.condition.withLock { self.heap.count } }

    /// Adds an entry. Caller holds the entry's operation's lock.
    func insert(_ entry: DeadlineEntry) {
        self.condition.lock()
        entry.index = self.heap.count
        self.heap.append(entry)
        self.siftUp(entry.index)
        if !self.started {
            self.started = true
            do {
                try SpindleThread.detach(name: "spindle.deadlines") { [self] in self.run() }
            } catch {
                self.started = false  // the next insert retries; this entry waits for it
                writeToStandardError("Spindle: could not start the deadline timer thread: \(error)")
            }
        } else if entry.index == 0 {
            self.condition.signal()  // a new earliest deadline: re-arm the sleeping thread's wait
        }
        self.condition.unlock()
    }

    /// Moves an entry's deadline earlier (a later one is ignored: the earliest deadline wins). Caller holds the
    /// entry's operation's lock.
    func advance(_ entry: DeadlineEntry, to deadline: UInt64) {
        self.condition.lock()
        if entry.index >= 0 && deadline < entry.deadline {
            entry.deadline = deadline
            self.siftUp(entry.index)
            if entry.index == 0 { self.condition.signal() }
        }
        self.condition.unlock()
    }

    /// Takes an entry out of the heap (its operation finished); nothing if it already left.
    func remove(_ entry: DeadlineEntry) {
        self.condition.lock()
        if entry.index >= 0 { self.removeAt(entry.index) }
        self.condition.unlock()
    }

    private func run() {
        self.condition.lock()
        while true {
            guard let first = self.heap.first else {
                self.condition.wait()
                continue
            }
            let now = SpindleDeadline.now.uptimeNanoseconds
            if first.deadline > now {
                _ = self.condition.wait(until: SpindleDeadline(uptimeNanoseconds: first.deadline))
                continue
            }
            var due: [DeadlineEntry] = []
            while let top = self.heap.first, top.deadline <= now {
                self.removeAt(0)
                due.append(top)
            }
            self.condition.unlock()
            for entry in due { entry.operation.deadlineFired(entry) }
            due.removeAll()  // operations may be freed here: outside the lock
            self.condition.lock()
        }
    }

    // MARK: - Heap (caller holds the lock)

    private func removeAt(_ index: Int) {
        let entry = self.heap[index]
        let last = self.heap.removeLast()
        entry.index = -1
        guard index < self.heap.count else { return }
        self.heap[index] = last
        last.index = index
        self.siftUp(index)
        self.siftDown(last.index)
    }

    private func siftUp(_ start: Int) {
        var i = start
        while i > 0 {
            let parent = (i - 1) / 2
            guard self.heap[i].deadline < self.heap[parent].deadline else { break }
            self.swapAt(i, parent)
            i = parent
        }
    }

    private func siftDown(_ start: Int) {
        var i = start
        let n = self.heap.count
        while true {
            let l = 2 * i + 1, r = l + 1
            var smallest = i
            if l < n && self.heap[l].deadline < self.heap[smallest].deadline { smallest = l }
            if r < n && self.heap[r].deadline < self.heap[smallest].deadline { smallest = r }
            if smallest == i { return }
            self.swapAt(i, smallest)
            i = smallest
        }
    }

    private func swapAt(_ a: Int, _ b: Int) {
        self.heap.swapAt(a, b)
        self.heap[a].index = a
        self.heap[b].index = b
    }
}
