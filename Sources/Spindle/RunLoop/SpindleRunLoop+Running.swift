import CShim
import Glibc

/// How one stretch of running ended.
enum RunLoopPassResult {
    /// An input source was handled: a port message, a perform, a descriptor event, or a port's retirement.
    case handled
    /// The deadline passed with nothing handled (timers may have fired).
    case timedOut
    /// The mode had nothing left to serve.
    case empty
    /// `stop()` was called.
    case stopped
}

/// The start of one pass, decided under the loop's lock.
enum RunLoopPassStart {
    case stopped
    case empty
    case plan(RunLoopPassPlan)
}

extension SpindleRunLoop {
    // MARK: - Running (owning thread only)

    /// Runs the default mode until `stop()` is called or it has no sources, timers or performs left.
    /// Owning thread only.
    /// - Throws: `SpindleError.runLoopNotOwned` from any other thread; `SpindleError.system` ("eventfd") if the
    ///   loop's wakeup descriptor cannot be opened (the process is out of descriptors; a later run tries again).
    public func run() throws(SpindleError) {
        try self.run(until: .distantFuture)
    }

    /// Runs `mode` until `deadline`, `stop()`, or until it has no sources, timers or performs left, handling as
    /// many events as come. A past deadline still fires due timers and runs ready work once. Owning thread only.
    /// - Throws: `SpindleError.runLoopNotOwned` from any other thread; `SpindleError.system` ("eventfd") if the
    ///   loop's wakeup descriptor cannot be opened (the process is out of descriptors; a later run tries again).
    public func run(until deadline: SpindleDeadline, mode: Mode = .default) throws(SpindleError) {
        try self.prepareToRun()
        self.enter(mode)
        defer { self.leave() }
        while true {
            switch self.runPasses(mode: mode, until: deadline) {
            case .handled where !deadline.hasPassed: continue
            case .handled, .timedOut, .empty, .stopped: return
            }
        }
    }

    /// Runs `mode` until one input source has been handled (a port message, a perform, a descriptor event, an
    /// invalidated port's retirement) or `deadline` passes. Timers due meanwhile fire, but a firing alone does
    /// not end the call. Owning thread only.
    /// - Returns: whether an input source was handled. False at once when the mode has no sources, timers or
    ///   performs, when a `stop()` is pending, and when the deadline passed first.
    /// - Throws: `SpindleError.runLoopNotOwned` from any other thread; `SpindleError.system` ("eventfd") if the
    ///   loop's wakeup descriptor cannot be opened (the process is out of descriptors; a later run tries again).
    @discardableResult
    public func runOnce(mode: Mode = .default, before deadline: SpindleDeadline) throws(SpindleError) -> Bool {
        try self.prepareToRun()
        self.enter(mode)
        defer { self.leave() }
        return self.runPasses(mode: mode, until: deadline) == .handled
    }

    /// Runs `mode` until `port` is invalidated and its invalidation has completed (last messages delivered,
    /// invalidation handler run), or until `deadline`, `stop()`, or the mode runs out of sources. This is the
    /// waiting pattern of an operation whose `main` waits for an asynchronous callback: add a port to
    /// `SpindleRunLoop.current`, start the work, and run until the callback (or `cancel` from another thread)
    /// invalidates the port. Owning thread only.
    /// - Returns: whether the port's invalidation completed.
    /// - Throws: `SpindleError.runLoopNotOwned` from any other thread; `SpindleError.system` ("eventfd") if the
    ///   loop's wakeup descriptor cannot be opened (the process is out of descriptors; a later run tries again).
    @discardableResult
    public func run<Message>(untilInvalidated port: SpindlePort<Message>, mode: Mode = .default,
                             before deadline: SpindleDeadline = .distantFuture) throws(SpindleError) -> Bool {
        try self.prepareToRun()
        self.enter(mode)
        defer { self.leave() }
        while !port.isRetired {
            switch self.runPasses(mode: mode, until: deadline) {
            case .handled where !deadline.hasPassed: continue
            case .handled, .timedOut, .empty, .stopped: return port.isRetired
            }
        }
        return true
    }

    /// Serves what is ready in `mode` now, pass after pass, without sleeping, until a pass handles nothing, then
    /// the events of the descriptors that are ready then, once; a `stop()` met on the way is consumed and does not
    /// end it. Only the performs queued and the port messages accepted before this call are served, and
    /// descriptors are polled at the end only once (besides the passes that handled something): a perform that
    /// queues itself again, a sender that never stops, or a descriptor that stays ready, cannot keep it serving for
    /// ever (later performs are released unrun when the loop exits; later messages wait on their port). Owning
    /// thread only (`SpindleRunLoopThread`, after its last run).
    func serveReadyWork(mode: Mode) {
        self.enter(mode)
        defer { self.leave() }
        let limit = self.state.withLock { $0.drainLimit() }
        serving: while true {
            switch self.runPasses(mode: mode, until: .now, limit: limit, pollsWhenDue: false) {
            case .handled, .stopped: continue
            case .timedOut, .empty: break serving
            }
        }
        _ = self.runPasses(mode: mode, until: .now, limit: limit)
    }

    private func enter(_ mode: Mode) { self.state.withLock { $0.modeStack.append(mode) } }

    private func leave() { self.state.withLock { _ = $0.modeStack.popLast() } }

    // MARK: - Passes

    /// Runs passes of `mode` until something is handled, the deadline passes, the mode is empty, or a stop. With a
    /// `limit` (a shutdown's), only the performs and port messages it allows are served. With `pollsWhenDue`, a
    /// pass that finds the deadline passed and nothing else to do still polls the descriptors once.
    func runPasses(mode: Mode, until deadline: SpindleDeadline,
                   limit: RunLoopDrainLimit? = nil, pollsWhenDue: Bool = true) -> RunLoopPassResult {
        let performsBefore = limit?.performsBefore ?? .max
        while true {
            // Drain before looking for work: anything published after this point also signals the eventfd, so
            // the poll below returns at once instead of missing it.
            self.wakeup.drain()
            let now = cshim_clock_monotonic_ns()
            let inService = self.inService
            let start = self.state.withLock { state -> RunLoopPassStart in
                if state.stopRequested {
                    state.stopRequested = false
                    return .stopped
                }
                let heldOpen = state.heldOpen && state.modeStack.count == 1  // a SpindleRunLoopThread's own run
                if heldOpen && state.stopForGood { return .stopped }
                guard heldOpen || state.hasWork(for: mode, inService: inService) else { return .empty }
                return .plan(state.makePlan(for: mode, now: now, inService: inService, performsBefore: performsBefore))
            }
            let plan: RunLoopPassPlan
            switch start {
            case .stopped: return .stopped
            case .empty: return .empty
            case .plan(let decided): plan = decided
            }

            // Callouts, with no lock held. A timer is in service while it fires, so a nested run does not fire it
            // again inside its own callout (the firings it misses meanwhile are skipped, as CFRunLoop does).
            for timer in plan.timers {
                let ran = self.serve(ObjectIdentifier(timer)) { timer.loopFire() }
                if ran && timer.repeats {
                    let now = cshim_clock_monotonic_ns()
                    self.state.withLock { $0.skipPassedFiring(of: timer, on: self, now: now) }
                }
            }
            var handled = false
            for perform in plan.performs {
                perform.block()
                handled = true
            }
            for port in plan.ports where self.serve(ObjectIdentifier(port), { self.deliver(port, within: limit) }) {
                handled = true
            }
            for port in plan.retiring {
                _ = self.serve(ObjectIdentifier(port)) {
                    port.loopFinishInvalidation()
                    return true
                }
                handled = true
            }
            if handled {
                // Descriptors get a turn on every pass, not only on one that found nothing else (CFRunLoop polls its
                // sources on every pass too): otherwise a perform that re-posts itself starves them for ever. Only
                // when the mode watches descriptors, so a loop without any pays nothing.
                if !plan.sources.isEmpty { _ = self.deliverReadyDescriptors(mode: mode) }
                return .handled
            }
            if deadline.hasPassed {
                // A past deadline still serves what is ready once: a descriptor that is ready now is ready work
                // (`runOnce(before: .now)` pumps the loop; `serveReadyWork` serves it at shutdown).
                if pollsWhenDue && !plan.sources.isEmpty && self.deliverReadyDescriptors(mode: mode) { return .handled }
                return .timedOut
            }
            if !plan.timers.isEmpty { continue }  // callouts may have changed the sources: plan again

            // Nothing to do: sleep until woken, a descriptor is ready, the next timer is due, or the deadline.
            var watched = plan.sources.map { pollfd(fd: $0.descriptor, events: $0.pollEvents, revents: 0) }
            var wakeAt = deadline
            if let next = plan.nextFire, next < wakeAt.uptimeNanoseconds {
                wakeAt = SpindleDeadline(uptimeNanoseconds: next)
            }
            // On a pool thread (an operation waiting in its run loop), a wait the pool sees: another thread may
            // serve meanwhile, perhaps the very work this loop waits for.
            ThreadContext.current.blocking { self.wakeup.wait(watching: &watched, until: wakeAt) }
            if self.deliverDescriptorEvents(plan.sources, watched) { return .handled }
            if deadline.hasPassed, plan.nextFire.map({ $0 > cshim_clock_monotonic_ns() }) ?? true {
                return .timedOut
            }
        }
    }

    /// Delivers `port`'s pending messages, or with a shutdown's `limit` only those it allows; none if an earlier
    /// callout of this pass moved the port to another loop (that loop delivers them).
    private func deliver(_ port: any RunLoopPortEntry, within limit: RunLoopDrainLimit?) -> Bool {
        guard let limit else { return port.loopDeliverPending(on: self) }
        return port.loopDeliverPending(on: self, acceptedBefore: limit.acceptedBefore(port))
    }

    /// Runs `body` with `id` marked in service (so nested runs skip that port or source). Owner thread only.
    private func serve(_ id: ObjectIdentifier, _ body: () -> Bool) -> Bool {
        self.inService.insert(id)
        defer { self.inService.remove(id) }
        return body()
    }

    /// Polls the descriptors `mode` watches now (the callouts of this pass may have changed them) without
    /// waiting, and delivers what is ready; returns whether any event was delivered. Owner thread only, no lock
    /// held.
    private func deliverReadyDescriptors(mode: Mode) -> Bool {
        let inService = self.inService
        let sources = self.state.withLock { $0.sources(for: mode, inService: inService) }
        guard !sources.isEmpty else { return false }
        var watched = sources.map { pollfd(fd: $0.descriptor, events: $0.pollEvents, revents: 0) }
        let ready = RunLoopWakeup.poll(&watched, until: .now)
        return ready > 0 && self.deliverDescriptorEvents(sources, watched)
    }

    /// Delivers what poll reported for `sources` (`watched[i]` belongs to `sources[i]`); returns whether any
    /// event was delivered. End of file removes the source from the loop before its handler runs.
    private func deliverDescriptorEvents(_ sources: [SpindleDescriptorSource], _ watched: [pollfd]) -> Bool {
        var handled = false
        for (source, entry) in zip(sources, watched) where entry.revents != 0 {
            guard let event = source.event(for: entry.revents) else { continue }
            if event == .endOfFile {
                // Finish under the loop's lock first, so a racing cancel() and this delivery cannot both win.
                let finished = self.state.withLock { state -> Bool in
                    guard let modes = source.loopFinish(on: self) else { return false }
                    for mode in modes { state.tables[mode]?.sources[ObjectIdentifier(source)] = nil }
                    return true
                }
                guard finished else { continue }
            } else if !source.loopIsScheduled(on: self) {
                continue  // cancelled or moved to another loop by an earlier handler of this pass
            }
            _ = self.serve(ObjectIdentifier(source)) {
                source.handler(event)
                return true
            }
            handled = true
        }
        return handled
    }
}
