import Glibc
import Synchronization

/// A tiny lock stored inline in its owner (no allocation, never moves), for very short critical sections: an
/// operation's bookkeeping, a thread's name. Built only on `Atomic` acquire/release so ThreadSanitizer sees every
/// happens-before edge (`Synchronization.Mutex` takes contended locks inside the kernel, which TSan cannot see).
///
/// Protocol: 0 = free, 1 = held. `lock()` compare-and-swaps 0 → 1 (acquiring); contended callers spin briefly,
/// then `sched_yield()` between attempts. `unlock()` stores 0 (releasing). Not recursive, not fair. Never hold it
/// across user code or a blocking call.
struct InlineLock: ~Copyable, @unchecked Sendable {
    private let word = Atomic<UInt32>(0)

    init() {}

    @inline(__always)
    borrowing func lock() {
        if self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { return }
        self.lockSlow()
    }

    @inline(never)
    private borrowing func lockSlow() {
        var attempts = 0
        while true {
            if self.word.load(ordering: .relaxed) == 0,
                self.word.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
            {
                return
            }
            attempts += 1
            if attempts > 32 { sched_yield() }
        }
    }

    @inline(__always)
    borrowing func unlock() {
        self.word.store(0, ordering: .releasing)
    }
}
