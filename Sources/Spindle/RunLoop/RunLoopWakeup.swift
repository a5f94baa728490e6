import CShim
import Glibc
import Synchronization

/// The run loop's wakeup descriptor and its one blocking call: an eventfd (`EFD_CLOEXEC|EFD_NONBLOCK`), as
/// CFRunLoop uses on Linux, waited on with poll(2) together with the descriptors of the mode being run.
///
/// Guards and confinement:
/// - `descriptor` (an atomic) is opened in `init`, or, if that failed (EMFILE: out of descriptors), by the owner
///   in `open()` before each run, which throws the error instead; once open it never changes until `deinit`
///   closes it. -1 → fd, forward only, by the owner (or `init`).
/// - `signal()` may be called from any thread, any number of times (the kernel counter coalesces them).
/// - `drain()` and `wait(...)` are called only by the thread that owns the run loop.
/// - `seenAtDrain` and `spinPolicy` are plain stored properties of the owner thread (read and written only in
///   `drain` and `wait`), so they need no lock.
/// - `signals` and `firstSignalAt` are atomics shared by the signallers and the owner (see below).
///
/// State machine of the counter: zero (the loop may sleep) → non-zero after any `signal()` (the descriptor is
/// readable: a poll returns at once) → zero again after `drain()`. Because the owner drains *before* it looks
/// for work and every producer publishes its work *before* signalling, a wakeup can never be lost. While the
/// descriptor is not open yet, `signal()` only counts (there is nothing to write to, and no run is waiting); the
/// owner's store of the descriptor and a signaller's count are a Dekker pair (both sequentially consistent):
/// either the signaller sees the descriptor and writes, or the owner's next `drain()` sees the count, and the
/// owner looks for work after draining.
///
/// Spinning: `signals` (atomic) counts `signal()` calls; `seenAtDrain` (owner only) is its value at the last drain.
/// Before sleeping with no descriptors to watch, the owner polls `signals` for `spinPolicy.budgetNanos` (0 or
/// `SpinPolicy.window`, 16 µs, in `SpinPolicy.spin`): work sent from another core then costs no kernel wakeup (tens of
/// microseconds on a virtual machine), and a spin that sees a signal returns without calling poll. A COLD policy (a
/// new loop, or one woken every 50 µs or more) goes straight to poll. The spin never outlasts the wait's deadline.
///
/// What the owner tells its policy (owner thread, in `wait`): `spinMissed()` when a spin used its whole budget
/// with no signal (it polls next); `workArrived(afterIdleNanos:)` when a signal came during the wait (or between
/// the last drain and the wait), with the gap from entering `wait` to the time the first signaller stamped in
/// `firstSignalAt` (so a poll's wake latency, which a spin would not have waited, is not counted), or to the time
/// the owner noticed the signal if none was stamped. Nothing is reported when the wait ends by its deadline or
/// for a watched descriptor alone: the spin watches only `signals`, and a timer is not a signal.
///
/// `firstSignalAt` (atomic, written by signallers and the owner): `notIdle` while the owner is not in `wait`;
/// the owner stores `idleUnstamped` on entering `wait`; the first `signal()` that sees `idleUnstamped` replaces it
/// with the time (compare-and-exchange, so later signals keep the first stamp; the signaller reads the clock only
/// then, when a wake follows anyway); the owner takes it back to `notIdle` when `wait` returns. It is a hint for
/// the policy only: a signal racing with the owner going idle may go unstamped, and the owner then uses the time
/// it noticed the signal.
final class RunLoopWakeup: @unchecked Sendable {
    /// The eventfd, or -1 until one could be opened (see above).
    private let descriptorStorage = Atomic<Int32>(-1)
    /// How many times `signal()` was called (a hint for the owner's spin).
    let signals = Atomic<UInt>(0)
    /// When the first signal of the owner's current wait came (monotonic ns), or `notIdle`/`idleUnstamped`.
    let firstSignalAt = Atomic<UInt64>(RunLoopWakeup.notIdle)
    /// `signals` when the owner last drained. Owner thread only.
    private var seenAtDrain: UInt = 0
    /// How long to spin before poll, learned from this loop's waits. Owner thread only (read and updated in
    /// `wait`, which only the owner calls), so a plain stored property with no lock.
    var spinPolicy = SpinPolicy()
    /// `firstSignalAt` while the owner is not waiting.
    static let notIdle: UInt64 = 0
    /// `firstSignalAt` while the owner waits and no signal has stamped it yet.
    static let idleUnstamped: UInt64 = .max

    /// Opens the eventfd if it can; if the process is out of descriptors, the loop's first run throws instead.
    init() { try? self.open() }

    deinit {
        // close(2) is not retried on EINTR: on Linux the descriptor is released even then, and retrying could
        // close a descriptor another thread just opened.
        let fd = self.descriptorStorage.load(ordering: .relaxed)
        guard fd >= 0 else { return }
        let result = cshim_close(fd)
        precondition(result == 0 || cshim_errno() == EINTR, "close(eventfd) failed with error \(cshim_errno())")
    }

    /// The open descriptor. Owner thread only, after `open()` succeeded.
    private var descriptor: Int32 { self.descriptorStorage.load(ordering: .relaxed) }

    /// Opens the eventfd unless it is open. Owner thread only (and `init`); a run calls it before anything else.
    /// - Throws: `SpindleError.system(function: "eventfd", ...)` (EMFILE, ENFILE, ENOMEM); nothing is left open.
    func open() throws(SpindleError) {
        if self.descriptorStorage.load(ordering: .relaxed) >= 0 { return }
        let fd = try retryingOnEINTR("eventfd") { cshim_eventfd_create() }
        self.descriptorStorage.store(fd, ordering: .sequentiallyConsistent)
    }

    /// Makes the descriptor readable, so the owner's poll returns. Any thread.
    func signal() {
        if self.firstSignalAt.load(ordering: .relaxed) == RunLoopWakeup.idleUnstamped {
            _ = self.firstSignalAt.compareExchange(
                expected: RunLoopWakeup.idleUnstamped, desired: cshim_clock_monotonic_ns(), ordering: .relaxed)
        }
        self.signals.add(1, ordering: .sequentiallyConsistent)
        let fd = self.descriptorStorage.load(ordering: .sequentiallyConsistent)
        guard fd >= 0 else { return }  // not open: the owner's drain sees the count (see above)
        do {
            _ = try retryingOnEINTR("eventfd_write") { cshim_eventfd_signal(fd) }
        } catch {
            // EAGAIN: the counter is full, so the descriptor is already readable; the wakeup is not lost.
            guard case .system(_, let err) = error, err == EAGAIN else {
                preconditionFailure("SpindleRunLoop: eventfd_write failed: \(error)")
            }
        }
    }

    /// Resets the counter to zero. Owner thread only.
    func drain() {
        self.seenAtDrain = self.signals.load(ordering: .sequentiallyConsistent)
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

    /// Sleeps in poll(2) on the wakeup descriptor and `watched` until one is ready or `deadline` passes, after
    /// spinning first if `watched` is empty and the policy says so (a spin that sees a signal returns without
    /// polling). Owner thread only. On return, `watched[i].revents` says what each descriptor reported. An EINTR
    /// retries with the time left (the timeout is recomputed from the deadline on every try).
    func wait(watching watched: inout [pollfd], until deadline: SpindleDeadline) {
        let idleSince = cshim_clock_monotonic_ns()
        self.firstSignalAt.store(RunLoopWakeup.idleUnstamped, ordering: .relaxed)
        defer { self.reportWait(idleSince: idleSince) }
        let budget = self.spinPolicy.budgetNanos
        if watched.isEmpty && budget > 0 {
            let end = SpinPolicy.spin(from: idleSince, budget: budget, until: deadline.uptimeNanoseconds) {
                self.signals.load(ordering: .relaxed) != self.seenAtDrain
            }
            switch end {
            case .seen: return
            case .budgetSpent: self.spinPolicy.spinMissed()
            case .deadlinePassed: break
            }
        }
        var fds = [pollfd(fd: self.descriptor, events: Int16(POLLIN), revents: 0)]
        fds.append(contentsOf: watched)
        _ = RunLoopWakeup.poll(&fds, until: deadline)
        for index in watched.indices { watched[index].revents = fds[index + 1].revents }
    }

    /// Ends a wait that began at `idleSince`: disarms `firstSignalAt` and, if a signal came, tells the policy when.
    /// Owner thread only.
    func reportWait(idleSince: UInt64) {
        let stamp = self.firstSignalAt.exchange(RunLoopWakeup.notIdle, ordering: .relaxed)
        let stamped = stamp != RunLoopWakeup.idleUnstamped  // a signaller is past its stamp, maybe not yet counted
        guard stamped || self.signals.load(ordering: .relaxed) != self.seenAtDrain else { return }
        // Unstamped: the signal came before (or as) the owner went idle; it is noticed now.
        let arrivedAt = stamped ? stamp : cshim_clock_monotonic_ns()
        self.spinPolicy.workArrived(afterIdleNanos: arrivedAt > idleSince ? arrivedAt - idleSince : 0)
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

extension RunLoopWakeup {
    /// poll(2) on `fds` until `deadline` (`.now`: a look), retrying on EINTR; returns how many entries reported.
    /// Never traps on what the process's limits can cause (each reported once per process and errno, as
    /// `SpindleDiagnosticEvent.runLoopPollFailed`):
    /// - EINVAL, more entries than RLIMIT_NOFILE allows (a limit lowered after they were added; `add` refuses past
    ///   it): polls the first entries the limit allows (the wakeup descriptor, first, among them);
    /// - ENOMEM: waits up to 1 ms (not past `deadline`) and reports no event, so the caller's pass looks again.
    /// EBADF and EFAULT are Spindle's bugs (`retryingOnEINTR` traps). Any thread; no lock held.
    static func poll(_ fds: inout [pollfd], until deadline: SpindleDeadline) -> Int32 {
        var count = fds.count
        while true {
            let watching = count
            do {
                return try fds.withUnsafeMutableBufferPointer { buffer throws(SpindleError) in
                    try retryingOnEINTR("poll") {
                        let timeout = RunLoopWakeup.timeoutMilliseconds(until: deadline)
                        return cshim_poll(buffer.baseAddress, nfds_t(watching), timeout)
                    }
                }
            } catch {
                guard case .system(_, let errno) = error else { return 0 }
                let limit = cshim_nofile_soft_limit()
                if errno == EINVAL && limit > 0 && Int64(count) > limit {
                    count = Int(limit)
                    RunLoopWakeup.reportOnce(errno: errno, watched: fds.count, polled: count)
                    continue
                }
                RunLoopWakeup.reportOnce(errno: errno, watched: fds.count, polled: 0)
                let now = cshim_clock_monotonic_ns()
                let pause = min(1_000_000, deadline.uptimeNanoseconds > now ? deadline.uptimeNanoseconds - now : 0)
                var request = timespec(tv_sec: 0, tv_nsec: Int(pause))
                _ = nanosleep(&request, nil)
                return 0
            }
        }
    }

    /// Errnos already reported by `poll` (bit `errno & 63`), so a lasting failure is reported once, not per pass.
    private static let reported = Atomic<UInt64>(0)

    private static func reportOnce(errno: Int32, watched: Int, polled: Int) {
        let bit = UInt64(1) << UInt64(errno & 63)
        if RunLoopWakeup.reported.bitwiseOr(bit, ordering: .relaxed).oldValue & bit != 0 { return }
        SpindleDiagnostics.report(.runLoopPollFailed(errno: errno, watched: watched, polled: polled))
    }
}
