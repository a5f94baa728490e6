/// A block waiting to run on a run loop (`SpindleRunLoop.perform`).
struct RunLoopPerform: Sendable {
    /// The modes it may run in (`.common` stands for the loop's common modes).
    let modes: [SpindleRunLoop.Mode]
    /// Lower orders run first within one pass; equal orders run first in, first out.
    let order: Int
    /// Arrival order.
    let sequence: UInt64
    /// The work.
    let block: @Sendable () -> Void
}

/// What one mode of a run loop serves. Keyed by the mode the user named (`.common` has its own table).
struct RunLoopModeTable {
    var ports: [ObjectIdentifier: any RunLoopPortEntry] = [:]
    var sources: [ObjectIdentifier: SpindleDescriptorSource] = [:]
    /// Timers scheduled in this mode; the heap holds their firings (stale ones too, see `RunLoopTimerEntry`).
    var timers: [ObjectIdentifier: SpindleTimer] = [:]
    var heap = RunLoopTimerHeap()

    /// Whether anything is registered here.
    var hasSources: Bool { !self.ports.isEmpty || !self.sources.isEmpty || !self.timers.isEmpty }

    /// Whether a heap entry still stands for a live firing of a timer in this mode.
    func isLive(_ entry: RunLoopTimerEntry) -> Bool {
        self.timers[ObjectIdentifier(entry.timer)] != nil && entry.timer.loopGeneration() == entry.generation
    }
}

/// What a `SpindleRunLoopThread`'s shutdown serves (`SpindleRunLoop.serveReadyWork`): the performs and the port
/// messages queued before it began, so a perform that queues itself again, or a sender that never stops, cannot
/// hold the shutdown for ever. Made under the loop's lock; immutable.
struct RunLoopDrainLimit {
    /// Performs whose sequence is below this run.
    let performsBefore: UInt64
    /// Each port scheduled on the loop when the shutdown began, and how many messages it had accepted then. A
    /// port not listed (scheduled since) delivers nothing; what it was not given waits on the port.
    let portsAccepted: [ObjectIdentifier: UInt64]

    func acceptedBefore(_ port: any RunLoopPortEntry) -> UInt64 { self.portsAccepted[ObjectIdentifier(port)] ?? 0 }
}

/// What the loop thread does in one pass, decided under the loop's lock and carried out after unlocking.
struct RunLoopPassPlan: Sendable {
    /// Timers that came due, in firing order, already rescheduled (repeating) or invalidated (one-shot).
    var timers: [SpindleTimer] = []
    var performs: [RunLoopPerform] = []
    var ports: [any RunLoopPortEntry] = []
    /// Invalidated ports whose remaining messages and invalidation handler are still to run.
    var retiring: [any RunLoopPortEntry] = []
    var sources: [SpindleDescriptorSource] = []
    /// The next timer firing after this pass, in CLOCK_MONOTONIC nanoseconds.
    var nextFire: UInt64?
}

/// All mutable state of one `SpindleRunLoop`; lives in the loop's `RunLoopLock` and is only touched with it held.
/// The lock order is: this lock, then a timer's, port's or descriptor source's own lock (never the reverse).
struct RunLoopState {
    var commonModes: Set<SpindleRunLoop.Mode> = [.default]
    var tables: [SpindleRunLoop.Mode: RunLoopModeTable] = [:]
    var performs: [RunLoopPerform] = []
    var retiringPorts: [any RunLoopPortEntry] = []
    // `tables`, `performs` and `retiringPorts` are emptied, for good, when the owning thread exits
    // (`SpindleRunLoop.ownerDidExit`); nothing is added to them after that.
    /// The modes being run, innermost last (runs nest when a callout runs the loop again).
    var modeStack: [SpindleRunLoop.Mode] = []
    /// Set by `stop()`, cleared by the run that observes it (a stop is never lost: a stop while the loop is not
    /// running makes its next run return at once).
    var stopRequested = false
    /// A `SpindleRunLoopThread` runs this loop: its outermost run (and only that one, `modeStack.count == 1`) waits
    /// even with nothing registered, and ends only for `stop()` or `stopForGood`.
    var heldOpen = false
    /// Set once by `SpindleRunLoopThread.shutdown` (or its deinit): the held-open outermost run returns at its next
    /// pass, and keeps returning (unlike `stopRequested`, it is not consumed, so a nested run that takes a plain
    /// stop cannot make it be lost).
    var stopForGood = false
    var nextSequence: UInt64 = 0

    mutating func takeSequence() -> UInt64 {
        defer { self.nextSequence &+= 1 }
        return self.nextSequence
    }

    /// The tables running `mode` serves: its own, and `.common`'s when `mode` is a common mode.
    func servedKeys(for mode: SpindleRunLoop.Mode) -> [SpindleRunLoop.Mode] {
        if mode != .common, self.commonModes.contains(mode) { return [mode, .common] }
        return [mode]
    }

    /// Whether `perform` may run while `mode` is run.
    func allows(_ perform: RunLoopPerform, in mode: SpindleRunLoop.Mode) -> Bool {
        perform.modes.contains(mode) || (perform.modes.contains(.common) && self.commonModes.contains(mode))
    }

    /// Whether running `mode` has anything to wait for: sources, timers, performs or ports still retiring (those in
    /// `inService`, whose handler is running further up the loop thread's stack, do not count: no nested run can
    /// serve them, so a nested run must not wait for them).
    func hasWork(for mode: SpindleRunLoop.Mode, inService: Set<ObjectIdentifier> = []) -> Bool {
        if self.retiringPorts.contains(where: { !inService.contains(ObjectIdentifier($0)) }) { return true }
        for key in self.servedKeys(for: mode) where self.tables[key]?.hasSources == true { return true }
        return self.performs.contains { self.allows($0, in: mode) }
    }

    /// The next live timer firing for `mode`, dropping stale heap tops on the way.
    mutating func nextFire(for mode: SpindleRunLoop.Mode) -> UInt64? {
        var earliest: UInt64?
        for key in self.servedKeys(for: mode) {
            guard self.tables[key] != nil else { continue }
            while let top = self.tables[key]!.heap.first, !self.tables[key]!.isLive(top) {
                self.tables[key]!.heap.popFirst()
            }
            if let top = self.tables[key]!.heap.first {
                earliest = min(earliest ?? .max, top.fireNanoseconds)
            }
        }
        return earliest
    }

    /// Pops the timers of `mode` due at `now`, reschedules repeating ones, retires one-shot ones, and returns
    /// them in firing order (each timer once, even when it is due in two served tables).
    /// Timers in `inService` (firing further up the loop thread's stack) are rescheduled but not returned: a timer
    /// never fires inside its own callout.
    mutating func takeDueTimers(for mode: SpindleRunLoop.Mode, now: UInt64,
                                inService: Set<ObjectIdentifier> = []) -> [SpindleTimer] {
        var due: [RunLoopTimerEntry] = []
        var seen = Set<ObjectIdentifier>()
        for key in self.servedKeys(for: mode) {
            guard self.tables[key] != nil else { continue }
            while let top = self.tables[key]!.heap.first, top.fireNanoseconds <= now {
                self.tables[key]!.heap.popFirst()
                if self.tables[key]!.isLive(top), seen.insert(ObjectIdentifier(top.timer)).inserted {
                    due.append(top)
                }
            }
        }
        due.sort { $0.precedes($1) }
        var fired: [SpindleTimer] = []
        for entry in due {
            switch entry.timer.loopDidFire(entry, now: now) {
            case .stale:
                continue
            case .rescheduled(let next, let modes):
                for key in modes { self.pushFiring(next, into: key) }
            case .finished(let modes):
                for key in modes { self.removeTimer(entry.timer, from: key) }
            }
            if inService.contains(ObjectIdentifier(entry.timer)) { continue }
            fired.append(entry.timer)
        }
        return fired
    }

    /// After a repeating timer's handler returned at `now`: moves a next firing that passed meanwhile on to the grid
    /// point after `now` (`SpindleTimer.loopSkipPassed`).
    mutating func skipPassedFiring(of timer: SpindleTimer, on loop: SpindleRunLoop, now: UInt64) {
        guard case .rescheduled(let next, let modes) = timer.loopSkipPassed(on: loop, now: now) else { return }
        for key in modes { self.pushFiring(next, into: key) }
    }

    /// Pushes a repeating timer's next firing into the heap of `mode`, compacting the heap when stale entries pile
    /// up: a mode that is not being run keeps one entry per firing otherwise (stale ones are dropped only when the
    /// mode is run or asked for its next firing). Amortised O(1).
    private mutating func pushFiring(_ entry: RunLoopTimerEntry, into mode: SpindleRunLoop.Mode) {
        guard self.tables[mode] != nil else { return }
        self.tables[mode]!.heap.push(entry)
        let table = self.tables[mode]!
        if table.heap.count > 2 * table.timers.count + 64 {
            self.tables[mode]!.heap.compact { table.isLive($0) }
        }
    }

    /// Removes `timer` from the table of `mode`, compacting the heap when stale entries pile up.
    mutating func removeTimer(_ timer: SpindleTimer, from mode: SpindleRunLoop.Mode) {
        guard self.tables[mode] != nil else { return }
        self.tables[mode]!.timers[ObjectIdentifier(timer)] = nil
        let table = self.tables[mode]!
        if table.heap.count > 2 * table.timers.count + 64 {
            self.tables[mode]!.heap.compact { table.isLive($0) }
        }
    }

    /// Whether the loop's descriptor sources with `id` added (its tables together, each source once), plus its own
    /// wakeup descriptor, would be more than `limit` entries for one poll(2). Counts the tables' entries first, and
    /// counts distinct sources only when that total is near the limit.
    func sourcesWouldExceed(adding id: ObjectIdentifier, limit: Int64) -> Bool {
        var total = 0
        for table in self.tables.values { total += table.sources.count }
        if Int64(total) + 2 <= limit { return false }
        var seen = Set<ObjectIdentifier>([id])
        for table in self.tables.values { for key in table.sources.keys { seen.insert(key) } }
        return Int64(seen.count) + 1 > limit
    }

    /// The descriptor sources running `mode` watches, each once, skipping those in `inService`.
    func sources(for mode: SpindleRunLoop.Mode, inService: Set<ObjectIdentifier>) -> [SpindleDescriptorSource] {
        var sources: [SpindleDescriptorSource] = []
        var seen = Set<ObjectIdentifier>()
        for key in self.servedKeys(for: mode) {
            guard let table = self.tables[key] else { continue }
            for (id, source) in table.sources where !inService.contains(id) && seen.insert(id).inserted {
                sources.append(source)
            }
        }
        return sources
    }

    /// The limit of a shutdown beginning now (see `RunLoopDrainLimit`).
    func drainLimit() -> RunLoopDrainLimit {
        var accepted: [ObjectIdentifier: UInt64] = [:]
        for table in self.tables.values {
            for (id, port) in table.ports where accepted[id] == nil { accepted[id] = port.loopAcceptedCount() }
        }
        return RunLoopDrainLimit(performsBefore: self.nextSequence, portsAccepted: accepted)
    }

    /// Decides one pass of running `mode` at `now` (see `RunLoopPassPlan`). `inService` lists the ports and
    /// sources whose callouts are under way further up the loop thread's stack: they are skipped, so a nested
    /// run never delivers a port's messages out of order or re-enters a handler. Only performs whose sequence is
    /// below `performsBefore` are taken (`serveReadyWork`: those queued before the loop's thread shut down).
    mutating func makePlan(for mode: SpindleRunLoop.Mode, now: UInt64, inService: Set<ObjectIdentifier>,
                           performsBefore: UInt64 = .max) -> RunLoopPassPlan {
        var plan = RunLoopPassPlan()
        plan.timers = self.takeDueTimers(for: mode, now: now, inService: inService)
        var kept: [RunLoopPerform] = []
        for perform in self.performs {
            if perform.sequence < performsBefore && self.allows(perform, in: mode) {
                plan.performs.append(perform)
            } else {
                kept.append(perform)
            }
        }
        self.performs = kept
        plan.performs.sort { ($0.order, $0.sequence) < ($1.order, $1.sequence) }
        var seenPorts = Set<ObjectIdentifier>()
        for key in self.servedKeys(for: mode) {
            guard let table = self.tables[key] else { continue }
            for (id, port) in table.ports where !inService.contains(id) && seenPorts.insert(id).inserted {
                plan.ports.append(port)
            }
        }
        plan.sources = self.sources(for: mode, inService: inService)
        var stillRetiring: [any RunLoopPortEntry] = []
        for port in self.retiringPorts {
            if inService.contains(ObjectIdentifier(port)) { stillRetiring.append(port) } else { plan.retiring.append(port) }
        }
        self.retiringPorts = stillRetiring
        plan.nextFire = self.nextFire(for: mode)
        return plan
    }
}
