/// One entry of `DeadlineTimer.shared`'s heap: something to do at `deadline`. Subclasses say what (`fire()`).
///
/// Guards: `deadline` is changed only under the timer's lock (for a `DeadlineEntry`, while also holding its
/// operation's lock, so either lock suffices to read it there); `index` (its heap position, -1 once out of the
/// heap) is under the timer's lock. `fire()` is called once, on the timer thread, outside every lock of ours.
class TimerEntry: @unchecked Sendable {
    @exclusivity(unchecked) var deadline: UInt64
    @exclusivity(unchecked) var index = -1

    init(deadline: UInt64) { self.deadline = deadline }

    /// What to do when the deadline came (the entry is already out of the heap).
    func fire() { preconditionFailure("TimerEntry.fire must be overridden") }
}

/// An armed operation deadline. `operation` is a weak reference: an armed operation that never finishes (never
/// added, or refused by a full queue) and is dropped by its owner is freed then, not kept until its deadline; its
/// `deinit` takes the entry out of the heap. The entry also leaves the heap when the operation finishes or the
/// deadline fires.
final class DeadlineEntry: TimerEntry, @unchecked Sendable {
    weak var operation: SpindleOperation?

    init(operation: SpindleOperation, deadline: UInt64) {
        self.operation = operation
        super.init(deadline: deadline)
    }

    override func fire() { self.operation?.deadlineFired(self) }
}

/// The process-wide timer that cancels operations whose deadline passed (and retries a queue's failed thread
/// start, `QueueCore.SpawnRetry`): one detached thread ("spindle.deadlines"), started on the first entry ever
/// inserted, sleeping on `condition` until the earliest entry of a binary min-heap. Operations without a deadline
/// never touch it.
///
/// Guards: `heap`, `started`, `armedUntil`, `signals` and every entry's `index` are under `condition`'s mutex
/// (`lock`). Lock order: an
/// operation's lock → this lock (arming an operation takes both); the timer thread never takes an operation's
/// lock while holding this one: it pops the due entries, unlocks, then fires them (`deadlineFired` for a
/// deadline), so an overridden `cancel()` (user code) runs on the timer thread outside every lock of ours.
///
/// State machine: not started → started (on the first `insert` whose thread start succeeds; a failed start
/// leaves it not started, and the next `insert` tries again; forward only once started). The thread: sleeping (no entry:
/// untimed wait; else a wait until the earliest deadline) → firing (due entries popped, lock released) →
/// sleeping. `armedUntil` says which: 0 while awake (it reads the heap before it sleeps again), `UInt64.max` in
/// an untimed wait, else the deadline its wait ends at. An insert (or an advance) signals the thread only when its
/// deadline is earlier than `armedUntil`: an entry due after the wait ends is found when it ends. So at light load,
/// where each operation's entry is removed before the next is inserted (one request at a time, each with a
/// timeout), the thread wakes once per timeout period, not once per operation (it used to be signalled whenever the
/// new entry became the earliest one: every time, in that pattern).
final class DeadlineTimer: @unchecked Sendable {
    /// This process's timer (made again in a forked child: see `PerProcess`).
    static var shared: DeadlineTimer { DeadlineTimer.perProcess.current }
    private static let perProcess = PerProcess { DeadlineTimer() }

    let condition = SpindleCondition()
    @exclusivity(unchecked) private var heap: [TimerEntry] = []
    @exclusivity(unchecked) private var started = false
    @exclusivity(unchecked) private var armedUntil: UInt64 = 0
    @exclusivity(unchecked) private var signals = 0

    /// Signals sent to make the thread re-arm its wait earlier (for tests).
    var signalsSent: Int { self.condition.withLock { self.signals } }

    /// Where the thread's wait ends: 0 while it is awake, `UInt64.max` with no entry (for tests).
    var armedDeadline: UInt64 { self.condition.withLock { self.armedUntil } }

    /// Entries waiting in the heap (for tests and diagnostics).
    var count: Int { self.condition.withLock { self.heap.count } }

    /// Adds an entry (for a `DeadlineEntry`, the caller holds its operation's lock). Returns 0, or the error
    /// number if the timer thread had to be started and could not be: the entry then waits in the heap for the
    /// next insert, which tries again. The caller reports that (`SpindleDiagnostics`) once it holds no lock.
    @discardableResult
    func insert(_ entry: TimerEntry) -> Int32 {
        var failure: Int32 = 0
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
                if case .system(_, let errno) = error { failure = errno } else { failure = -1 }
            }
        } else {
            self.signalIfEarlier(entry.deadline)
        }
        self.condition.unlock()
        return failure
    }

    /// Moves an entry's deadline earlier (a later one is ignored: the earliest deadline wins). Caller holds the
    /// entry's operation's lock.
    func advance(_ entry: TimerEntry, to deadline: UInt64) {
        self.condition.lock()
        // As in `remove`: the entry may have been armed in a parent process's timer (see `PerProcess`).
        if entry.index >= 0 && entry.index < self.heap.count && self.heap[entry.index] === entry
            && deadline < entry.deadline
        {
            entry.deadline = deadline
            self.siftUp(entry.index)
            self.signalIfEarlier(deadline)
        }
        self.condition.unlock()
    }

    /// Takes an entry out of the heap (its operation finished); nothing if it already left.
    func remove(_ entry: TimerEntry) {
        self.condition.lock()
        // The entry may have been armed in a parent process's timer (see `PerProcess`): only remove it from here.
        if entry.index >= 0 && entry.index < self.heap.count && self.heap[entry.index] === entry {
            self.removeAt(entry.index)
        }
        self.condition.unlock()
    }

    /// Wakes the sleeping thread if `deadline` comes before its wait ends (see the type's notes). Caller holds the
    /// lock.
    private func signalIfEarlier(_ deadline: UInt64) {
        guard deadline < self.armedUntil else { return }
        self.armedUntil = 0  // awake from here on: later inserts need not signal again
        self.signals += 1
        self.condition.signal()
    }

    private func run() {
        self.condition.lock()
        while true {
            guard let first = self.heap.first else {
                self.armedUntil = .max
                self.condition.wait()
                self.armedUntil = 0
                continue
            }
            let now = SpindleDeadline.now.uptimeNanoseconds
            if first.deadline > now {
                self.armedUntil = first.deadline
                _ = self.condition.wait(until: SpindleDeadline(uptimeNanoseconds: first.deadline))
                self.armedUntil = 0
                continue
            }
            var due: [TimerEntry] = []
            while let top = self.heap.first, top.deadline <= now {
                self.removeAt(0)
                due.append(top)
            }
            self.condition.unlock()
            for entry in due { entry.fire() }
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
