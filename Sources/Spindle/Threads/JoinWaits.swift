/// Which Spindle threads are waiting in `join()` for which, so that a `join()` that would close a cycle (A joins
/// B while B joins A, or a longer chain) throws `SpindleError.joinCycle` instead of waiting for ever. glibc only
/// refuses a thread joining itself (EDEADLK); a cycle of two or more blocks every thread in it.
///
/// Only threads Spindle made (origin `.made`) are recorded as joiners: nothing can join the main thread or a
/// thread Spindle did not create (`threadNotJoinable`), so no other thread can be part of a cycle.
///
/// State: the table (joiner → joined, keyed by the joiner's `ObjectIdentifier`; the values keep the joined threads
/// alive) is under its lock, a leaf lock: nothing else is taken while holding it, and no user code runs under it.
/// One table per process (`PerProcess`): a parent thread inside `enter` or `leave` at a `fork()` leaves that lock
/// held for ever in the child, whose threads get a fresh, empty table instead (the forking thread itself is never
/// inside `join()`). An entry exists from a successful `enter` (the cycle check, the claim of the join and the insertion
/// in one critical section) until the joiner's `pthread_join` has returned (`leave`). Each joiner has at most one
/// entry: a thread waits in one `join()` at a time.
enum JoinWaits {
    private static let perProcess = PerProcess { SpindleLockedValue<[ObjectIdentifier: SpindleThread]>([:]) }

    /// Checks that `caller` joining `target` closes no cycle, then runs `claim` (the join's compare-and-swap,
    /// which may throw) and records the wait, all under the lock, so two threads joining each other at the same
    /// moment cannot both pass the check. Throws `joinCycle` (naming the chain) without calling `claim`; rethrows
    /// what `claim` throws, recording nothing. Any thread; `caller` is the calling thread's object.
    static func enter(
        _ caller: SpindleThread, joining target: SpindleThread, claim: () throws(SpindleError) -> Void
    ) throws(SpindleError) {
        let cycle: [SpindleThread]? = try self.perProcess.current.withLockedValue { (waits) throws(SpindleError) -> [SpindleThread]? in
            var chain = [caller, target]
            var next = waits[ObjectIdentifier(target)]
            while let thread = next {
                chain.append(thread)
                if thread === caller { return chain }
                // A chain of waits ends: each joiner has one entry and a cycle without `caller` cannot exist
                // (it would have been refused when it was about to close).
                next = waits[ObjectIdentifier(thread)]
            }
            try claim()
            waits[ObjectIdentifier(caller)] = target
            return nil
        }
        if let cycle { throw .joinCycle(threads: cycle.map(\.name)) }  // names read with no lock of ours held
    }

    /// The thread `caller` waits for in `join()` now, if any (for tests and diagnostics). Any thread.
    static func target(of caller: SpindleThread) -> SpindleThread? {
        self.perProcess.current.withLockedValue { $0[ObjectIdentifier(caller)] }
    }

    /// Removes `caller`'s wait once its join has returned. Any thread (the one that called `enter`).
    static func leave(_ caller: SpindleThread) {
        let joined = self.perProcess.current.withLockedValue { $0.removeValue(forKey: ObjectIdentifier(caller)) }
        _ = joined  // released here, after unlocking: the last reference to a thread may go with it
    }
}
