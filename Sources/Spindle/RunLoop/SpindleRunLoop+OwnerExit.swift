extension SpindleRunLoop {
    /// What a loop lets go of when its owning thread exits, taken under `state` and released after unlocking.
    struct Orphans {
        var tables: [Mode: RunLoopModeTable]
        var performs: [RunLoopPerform]
        var retiring: [any RunLoopPortEntry]
    }

    /// The owning thread is exiting: the loop becomes *exited* (`ownerExited`; see the type's documentation), and
    /// what it held is let go. Called by `SpindleRunLoopThread` after its last pass, and by every thread's
    /// thread-local slot as the thread exits (`Ownership.deinit`); the second call does nothing. Never for the main
    /// loop. Owning thread only.
    ///
    /// Under `state`, in one critical section: set `ownerExited`, take the mode tables, the pending performs and
    /// the ports waiting to retire. Anyone who takes `state` later sees the flag and queues nothing (`add`,
    /// `perform`, `portDidInvalidate`), so what was taken here is all there is. Then, with no lock held:
    /// - each port, timer and source of the tables is unscheduled if it is still this loop's (it may already have
    ///   moved to a live loop: `loopOrphan(from:)` checks); a port keeps its pending messages;
    /// - the dropped performs' blocks are released, oldest first, before any handler below runs: a moved
    ///   `SpindleRunLoopExecutor`'s jobs still waiting here move to its stand-in in the order they were enqueued,
    ///   ahead of any job a handler enqueues (which finds the loop exited and moves at once);
    /// - each port waiting to retire is retired here: its pending messages are discarded and its invalidation
    ///   handler runs, once (the port's own phase decides who runs it, so a racing `invalidate()` that already
    ///   found the loop exited and retired it changes nothing).
    ///
    /// Running user code from a thread-local destructor: the handlers above run while the exiting thread's
    /// thread-locals are being destroyed, as CFRunLoop does in `__CFFinalizeRunLoop` (it removes every source,
    /// calling their cancel callbacks, from its thread-specific-data destructor). No lock is held and the thread is
    /// still a normal pthread; what a handler must not rely on is the exiting thread's own thread-locals (some may
    /// already be gone; reading one makes a fresh value, which the thread's destruction then releases in a later
    /// round: `SpindleRunLoop.current` there is a new, empty loop that exits in turn). The alternative, never
    /// running them, would leave the ports not retired for ever, which is the bug this closes.
    func ownerDidExit() {
        guard !self.isMainLoop, !self.isInherited else { return }  // inherited: a forked child's copy (see "Fork")
        var taken = self.state.withLock { state -> Orphans? in
            guard !self.ownerExited.load(ordering: .relaxed) else { return nil }
            self.ownerExited.store(true, ordering: .releasing)
            let orphans = Orphans(tables: state.tables, performs: state.performs, retiring: state.retiringPorts)
            state.tables = [:]
            state.performs = []
            state.retiringPorts = []
            return orphans
        }
        guard var orphans = taken.take() else { return }  // the only reference: the blocks go as `dropped` empties
        for table in orphans.tables.values {
            for port in table.ports.values { port.loopOrphan(from: self) }
            for timer in table.timers.values { timer.loopOrphan(from: self) }
            for source in table.sources.values { source.loopOrphan(from: self) }
        }
        var dropped = orphans.performs.reversed() as [RunLoopPerform]
        orphans.performs = []
        while let perform = dropped.popLast() { _ = perform }  // each block released here, oldest first, unlocked
        for port in orphans.retiring { port.loopRetireDiscarding() }
        // The rest of `orphans` is released here: no lock is held.
    }
}
