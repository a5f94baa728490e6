import CShim

/// A timer that calls its handler on a run loop's thread, once or repeatedly (NSTimer's role).
///
/// Scheduling: `SpindleRunLoop.add(_:forMode:)` puts it on one run loop, in one or more modes. The first firing
/// is one interval after the *first* `add` (never at once, unlike corelibs Foundation); adding it to more modes
/// of the same loop does not move it. A repeating timer fires at `first + k × interval` for k = 1, 2, …: there is
/// no cumulative drift, and firings missed while the loop was busy or not running are skipped (it fires once,
/// then resumes on the grid). Those that pass before its handler returns are skipped too (the next firing is the
/// first grid point after that, as in CFRunLoop), so a handler slower than the interval does not run back to
/// back. A one-shot timer is invalidated just before its handler runs.
///
/// Intervals: a finite number of seconds >= 0; 0 means 0.1 ms (as NSTimer). NaN, infinity and negatives throw.
///
/// Guards: `interval`, `repeats` and `intervalNanoseconds` are immutable. Everything else is in `state`, under
/// the timer's own lock, the handler included: it is let go when the timer is invalidated (or its one-shot
/// firing begins), by that thread with no lock held, so a stale heap entry (dropped later, under the loop's lock)
/// holds an empty timer, and what the handler captured is neither kept until the old fire date nor freed under a
/// lock. Lock order: the owning loop's lock, then this one (the loop holds its
/// lock when it schedules or fires the timer; `invalidate()` releases this lock before taking the loop's).
///
/// State machine (`Phase`): `.unscheduled` → `.scheduled` (first `add` to a loop) → `.invalidated` (`invalidate()`
/// from any thread, or a one-shot timer firing). `.invalidated` is final. A `.scheduled` timer whose loop was
/// freed, or whose loop's thread has exited (`SpindleRunLoop.ownerHasExited`, an atomic read under this lock
/// without the loop's; the exit also clears `loop`, see `loopOrphan`), counts as unscheduled: it has no
/// `fireDate` and may be added to another loop, where it first fires one interval after that `add`.
///
/// Firing: the loop decides a pass's firings under its lock (`loopDidFire` sets `firePending`) and runs the
/// handlers afterwards (`loopFire` clears it and runs the handler only if it was still set). `invalidate()`
/// clears `firePending`, so a firing decided but not yet begun when `invalidate()` returns never happens (for
/// example, a timer invalidated by another timer's handler in the same pass).
public final class SpindleTimer: @unchecked Sendable {
    enum Phase { case unscheduled, scheduled, invalidated }

    struct State {
        var phase: Phase = .unscheduled
        weak var loop: SpindleRunLoop?
        /// The modes of `loop` it is scheduled in.
        var modes: Set<SpindleRunLoop.Mode> = []
        /// The next firing (CLOCK_MONOTONIC ns); meaningful while `.scheduled`.
        var fireNanoseconds: UInt64 = 0
        /// Bumped whenever `fireNanoseconds` changes or the timer leaves its loop (see `RunLoopTimerEntry`).
        var generation: UInt64 = 0
        /// Tie-breaker between timers due at the same instant: the order they were first scheduled in.
        var sequence: UInt64 = 0
        var tolerance: Double
        /// A firing was decided (`loopDidFire`) and its handler has not begun; `invalidate()` cancels it.
        var firePending = false
        /// The handler; nil once invalidated (taken by `invalidate()`) or once a one-shot firing began (`loopFire`).
        var handler: (@Sendable (SpindleTimer) -> Void)? = nil
    }

    /// Outcome of one firing, for the loop.
    enum FireOutcome {
        case stale
        case rescheduled(RunLoopTimerEntry, modes: Set<SpindleRunLoop.Mode>)
        case finished(modes: Set<SpindleRunLoop.Mode>)
    }

    /// Seconds between scheduling and the first firing, and between firings of a repeating timer.
    public let interval: Double
    /// Whether the timer fires again after each firing.
    public let repeats: Bool
    let intervalNanoseconds: UInt64
    let state: RunLoopLock<State>

    /// Makes a timer; it does nothing until added to a run loop. Any thread.
    ///
    /// - Parameters:
    ///   - interval: seconds, finite and >= 0 (0 is taken as 0.1 ms).
    ///   - repeats: fire every `interval` until invalidated, or once.
    ///   - tolerance: how late the timer may fire, in seconds (see `tolerance`).
    ///   - handler: runs on the loop's thread, with the timer; never under a Spindle lock.
    /// - Throws: `SpindleError.invalidTimerInterval` when `interval` is NaN, infinite or negative.
    public init(interval: Double, repeats: Bool, tolerance: Double = 0,
                handler: @escaping @Sendable (SpindleTimer) -> Void) throws(SpindleError) {
        guard interval.isFinite, interval >= 0 else { throw .invalidTimerInterval(interval) }
        self.interval = interval
        self.repeats = repeats
        let nanoseconds = interval * 1e9
        self.intervalNanoseconds = nanoseconds >= 1.8e19 ? UInt64.max / 2 : max(100_000, UInt64(nanoseconds))
        var state = State(tolerance: SpindleTimer.clampTolerance(tolerance))
        state.handler = handler
        self.state = RunLoopLock(state)
    }

    /// Makes a timer from a `Duration` (see `init(interval:repeats:tolerance:handler:)`). Any thread.
    /// - Throws: `SpindleError.invalidTimerInterval` when `interval` is negative.
    public convenience init(interval: Duration, repeats: Bool, tolerance: Duration = .zero,
                            handler: @escaping @Sendable (SpindleTimer) -> Void) throws(SpindleError) {
        try self.init(interval: SpindleTimer.seconds(interval), repeats: repeats,
                      tolerance: SpindleTimer.seconds(tolerance), handler: handler)
    }

    /// Stops the timer for good and removes it from its run loop, waking the loop so it recomputes its sleep.
    /// Any thread; idempotent. A firing whose handler the loop thread has already begun still completes. The
    /// handler is released here (by the calling thread, no lock held), or after such a firing returns.
    public func invalidate() {
        typealias Taken = (SpindleRunLoop?, Set<SpindleRunLoop.Mode>, (@Sendable (SpindleTimer) -> Void)?)
        let (loop, modes, handler): Taken = self.state.withLock { state in
            state.firePending = false  // also for a one-shot timer already invalidated by its decided firing
            let handler = state.handler
            state.handler = nil
            guard state.phase != .invalidated else { return (nil, [], handler) }
            let loop = state.loop
            let modes = state.modes
            state.phase = .invalidated
            state.loop = nil
            state.modes = []
            state.generation &+= 1
            return (loop, modes, handler)
        }
        loop?.timerDidInvalidate(self, modes: modes)
        withExtendedLifetime(handler) {}  // released here, after the loop's lock
    }

    /// Whether the timer can still fire (not invalidated). Any thread.
    public var isValid: Bool { self.state.withLock { $0.phase != .invalidated } }

    /// When the timer fires next, or nil when it is not scheduled or was invalidated. Any thread.
    public var fireDate: SpindleDeadline? {
        self.state.withLock { state in
            state.phase == .scheduled && state.loop?.ownerHasExited == false
                ? SpindleDeadline(uptimeNanoseconds: state.fireNanoseconds) : nil
        }
    }

    /// How late the timer may fire, in seconds (>= 0; NaN and negatives read as 0). Spindle never delays a timer
    /// on purpose: it fires at its fire date, up to the ~1 ms granularity of its sleep, which is within any
    /// tolerance. Readable and settable from any thread.
    public var tolerance: Double {
        get { self.state.withLock { $0.tolerance } }
        set {
            let clamped = SpindleTimer.clampTolerance(newValue)
            self.state.withLock { $0.tolerance = clamped }
        }
    }

    // MARK: - Loop side (called with the owning loop's lock held, except where noted)

    /// Schedules the timer on `loop` in `mode` at `now`. Returns the heap entry to push, or nil when nothing
    /// changes (invalidated, or already in that mode), or `.otherLoop` when it is scheduled on another live loop.
    enum ScheduleResult { case push(RunLoopTimerEntry), unchanged, otherLoop }

    func loopSchedule(on loop: SpindleRunLoop, mode: SpindleRunLoop.Mode, now: UInt64,
                      sequence: () -> UInt64) -> ScheduleResult {
        self.state.withLock { state -> ScheduleResult in
            switch state.phase {
            case .invalidated:
                return .unchanged
            case .scheduled where state.loop?.ownerHasExited == false:
                if state.loop !== loop { return .otherLoop }
                guard state.modes.insert(mode).inserted else { return .unchanged }
            case .scheduled, .unscheduled:
                state.phase = .scheduled
                state.loop = loop
                state.modes = [mode]
                state.generation &+= 1
                state.sequence = sequence()
                let (sum, overflow) = now.addingReportingOverflow(self.intervalNanoseconds)
                state.fireNanoseconds = overflow ? .max : sum
            }
            return .push(RunLoopTimerEntry(fireNanoseconds: state.fireNanoseconds, sequence: state.sequence,
                                           generation: state.generation, timer: self))
        }
    }

    /// No lock. The loop's thread exited (`SpindleRunLoop.ownerDidExit`): lets go of `loop` if it is still the
    /// timer's loop, so the timer counts as unscheduled (its heap entries there are gone with the loop's tables).
    func loopOrphan(from loop: SpindleRunLoop) {
        self.state.withLock { state in
            guard state.phase == .scheduled, state.loop === loop else { return }
            state.loop = nil
            state.modes = []
            state.generation &+= 1
        }
    }

    /// The current generation while scheduled, nil otherwise.
    func loopGeneration() -> UInt64? {
        self.state.withLock { $0.phase == .scheduled ? $0.generation : nil }
    }

    /// Records the firing of `entry` at `now`: a repeating timer moves to the next grid point after `now`; a
    /// one-shot timer is invalidated.
    func loopDidFire(_ entry: RunLoopTimerEntry, now: UInt64) -> FireOutcome {
        self.state.withLock { state in
            guard state.phase == .scheduled, state.generation == entry.generation else { return .stale }
            state.generation &+= 1
            state.firePending = true
            guard self.repeats else {
                let modes = state.modes
                state.phase = .invalidated
                state.loop = nil
                state.modes = []
                return .finished(modes: modes)
            }
            return self.advanceLocked(&state, past: now)
        }
    }

    /// After this repeating timer's handler returned at `now` (the loop's lock held): if its next firing has passed
    /// (during the handler, or earlier in the same pass), moves it to the next grid point after `now`, as CFRunLoop
    /// reschedules after the callout, so a handler slower than the interval does not fire back to back.
    /// nil when nothing changes (not due yet, invalidated, or no longer on `loop`).
    func loopSkipPassed(on loop: SpindleRunLoop, now: UInt64) -> FireOutcome? {
        self.state.withLock { state in
            guard state.phase == .scheduled, state.loop === loop, state.fireNanoseconds <= now else { return nil }
            state.generation &+= 1
            return self.advanceLocked(&state, past: now)
        }
    }

    /// Moves `state` (scheduled, its generation already bumped) to the next point of the grid
    /// start + k·interval strictly after `now`: missed firings are skipped.
    private func advanceLocked(_ state: inout State, past now: UInt64) -> FireOutcome {
        let late = now >= state.fireNanoseconds ? now - state.fireNanoseconds : 0
        let steps = late / self.intervalNanoseconds + 1
        let (product, overflow1) = steps.multipliedReportingOverflow(by: self.intervalNanoseconds)
        let (next, overflow2) = state.fireNanoseconds.addingReportingOverflow(product)
        state.fireNanoseconds = overflow1 || overflow2 ? .max : next
        let entry = RunLoopTimerEntry(fireNanoseconds: state.fireNanoseconds, sequence: state.sequence,
                                      generation: state.generation, timer: self)
        return .rescheduled(entry, modes: state.modes)
    }

    /// Runs the handler, unless `invalidate()` was called since the firing was decided; returns whether it ran.
    /// Loop thread, no lock held.
    func loopFire() -> Bool {
        let handler = self.state.withLock { state -> (@Sendable (SpindleTimer) -> Void)? in
            defer { state.firePending = false }
            guard state.firePending else { return nil }
            let handler = state.handler
            if !self.repeats { state.handler = nil }  // a one-shot never fires again: let go after this call
            return handler
        }
        guard let handler else { return false }
        handler(self)
        return true
    }

    // MARK: - Helpers

    static func clampTolerance(_ value: Double) -> Double { value.isNaN || value < 0 ? 0 : value }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.clampedComponents
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}
