import CShim
import Glibc
import Synchronization

/// A per-thread event loop: ports, timers, descriptor sources and performed blocks, served in modes, sleeping in
/// the kernel (an eventfd and poll(2)) when there is nothing to do (NSRunLoop/CFRunLoop's role).
///
/// Ownership: each thread has its own loop, made the first time the thread reads `SpindleRunLoop.current` and
/// freed when the thread exits (closing its eventfd), unless someone else still holds it. `SpindleRunLoop.main`
/// belongs to the process's main thread. Only the owning thread may *run* a loop (the `run…` methods throw
/// `SpindleError.runLoopNotOwned` elsewhere); every other method may be called from any thread.
///
/// When the owning thread exits (a `SpindleRunLoopThread` after its last pass, or any other thread as its
/// thread-locals are destroyed), the loop is *exited*, even if someone still holds it: nobody will run it again.
/// Then (see `ownerDidExit`, SpindleRunLoop+OwnerExit.swift):
/// - ports invalidated and still waiting for the loop get their invalidation handler once, on the exiting thread,
///   and their undelivered messages are discarded; every port, timer and descriptor source scheduled there counts
///   as unscheduled (a port keeps the messages sent to it) and can be added to a live loop;
/// - invalidating a port that was scheduled there runs its handler on the invalidating thread before
///   `invalidate()` returns, discarding its pending messages; `SpindlePort.send` still accepts messages, which
///   wait on the port until it is scheduled on a live loop (as for any unscheduled port);
/// - `perform` queues nothing and returns false (the block is released, never run); performs queued earlier and
///   not run are dropped; `add` throws `SpindleError.runLoopExited` and changes nothing;
/// - the main loop is never exited.
///
/// Fork: in a forked child, every loop made in the parent counts as exited (`isInherited`): its thread is not
/// there, and a parent thread may have held its lock at the fork, so nothing in the child takes that lock. Each of
/// the methods above answers as for an exited loop without locking (`add` throws `runLoopExited`, `perform` returns
/// false, a run throws `runLoopExited`, the rest change nothing), and `wakeUp` writes nothing (its eventfd is the
/// parent's too). The child's threads get new loops from `current`, and `main` is a new main loop in the child.
///
/// Decisions (Spindle's contract, SEMANTICS Part 1 item 12):
/// - a mode with no sources, timers or pending performs returns at once (`runOnce` returns false), except the
///   outermost run of a `SpindleRunLoopThread`'s loop, which waits for work until the thread is shut down;
/// - a timer first fires one interval after it is scheduled;
/// - `perform`, `SpindlePort.send`, `stop`, and invalidating a port or timer from any thread wake the loop at
///   once (an eventfd write); nothing polls;
/// - timers are not input sources: their firing alone does not end `runOnce`;
/// - a `stop()` is never lost: if the loop is not running, its next run returns at once.
///
/// Guards and confinement:
/// - `state` (a `RunLoopLock<RunLoopState>`, a pthread mutex) holds every mutable field shared between threads: mode tables, common
///   modes, pending performs, retiring ports, the stack of modes being run, the stop flag, and a
///   `SpindleRunLoopThread`'s two flags (`heldOpen`, `stopForGood`).
/// - `inService` is touched only by the owning thread (no lock): ports and sources whose callouts are under way.
/// - `wakeup` and `isMainLoop` are immutable after `init`.
/// - `ownerExited` (an atomic) is set once, false → true, by the owning thread with `state` held (in the same
///   critical section that empties the loop). Code holding `state` reads it exactly; ports, timers and sources
///   read it without `state`, under their own lock (which may not take the loop's), to tell an exited loop from
///   a live one. Such a read that says "live" may be overtaken by the exit: each caller then either re-checks
///   under `state` (`portDidInvalidate`) or acts as if it came first (`scheduledOnAnotherRunLoop`).
///
/// Lock order: `state`, then a timer's, port's or descriptor source's own lock. Never the reverse: their
/// `invalidate()`/`cancel()` release their own lock before calling into the loop. No user code (handlers,
/// blocks, timer callbacks) ever runs with a lock held: each pass is decided under `state` and carried out
/// after unlocking.
///
/// Life of a loop (not the main one): live (its owning thread may run it) → exited (`ownerExited`; the owning
/// thread has exited; final).
///
/// State machine of a run (per call, on the owning thread): idle → running `mode` (pushed on `modeStack`)
/// → passes: [drain eventfd → plan under lock → fire due timers → run performs → deliver port messages →
/// retire invalidated ports → if something was handled, poll the mode's descriptor sources without waiting and
/// deliver what is ready (only when it has some); if nothing was handled, sleep in poll until woken, a
/// descriptor is ready, a timer is due or the deadline]
/// → back to idle when stopped, out of sources, out of time, or (for `runOnce`) once something was handled.
public final class SpindleRunLoop: @unchecked Sendable, CustomStringConvertible {
    let state = RunLoopLock(RunLoopState())
    let wakeup = RunLoopWakeup()
    let isMainLoop: Bool
    /// Owner thread only: identifiers of ports and sources whose handlers are running further up the stack.
    var inService: Set<ObjectIdentifier> = []
    /// Whether the owning thread has exited (see the type's documentation and `ownerDidExit`).
    let ownerExited = Atomic<Bool>(false)
    /// The fork generation the loop was made in (immutable; see "Fork" above).
    let forkGeneration = ForkGeneration.current

    /// What a thread's slot holds: released when the thread exits (its thread-locals are destroyed), which tells
    /// the loop its owner is gone.
    private final class Ownership {
        let loop: SpindleRunLoop
        init(_ loop: SpindleRunLoop) { self.loop = loop }
        deinit { self.loop.ownerDidExit() }
    }

    private static let slot = SpindleThreadLocal<Ownership?>(initial: { nil })

    private init(isMainLoop: Bool) { self.isMainLoop = isMainLoop }

    // MARK: - Per-thread loops

    /// The calling thread's run loop: made on first access, the same object on every access from this thread,
    /// and `main` on the main thread. Any thread.
    public static var current: SpindleRunLoop {
        // In a forked child, the forking thread's slot holds its parent-side loop: it gets a new one.
        if let ownership = slot.value, !ownership.loop.isInherited { return ownership.loop }
        let loop = SpindleThread.isMainThread ? SpindleRunLoop.main : SpindleRunLoop(isMainLoop: false)
        slot.value = Ownership(loop)
        return loop
    }

    /// The main thread's run loop (the thread whose kernel id is the process id). Readable from any thread; only
    /// the main thread may run it. A new one in a forked child (see "Fork").
    public static var main: SpindleRunLoop { mainLoops.current }

    private static let mainLoops = PerProcess { SpindleRunLoop(isMainLoop: true) }

    /// Made in a parent process, and this is a forked child: it counts as exited and its lock is never taken (see
    /// "Fork"). Any thread.
    @inline(__always)
    var isInherited: Bool { ForkGeneration.isInherited(self.forkGeneration) }

    /// Whether the calling thread owns this loop (and so may run it). Any thread.
    public var isOwnedByCurrentThread: Bool {
        if self.isInherited { return false }
        if self.isMainLoop { return SpindleThread.isMainThread }
        return SpindleRunLoop.slot.value?.loop === self
    }

    /// Whether the owning thread has exited: nothing will be served on this loop again. Never true for the main
    /// loop. Any thread, no lock (see `ownerExited`).
    var ownerHasExited: Bool { self.ownerExited.load(ordering: .acquiring) || self.isInherited }

    func checkOwner() throws(SpindleError) {
        guard self.isOwnedByCurrentThread else { throw .runLoopNotOwned }
    }

    /// Before a run: the caller owns the loop, and its wakeup descriptor is open (opened now if the loop was
    /// made while the process was out of descriptors).
    func prepareToRun() throws(SpindleError) {
        if self.isInherited { throw .runLoopExited }
        try self.checkOwner()
        try self.wakeup.open()
    }

    /// The loop and whether it is the main one. Any thread.
    public var description: String {
        "SpindleRunLoop(\(self.isMainLoop ? "main" : "thread"), mode: \(self.currentMode?.name ?? "none"))"
    }

    // MARK: - Modes

    /// The mode being run (the innermost one when runs nest), or nil outside a run. Any thread (the owning
    /// thread reads it inside callouts).
    public var currentMode: Mode? { self.isInherited ? nil : self.state.withLock { $0.modeStack.last } }

    /// The modes `.common` stands for on this loop: `.default` plus those added with `addCommonMode`. Any thread.
    public var commonModes: Set<Mode> { self.isInherited ? [] : self.state.withLock { $0.commonModes } }

    /// Adds `mode` to the loop's common modes: sources registered in `.common` are then also served when `mode`
    /// runs. Any thread; wakes the loop. Adding `.common` itself does nothing.
    public func addCommonMode(_ mode: Mode) {
        if self.isInherited { return }
        guard mode != .common else { return }
        self.state.withLock { _ = $0.commonModes.insert(mode) }
        self.wakeUp()
    }

    // MARK: - Ports

    /// Schedules `port` in `mode`, so this loop delivers its messages when running that mode. Adding it to a
    /// mode it is already in does nothing; adding it to another mode schedules it there too. Any thread; wakes
    /// the loop.
    /// - Throws: `SpindleError.runLoopExited` if this loop's thread has exited; `portInvalidated` if the port was
    ///   invalidated; `scheduledOnAnotherRunLoop` if it is scheduled on another live run loop. Nothing changes then.
    public func add<Message>(_ port: SpindlePort<Message>, forMode mode: Mode = .default) throws(SpindleError) {
        if self.isInherited { throw .runLoopExited }
        let result = self.state.withLock { state -> RunLoopAttachResult? in
            guard !self.ownerHasExited else { return nil }
            let result = port.loopAttach(self, mode: mode)
            if result == .added { state.tables[mode, default: RunLoopModeTable()].ports[ObjectIdentifier(port)] = port }
            return result
        }
        guard let result else { throw .runLoopExited }
        if result == .invalidated { throw .portInvalidated(name: port.name) }
        if result == .otherLoop { throw .scheduledOnAnotherRunLoop(name: port.name) }
        self.wakeUp()
    }

    /// Unschedules `port` from `mode`; its other modes keep it. Does nothing if it is not scheduled in `mode` on
    /// this loop. Any thread.
    public func remove<Message>(_ port: SpindlePort<Message>, forMode mode: Mode) {
        if self.isInherited { return }
        self.state.withLock { state in
            guard state.tables[mode]?.ports[ObjectIdentifier(port)] != nil else { return }
            _ = port.loopDetach(from: mode)
            state.tables[mode]?.ports[ObjectIdentifier(port)] = nil
        }
        self.wakeUp()
    }

    /// Whether `port` is scheduled in `mode` of this loop. Any thread.
    public func contains<Message>(_ port: SpindlePort<Message>, inMode mode: Mode) -> Bool {
        if self.isInherited { return false }
        return self.state.withLock { $0.tables[mode]?.ports[ObjectIdentifier(port)] != nil }
    }

    /// Called by `SpindlePort.invalidate()` (no port lock held): the port leaves every mode and waits in
    /// `retiringPorts` for the loop thread to deliver its last messages and call its invalidation handler.
    /// Returns false, changing nothing, when the owning thread has exited meanwhile (the port then retires on the
    /// invalidating thread); the check is under `state`, so the port is queued only if `ownerDidExit` will see it.
    func portDidInvalidate(_ port: any RunLoopPortEntry) -> Bool {
        if self.isInherited { return false }
        let queued = self.state.withLock { state -> Bool in
            guard !self.ownerHasExited else { return false }
            for mode in port.loopDetachAll() { state.tables[mode]?.ports[ObjectIdentifier(port)] = nil }
            state.retiringPorts.append(port)
            return true
        }
        if queued { self.wakeUp() }
        return queued
    }

    // MARK: - Timers

    /// Schedules `timer` in `mode`. The first `add` sets its first firing one interval from now; adding it to
    /// more modes of this loop does not move it. Adding an invalidated timer does nothing. Any thread; wakes the
    /// loop so it recomputes its sleep.
    /// - Throws: `SpindleError.runLoopExited` if this loop's thread has exited; `scheduledOnAnotherRunLoop` if the
    ///   timer is scheduled on another live run loop. Nothing changes then.
    public func add(_ timer: SpindleTimer, forMode mode: Mode = .default) throws(SpindleError) {
        if self.isInherited { throw .runLoopExited }
        let now = cshim_clock_monotonic_ns()
        let refusal = self.state.withLock { state -> SpindleError? in
            guard !self.ownerHasExited else { return .runLoopExited }
            switch timer.loopSchedule(on: self, mode: mode, now: now, sequence: { state.takeSequence() }) {
            case .otherLoop: return .scheduledOnAnotherRunLoop(name: "SpindleTimer")
            case .unchanged: return nil
            case .push(let entry):
                state.tables[mode, default: RunLoopModeTable()].timers[ObjectIdentifier(timer)] = timer
                state.tables[mode]!.heap.push(entry)
                return nil
            }
        }
        if let refusal { throw refusal }
        self.wakeUp()
    }

    /// Whether `timer` is scheduled in `mode` of this loop. Any thread.
    public func contains(_ timer: SpindleTimer, inMode mode: Mode) -> Bool {
        if self.isInherited { return false }
        return self.state.withLock { $0.tables[mode]?.timers[ObjectIdentifier(timer)] != nil }
    }

    /// Called by `SpindleTimer.invalidate()` (no timer lock held).
    func timerDidInvalidate(_ timer: SpindleTimer, modes: Set<Mode>) {
        if self.isInherited { return }
        self.state.withLock { state in
            for mode in modes { state.removeTimer(timer, from: mode) }
        }
        self.wakeUp()
    }

    // MARK: - Descriptor sources

    /// Starts watching `source`'s descriptor when this loop runs `mode`. Adding it to a mode it is already in, or
    /// adding a finished source, does nothing. Any thread; wakes the loop.
    /// - Throws: `SpindleError.runLoopExited` if this loop's thread has exited; `scheduledOnAnotherRunLoop` if the
    ///   source is scheduled on another live run loop; `tooManyDescriptorSources` if this loop already watches as
    ///   many descriptors as one poll(2) may (RLIMIT_NOFILE, its own wakeup included). Nothing changes then.
    public func add(_ source: SpindleDescriptorSource, forMode mode: Mode = .default) throws(SpindleError) {
        if self.isInherited { throw .runLoopExited }
        let limit = cshim_nofile_soft_limit()  // a syscall: read before the lock
        let refusal = self.state.withLock { state -> SpindleError? in
            guard !self.ownerHasExited else { return .runLoopExited }
            if limit > 0, state.sourcesWouldExceed(adding: ObjectIdentifier(source), limit: limit) {
                return .tooManyDescriptorSources(limit: Int(min(limit, Int64(Int.max))))
            }
            switch source.loopAttach(self, mode: mode) {
            case nil: return .scheduledOnAnotherRunLoop(name: "SpindleDescriptorSource(\(source.descriptor))")
            case false: return nil
            case true:
                state.tables[mode, default: RunLoopModeTable()].sources[ObjectIdentifier(source)] = source
                return nil
            }
        }
        if let refusal { throw refusal }
        self.wakeUp()
    }

    /// Stops watching `source` in `mode` (its other modes keep it; it can be added again). Any thread.
    public func remove(_ source: SpindleDescriptorSource, forMode mode: Mode) {
        if self.isInherited { return }
        self.state.withLock { state in
            guard state.tables[mode]?.sources[ObjectIdentifier(source)] != nil else { return }
            _ = source.loopDetach(from: mode)
            state.tables[mode]?.sources[ObjectIdentifier(source)] = nil
        }
        self.wakeUp()
    }

    /// Called by `SpindleDescriptorSource.cancel()` (no source lock held), and by the loop after `.endOfFile`.
    func sourceDidFinish(_ source: SpindleDescriptorSource, modes: Set<Mode>) {
        if self.isInherited { return }
        self.state.withLock { state in
            for mode in modes { state.tables[mode]?.sources[ObjectIdentifier(source)] = nil }
        }
        self.wakeUp()
    }

    // MARK: - Performs, stop, wakeup

    /// Schedules `block` to run once on this loop's thread, the next time the loop runs one of `modes` (by
    /// default the common modes), and wakes the loop so that happens promptly. Within one pass, lower `order`
    /// runs first, then first in, first out. A pending perform counts as a source: a run of a matching mode
    /// with nothing else still runs it, and `runOnce` reports it as handled. Any thread, including the loop's
    /// own (the block then runs at the next pass). The block is released after it runs.
    ///
    /// Once the loop's thread has exited, nothing will run the block: it is not queued (it is released on the
    /// calling thread, never run) and the call returns false. A block queued before the exit and not run
    /// by then (queued after the thread's last pass, or for a mode it did not run again) is dropped unrun at the
    /// exit, released on the exiting thread.
    /// - Returns: whether the block was queued: false only when the loop's thread has exited.
    @discardableResult
    public func perform(inModes modes: [Mode] = [.common], order: Int = 0,
                        _ block: @escaping @Sendable () -> Void) -> Bool {
        if self.isInherited { return false }  // checked once: the steps below skip it
        let queued = self.state.withLock { state -> Bool in
            guard !self.ownerExited.load(ordering: .acquiring) else { return false }
            state.performs.append(RunLoopPerform(modes: modes, order: order, sequence: state.takeSequence(),
                                                 block: block))
            return true
        }
        if queued { self.wakeup.signal() }
        return queued
    }

    /// Makes the innermost run of this loop return as soon as its current callout returns (all of `run()` or
    /// `run(until:)`, or one `runOnce`). If the loop is not running, its next run returns at once (a stop is
    /// never lost; one stop ends one run). Any thread.
    public func stop() {
        if self.isInherited { return }
        self.state.withLock { $0.stopRequested = true }
        self.wakeUp()
    }

    /// Wakes the loop if it sleeps, so it looks at its sources again (the explicit wakeup of CFRunLoopWakeUp).
    /// Any thread.
    public func wakeUp() { if !self.isInherited { self.wakeup.signal() } }

    /// When the next timer of `mode` fires; `.distantFuture` when the mode has sources but no timers; nil when it
    /// has no sources, timers or pending performs at all. Pure: fires nothing. Any thread.
    public func limitDate(forMode mode: Mode) -> SpindleDeadline? {
        if self.isInherited { return nil }
        return self.state.withLock { state -> SpindleDeadline? in
            guard state.hasWork(for: mode) else { return nil }
            guard let next = state.nextFire(for: mode) else { return .distantFuture }
            return SpindleDeadline(uptimeNanoseconds: next)
        }
    }
}
