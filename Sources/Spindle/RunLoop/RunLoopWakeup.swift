import CShim
import Glibc
import Synchronization

/// The run loop's wakeup descriptor and its one blocking call: an eventfd (`EFD_CLOEXEC|EFD_NONBLOCK`), as
/// CFRunLoop uses on Linux, waited on with poll(2) together with the descriptors of the mode being run.
///
/// Guards and confinement:
/// - `descriptor` is created in `init` and closed in `deinit`; it never changes in between.
/// - `signal()` may be called from any thread, any number of times (the kernel counter coalesces them).
/// - `drain()` and `wait(...)` are called only by the thread that owns the run loop.
///
/// State machine of the counter: zero (the loop may sleep) → non-zero after any `signal()` (the descriptor is
/// readable: a poll returns at once) → zero again after `drain()`. Because the owner drains *before* it looks
/// for work and every producer publishes its work *before* signalling, a wakeup can never be lost.
///
/// Spinning: `signals` (atomic) counts `signal()` calls; `seenAtDrain` (owner only) is its value at the last drain.
/// Before sleeping with no descriptors to watch, the owner polls `signals` for a few microseconds: work sent from
/// another core then costs no kernel wakeup (tens of microseconds on a virtual machine). The spin never outlasts
/// the wait's deadline, and the poll that follows returns at once if a signal came.
final class RunLoopWakeup: @unchecked Sendable {
    /// The eventfd. Immutable after `init`.
    let descriptor: Int32
    /// How many times `signal()` was called (a hint for the owner's spin).
    let signals = Atomic<UInt>(0)
    /// `signals` when the owner last drained. Owner thread only.
    private var seenAtDrain: UInt = 0
    /// Polling rounds before sleeping (each a few spin-wait hints): about 20–40 µs.
    static let spinRounds = 400

    /// Opens the eventfd. Traps if the process is out of descriptors (a run loop cannot work without one).
    init() {
        let fd: Int32
        do {
            fd = try retryingOnEINTR("eventfd") { cshim_eventfd_create() }
        } catch {
            preconditionFailure("SpindleRunLoop: cannot create its wakeup eventfd: \(error)")
        }
        self.descriptor = fd
    }

    deinit {
        // close(2) is not retried on EINTR: on Linux the descriptor is released even then, and retrying could
        // close a descriptor another thread just opened.
        let result = cshim_close(self.descriptor)
        precondition(result == 0 || cshim_errno() == EINTR, "close(eventfd) failed with error \(cshim_errno())")
    }

    /// Makes the descriptor readable, so the owner's poll returns. Any thread.
    func signal() {
        self.signals.add(1, ordering: .releasing)
        do {
            _ = try retryingOnEINTR("eventfd_write") { cshim_eventfd_signal(self.descriptor) }
        } catch {
            // EAGAIN: the counter is full, so the descriptor is already readable; the wakeup is not lost.
            guard case .system(_, let err) = error, err == EAGAIN else {
                preconditionFailure("SpindleRunLoop: eventfd_write failed: \(error)")
            }
        }
    }

    /// Resets the counter to zero. Owner thread only.
    func drain() {
        self.seenAtDrain = self.signals.load(ordering: .acquiring)
        var value: UInt64 = 0
        do {
            _ = try retryingOnEINTR("eventfd_read") { cshim_eventfd_drain(self.descriptor, &value) }
        } catch {
            // EAGAIN: nobody signalled since the last drain.
            guard case .system(_, let err) = error, err == EAGAIN else {
                preconditionFailure("SpindleRunLoop: eventfd_read failed: \(error)")
            }
        }
    }

    /// Sleeps in poll(2) on the wakeup descriptor and `watched` until one is ready or `deadline` passes.
    /// Owner thread only. On return, `watched[i].revents` says what each descriptor reported. An EINTR retries
    /// with the time left (the timeout is recomputed from the deadline on every try).
    func wait(watching watched: inout [pollfd], until deadline: SpindleDeadline) {
        if watched.isEmpty { self.spin(until: deadline) }
        var fds = [pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)]
        fds.append(contentsOf: watched)
        let count = fds.count
        do {
            _ = try fds.withUnsafeMutableBufferPointer { buffer throws(SpindleError) in
                try retryingOnEINTR("poll") {
                    cshim_poll(buffer.baseAddress, nfds_t(count), RunLoopWakeup.timeoutMilliseconds(until: deadline))
                }
            }
        } catch {
            preconditionFailure("SpindleRunLoop: poll failed: \(error)")
        }
        for index in watched.indices { watched[index].revents = fds[index + 1].revents }
    }

    /// Polls `signals` until it moves, the spin budget is spent, or `deadline` passes.
    private func spin(until deadline: SpindleDeadline) {
        var round = 0
        while round < RunLoopWakeup.spinRounds && self.signals.load(ordering: .relaxed) == self.seenAtDrain {
            if round & 15 == 15 && deadline != .distantFuture && deadline.hasPassed { return }
            for _ in 0..<8 { cshim_cpu_relax() }
            round += 1
        }
    }

    /// poll's timeout for `deadline`: -1 for never, otherwise whole milliseconds rounded *up*, so the loop never
    /// wakes before a timer is due (waking early would make it spin with 0 ms timeouts until the due time).
    static func timeoutMilliseconds(until deadline: SpindleDeadline) -> Int32 {
        if deadline == .distantFuture { return -1 }
        let now = cshim_clock_monotonic_ns()
        guard deadline.uptimeNanoseconds > now else { return 0 }
        let milliseconds = (deadline.uptimeNanoseconds - now + 999_999) / 1_000_000
        return Int32(clamping: milliseconds)
    }
}
