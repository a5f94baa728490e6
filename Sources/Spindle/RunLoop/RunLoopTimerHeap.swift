/// One scheduled firing of a timer in one mode: the heap's element.
///
/// `generation` ties the entry to one firing: when a timer is rescheduled or leaves the mode, its entries for
/// older generations become stale and are dropped when they reach the top (lazy deletion).
struct RunLoopTimerEntry {
    /// When the timer fires (CLOCK_MONOTONIC nanoseconds).
    var fireNanoseconds: UInt64
    /// The order the timer was first scheduled in: breaks ties between equal fire times (first in, first out).
    var sequence: UInt64
    /// The timer's generation when this entry was pushed.
    var generation: UInt64
    /// The timer.
    var timer: SpindleTimer

    /// Heap order: earlier fire time first, then earlier scheduling.
    func precedes(_ other: RunLoopTimerEntry) -> Bool {
        if self.fireNanoseconds != other.fireNanoseconds { return self.fireNanoseconds < other.fireNanoseconds }
        return self.sequence < other.sequence
    }
}

/// A binary min-heap of timer entries keyed by fire time: O(log n) push and pop, O(1) peek.
///
/// Guards: none of its own; it lives in a run loop's state and is only touched with that loop's lock held.
struct RunLoopTimerHeap {
    private(set) var entries: [RunLoopTimerEntry] = []

    /// Number of entries, stale ones included.
    var count: Int { self.entries.count }

    /// The earliest entry, if any.
    var first: RunLoopTimerEntry? { self.entries.first }

    /// Adds an entry.
    mutating func push(_ entry: RunLoopTimerEntry) {
        self.entries.append(entry)
        var child = self.entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.entries[child].precedes(self.entries[parent]) else { break }
            self.entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry.
    @discardableResult
    mutating func popFirst() -> RunLoopTimerEntry? {
        guard !self.entries.isEmpty else { return nil }
        self.entries.swapAt(0, self.entries.count - 1)
        let first = self.entries.removeLast()
        self.siftDown(from: 0)
        return first
    }

    /// Keeps only the entries `isLive` accepts, then restores heap order (O(n)); used when stale entries pile up.
    mutating func compact(keeping isLive: (RunLoopTimerEntry) -> Bool) {
        self.entries.removeAll { !isLive($0) }
        var index = self.entries.count / 2
        while index > 0 {
            index -= 1
            self.siftDown(from: index)
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        let count = self.entries.count
        while true {
            let left = 2 * parent + 1
            guard left < count else { return }
            var smallest = left
            let right = left + 1
            if right < count, self.entries[right].precedes(self.entries[left]) { smallest = right }
            guard self.entries[smallest].precedes(self.entries[parent]) else { return }
            self.entries.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
