import CShim
import Glibc

/// Watches a file descriptor for readability or writability and calls a handler on a run loop's thread
/// (CFFileDescriptor's role). The descriptor stays the caller's: the source never reads, writes or closes it.
///
/// Events: `.readable` / `.writable` while the descriptor is ready (level-triggered: the handler should read or
/// write, or the next pass reports it again). `.endOfFile` when the peer hung up, the descriptor reached end of
/// file with nothing left to read, reported an error, or was closed under the source: it is delivered once,
/// and the source then removes itself from its loop (it is finished).
///
/// Guards: `descriptor`, `interest`, `handler` are immutable; the rest is in `state`, under the source's lock.
/// Lock order: the owning loop's lock, then this one. State machine (`Phase`): `.idle` → `.scheduled` (first
/// `add` to a loop) → `.finished` (`cancel()` from any thread, or `.endOfFile` delivered). `.finished` is final;
/// a finished source cannot be scheduled again (adding it does nothing). `.scheduled` goes back to `.idle` when
/// it leaves its last mode, or when its loop's thread exits (`loopOrphan`); a `.scheduled` source whose loop was
/// freed or exited (`SpindleRunLoop.ownerHasExited`, an atomic read under this lock without the loop's) counts as
/// idle and may be added to another loop.
public final class SpindleDescriptorSource: @unchecked Sendable {
    /// What the source waits for.
    public enum Interest: Sendable { case readable, writable }

    /// What the handler is told.
    public enum Event: Sendable, Equatable {
        /// Data can be read without blocking (or, for a listening socket, a connection can be accepted).
        case readable
        /// Data can be written without blocking.
        case writable
        /// Hang-up, end of file, error, or the descriptor was closed; the last event the source delivers.
        case endOfFile
    }

    enum Phase { case idle, scheduled, finished }

    /// Linux's `POLLRDHUP` (peer closed its writing half), 0x2000: a GNU extension that Glibc's Swift module
    /// does not export without `_GNU_SOURCE`.
    static let pollReadHangUp: Int16 = 0x2000

    struct State {
        var phase: Phase = .idle
        weak var loop: SpindleRunLoop?
        var modes: Set<SpindleRunLoop.Mode> = []
    }

    /// The watched descriptor.
    public let descriptor: Int32
    /// What it is watched for.
    public let interest: Interest
    let handler: @Sendable (Event) -> Void
    let state = RunLoopLock(State())

    /// Makes a source for `descriptor`; it watches nothing until added to a run loop. Any thread.
    /// - Parameter handler: runs on the loop's thread, never under a Spindle lock.
    /// - Throws: `SpindleError.invalidDescriptor` when `descriptor` is negative or not open.
    public init(descriptor: Int32, interest: Interest,
                handler: @escaping @Sendable (Event) -> Void) throws(SpindleError) {
        guard descriptor >= 0, fcntl(descriptor, F_GETFD) != -1 else { throw .invalidDescriptor(descriptor) }
        self.descriptor = descriptor
        self.interest = interest
        self.handler = handler
    }

    /// Stops watching for good and removes the source from its loop (waking it so it stops polling the
    /// descriptor). Any thread; idempotent. After it returns, the handler is not called again, except for a call
    /// the loop thread had already begun.
    public func cancel() {
        let (loop, modes): (SpindleRunLoop?, Set<SpindleRunLoop.Mode>) = self.state.withLock { state in
            guard state.phase != .finished else { return (nil, []) }
            let result = (state.loop, state.modes)
            state.phase = .finished
            state.loop = nil
            state.modes = []
            return result
        }
        loop?.sourceDidFinish(self, modes: modes)
    }

    /// Whether the source can still deliver events (not cancelled, no end of file yet). Any thread.
    public var isActive: Bool { self.state.withLock { $0.phase != .finished } }

    // MARK: - Loop side

    /// Loop lock. Joins `mode` of `loop`; returns whether it was added (false when finished or already there),
    /// or nil when the source is scheduled on another live loop.
    func loopAttach(_ loop: SpindleRunLoop, mode: SpindleRunLoop.Mode) -> Bool? {
        self.state.withLock { state -> Bool? in
            switch state.phase {
            case .finished:
                return false
            case .scheduled where state.loop?.ownerHasExited == false:
                if state.loop !== loop { return nil }
            case .scheduled, .idle:
                state.phase = .scheduled
                state.loop = loop
                state.modes = []
            }
            return state.modes.insert(mode).inserted
        }
    }

    /// Loop lock. Leaves `mode`; returns whether it was there.
    func loopDetach(from mode: SpindleRunLoop.Mode) -> Bool {
        self.state.withLock { state in
            guard state.modes.remove(mode) != nil else { return false }
            if state.modes.isEmpty {
                state.phase = .idle
                state.loop = nil
            }
            return true
        }
    }

    /// No lock. The loop's thread exited (`SpindleRunLoop.ownerDidExit`): back to `.idle` if `loop` is still the
    /// source's loop.
    func loopOrphan(from loop: SpindleRunLoop) {
        self.state.withLock { state in
            guard state.phase == .scheduled, state.loop === loop else { return }
            state.phase = .idle
            state.loop = nil
            state.modes = []
        }
    }

    /// Loop lock. Marks the source finished (end of file seen by `loop`); returns the modes to remove it from, or
    /// nil when it was already finished (cancelled meanwhile) or is no longer on `loop` (an earlier handler of the
    /// same pass moved it: its new loop polls it and sees the end of file itself). Nothing is delivered then.
    func loopFinish(on loop: SpindleRunLoop) -> Set<SpindleRunLoop.Mode>? {
        self.state.withLock { state in
            guard state.phase == .scheduled, state.loop === loop else { return nil }
            let modes = state.modes
            state.phase = .finished
            state.loop = nil
            state.modes = []
            return modes
        }
    }

    /// No lock. Whether it is still scheduled on `loop` (an event `loop` polled is delivered only then: an earlier
    /// handler of the same pass may have cancelled it or moved it to another loop).
    func loopIsScheduled(on loop: SpindleRunLoop) -> Bool {
        self.state.withLock { $0.phase == .scheduled && $0.loop === loop }
    }

    /// The poll(2) events to ask for.
    var pollEvents: Int16 {
        switch self.interest {
        case .readable: return Int16(POLLIN) | SpindleDescriptorSource.pollReadHangUp
        case .writable: return Int16(POLLOUT)
        }
    }

    /// Turns poll's `revents` into the event to deliver, or nil when there is nothing to report.
    func event(for revents: Int16) -> Event? {
        let hangUp = revents & (Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)) != 0
        switch self.interest {
        case .readable:
            if revents & Int16(POLLIN) != 0 {
                // Readable together with a hang-up: report end of file only once nothing is left to read.
                if hangUp || revents & SpindleDescriptorSource.pollReadHangUp != 0, self.bytesAvailable() == 0 { return .endOfFile }
                return .readable
            }
            return hangUp || revents & SpindleDescriptorSource.pollReadHangUp != 0 ? .endOfFile : nil
        case .writable:
            if hangUp { return .endOfFile }
            return revents & Int16(POLLOUT) != 0 ? .writable : nil
        }
    }

    /// Bytes readable now (FIONREAD), or nil when the descriptor does not say.
    private func bytesAvailable() -> Int32? {
        var count: Int32 = 0
        let result = withUnsafeMutablePointer(to: &count) { ioctl(self.descriptor, UInt(FIONREAD), $0) }
        return result == 0 ? count : nil
    }
}
