/// What a run loop needs from a port, whatever its message type. The `loop…` methods marked "loop lock" are
/// called with the owning loop's lock held (lock order: loop, then port); the others on the loop's thread with
/// no lock held.
protocol RunLoopPortEntry: AnyObject, Sendable {
    /// Loop lock. Joins `mode` of `loop`.
    func loopAttach(_ loop: SpindleRunLoop, mode: SpindleRunLoop.Mode) -> RunLoopAttachResult
    /// Loop lock. Leaves `mode`; returns whether it was scheduled there. Leaving the last mode unschedules.
    func loopDetach(from mode: SpindleRunLoop.Mode) -> Bool
    /// Loop lock. Leaves every mode (after invalidation); returns the modes it was in.
    func loopDetachAll() -> Set<SpindleRunLoop.Mode>
    /// Loop thread. Delivers every message accepted so far, if the port is still scheduled on `loop` (an earlier
    /// callout of the pass may have moved it); returns whether there was one.
    func loopDeliverPending(on loop: SpindleRunLoop) -> Bool
    /// Loop lock. How many messages the port has accepted since it was made (a shutdown's limit, see below).
    func loopAcceptedCount() -> UInt64
    /// Loop thread. Delivers the pending messages among the first `limit` the port accepted; returns whether there
    /// was one (`SpindleRunLoop.serveReadyWork`: what was sent before a loop thread's shutdown).
    func loopDeliverPending(on loop: SpindleRunLoop, acceptedBefore limit: UInt64) -> Bool
    /// Loop thread. Delivers the messages accepted before invalidation, then calls the invalidation handler.
    func loopFinishInvalidation()
    /// No lock. The loop's thread exited (`SpindleRunLoop.ownerDidExit`): lets go of `loop` if it is still the
    /// port's loop, so the port counts as unscheduled; pending messages stay.
    func loopOrphan(from loop: SpindleRunLoop)
    /// No lock, any thread. Completes an invalidation that no loop will serve (its thread exited): discards the
    /// pending messages and, if this call is the one that retires the port, runs the invalidation handler here.
    func loopRetireDiscarding()
}

/// What `loopAttach` did.
enum RunLoopAttachResult { case added, alreadyInMode, invalidated, otherLoop }

/// A port: any thread sends typed messages, and a handler receives them on the thread of the run loop the port
/// is scheduled on (NSPort/CFMessagePort's role within one process).
///
/// Delivery: each accepted message is delivered exactly once, in the order `send` accepted it (so in order per
/// sender), on the loop's thread, never under a Spindle lock. Messages sent while the port is not scheduled wait
/// until it is. Nested runs of the loop from inside the handler do not deliver this port's messages.
///
/// Invalidation: `invalidate()` from any thread. From then on `send` throws `SpindleError.portInvalidated`.
/// Messages accepted *before* invalidation are still delivered, then the invalidation handler runs once:
/// - port scheduled on a live run loop: both happen on the loop's thread, at its next pass in any mode (the
///   port leaves every mode at once; `invalidate()` wakes the loop);
/// - port not scheduled (or its loop's thread has exited): the handler runs on the invalidating thread before
///   `invalidate()` returns, and the undeliverable pending messages are discarded;
/// - port invalidated on a live loop whose thread then exits before serving it: the handler runs on the exiting
///   thread as it exits, and the pending messages are discarded (see `SpindleRunLoop`).
///
/// A loop whose thread has exited does not hold the port: `send` still accepts messages, which wait on the port
/// until it is added to a live loop (as for a port never scheduled).
///
/// A port is on at most one run loop at a time: adding it to a second live loop throws
/// `SpindleError.scheduledOnAnotherRunLoop` and changes nothing.
///
/// Guards: `name`, `handler`, `invalidationHandler` are immutable; the rest is in `state`, under the port's lock.
/// `state.loop` is weak; a loop whose owner exited (`SpindleRunLoop.ownerHasExited`, an atomic read under this
/// lock without the loop's) counts as none. Lock order: the owning loop's lock, then this one; never the reverse
/// (`invalidate()` unlocks before calling the loop). State machine (`Phase`): `.valid` → `.invalidated`
/// (`invalidate()`) → `.retired` (the transition happens once, under this lock, by whichever of the loop's pass,
/// the loop's exit or `invalidate()` itself gets there first; that one runs the handler, after unlocking).
/// Forward only.
public final class SpindlePort<Message: Sendable>: RunLoopPortEntry, @unchecked Sendable, CustomStringConvertible {
    enum Phase { case valid, invalidated, retired }

    /// What `invalidate()` does after unlocking (`retireHere` carries the discarded messages, released unlocked).
    enum InvalidationStep { case nothing, retireOnLoop(SpindleRunLoop), retireHere([Message]) }

    struct State {
        var phase: Phase = .valid
        weak var loop: SpindleRunLoop?
        var modes: Set<SpindleRunLoop.Mode> = []
        /// Accepted messages not yet taken by the loop, oldest first.
        var pending: [Message] = []
        /// Messages accepted since the port was made (the last `pending.count` of them are still pending).
        var accepted: UInt64 = 0
    }

    /// The port's name, for errors and descriptions.
    public let name: String
    private let handler: @Sendable (Message) -> Void
    private let invalidationHandler: (@Sendable () -> Void)?
    private let state = RunLoopLock(State())

    /// Makes a valid, unscheduled port. Any thread.
    /// - Parameters:
    ///   - name: used in `SpindleError.portInvalidated` and `description`.
    ///   - invalidationHandler: runs once after invalidation (see the type's documentation for which thread).
    ///   - handler: runs on the loop's thread for each message.
    public init(name: String = "port", invalidationHandler: (@Sendable () -> Void)? = nil,
                handler: @escaping @Sendable (Message) -> Void) {
        self.name = name
        self.invalidationHandler = invalidationHandler
        self.handler = handler
    }

    /// Enqueues `message` and wakes the port's run loop. Any thread; never blocks beyond a short lock. A port
    /// that is not scheduled, or whose loop's thread has exited, keeps the message until it is added to a live
    /// loop (or discards it when invalidated).
    /// - Throws: `SpindleError.portInvalidated` once the port is invalidated (the message is then not accepted).
    public func send(_ message: Message) throws(SpindleError) {
        let loop: SpindleRunLoop? = try self.state.withLock { state throws(SpindleError) in
            guard state.phase == .valid else { throw .portInvalidated(name: self.name) }
            state.pending.append(message)
            state.accepted &+= 1
            return state.loop
        }
        loop?.wakeUp()
    }

    /// Invalidates the port (see the type's documentation): `send` throws from now on; accepted messages are
    /// still delivered; the invalidation handler runs once. Any thread; idempotent.
    public func invalidate() {
        let next: InvalidationStep = self.state.withLock { state in
            guard state.phase == .valid else { return .nothing }
            state.phase = .invalidated
            if let loop = state.loop, !loop.ownerHasExited { return .retireOnLoop(loop) }
            state.phase = .retired
            state.loop = nil
            state.modes = []
            var discarded: [Message] = []
            swap(&discarded, &state.pending)
            return .retireHere(discarded)
        }
        switch next {
        case .nothing:
            return
        case .retireOnLoop(let loop):
            // The loop re-checks under its lock: if its thread exited meanwhile, it queued nothing.
            if !loop.portDidInvalidate(self) { self.loopRetireDiscarding() }
        case .retireHere:
            self.invalidationHandler?()  // the discarded messages go with `next`, unlocked
        }
    }

    /// Whether the port still accepts messages. Any thread.
    public var isValid: Bool { self.state.withLock { $0.phase == .valid } }

    /// Whether invalidation is complete: the port is invalidated and its invalidation handler has run. Any thread.
    public var isRetired: Bool { self.state.withLock { $0.phase == .retired } }

    /// Messages accepted and not yet taken for delivery (a snapshot). Any thread.
    public var pendingCount: Int { self.state.withLock { $0.pending.count } }

    /// The port's name and state. Any thread.
    public var description: String { "SpindlePort(\(self.name), \(self.state.withLock { $0.phase }))" }

    // MARK: - RunLoopPortEntry

    func loopAttach(_ loop: SpindleRunLoop, mode: SpindleRunLoop.Mode) -> RunLoopAttachResult {
        self.state.withLock { state in
            guard state.phase == .valid else { return .invalidated }
            if let current = state.loop, !current.ownerHasExited {
                if current !== loop { return .otherLoop }
            } else {
                state.loop = loop
                state.modes = []
            }
            return state.modes.insert(mode).inserted ? .added : .alreadyInMode
        }
    }

    func loopDetach(from mode: SpindleRunLoop.Mode) -> Bool {
        self.state.withLock { state in
            guard state.modes.remove(mode) != nil else { return false }
            if state.modes.isEmpty { state.loop = nil }
            return true
        }
    }

    func loopDetachAll() -> Set<SpindleRunLoop.Mode> {
        self.state.withLock { state in
            let modes = state.modes
            state.modes = []
            return modes
        }
    }

    func loopDeliverPending(on loop: SpindleRunLoop) -> Bool {
        let batch: [Message] = self.state.withLock { state in
            guard state.loop === loop else { return [] }
            var batch: [Message] = []
            swap(&batch, &state.pending)
            return batch
        }
        for message in batch { self.handler(message) }
        return !batch.isEmpty
    }

    func loopAcceptedCount() -> UInt64 { self.state.withLock { $0.accepted } }

    func loopDeliverPending(on loop: SpindleRunLoop, acceptedBefore limit: UInt64) -> Bool {
        let batch: [Message] = self.state.withLock { state in
            guard state.loop === loop else { return [] }
            let taken = state.accepted - UInt64(state.pending.count)  // accepted and already taken
            guard limit > taken else { return [] }
            let count = Int(min(limit - taken, UInt64(state.pending.count)))
            let batch = Array(state.pending.prefix(count))
            state.pending.removeFirst(count)
            return batch
        }
        for message in batch { self.handler(message) }
        return !batch.isEmpty
    }

    func loopFinishInvalidation() {
        // No message can be accepted any more, so this batch is the last.
        let batch = self.takePending()
        for message in batch { self.handler(message) }
        let first: Bool = self.state.withLock { state in
            state.loop = nil
            guard state.phase == .invalidated else { return false }
            state.phase = .retired
            return true
        }
        if first { self.invalidationHandler?() }
    }

    func loopOrphan(from loop: SpindleRunLoop) {
        self.state.withLock { state in
            guard state.loop === loop else { return }
            state.loop = nil
            state.modes = []
        }
    }

    func loopRetireDiscarding() {
        var discarded: [Message] = []
        let first: Bool = self.state.withLock { state in
            state.loop = nil
            state.modes = []
            guard state.phase == .invalidated else { return false }
            state.phase = .retired
            swap(&discarded, &state.pending)
            return true
        }
        discarded = []  // released with no lock held
        if first { self.invalidationHandler?() }
    }

    private func takePending() -> [Message] {
        self.state.withLock { state in
            var batch: [Message] = []
            swap(&batch, &state.pending)
            return batch
        }
    }
}
