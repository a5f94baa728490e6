import Glibc

/// One paced run: builds the peer with `make`, warms it up (8 items handed over and waited for, so its threads exist
/// and have run), then hands it `load.ops` items on the load's schedule from the calling thread, waits for all to
/// start, tears the peer down and returns the figures. `begin` and `end` bracket the paced part (the benchmark
/// suite starts and stops its measurement there).
///
/// - The pacing thread sleeps to absolute deadlines (`clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`) with a
///   timer slack of 1 ns; when it wakes late it hands over what it owes at once, so the average pace holds.
/// - The calling thread is the pacing thread, and which thread that is matters: called from one of libdispatch's
///   worker threads (as package-benchmark calls every benchmark, from Swift concurrency's threads, which on Linux
///   are the default-QoS root queue's), it holds one of that pool's threads (one per CPU) for the whole run, so
///   `DispatchQueue.global()` and Foundation's `OperationQueue` run one thread short. `spindle-paced` calls it from
///   the main thread of its own process, where every peer has all its threads (`BENCHMARKS.md`).
public func runPacedLoad(
    _ load: PacedLoad, _ make: (StartStamps) -> PacedTarget, begin: () -> Void = {}, end: () -> Void = {}
) -> PacedResult {
    precondition(load.ops % load.burst == 0, "ops must be a multiple of the burst")
    let stamps = StartStamps(measured: load.ops)
    let target = make(stamps)
    for i in 0..<stamps.warmup {
        stamps.submitted[i] = monotonicNanoseconds()
        target.submit(i)
    }
    stamps.waitDrained()

    let slack = MinimalTimerSlack()
    begin()
    let wall0 = monotonicNanoseconds()
    let cpu0 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
    var deadline = wall0
    var i = stamps.warmup
    while i < stamps.total {
        deadline += load.period
        if monotonicNanoseconds() < deadline { sleepUntil(deadline) }  // behind schedule: catch up without a call
        for _ in 0..<load.burst {
            stamps.submitted[i] = monotonicNanoseconds()
            target.submit(i)
            i += 1
        }
    }
    stamps.waitDrained()
    let cpu1 = clockNanoseconds(CLOCK_PROCESS_CPUTIME_ID)
    let wall1 = monotonicNanoseconds()
    end()
    slack.restore()
    target.tearDown()

    let latency = stamps.latencyPercentiles([0.50, 0.99])
    let positions = load.burst > 1
        ? stamps.positionMedians(burst: load.burst, positions: [0, 1, 2, 4, 7, 8, 16, 32, 48, load.burst - 1]) : []
    return PacedResult(cpuPerOp: (cpu1 - cpu0) / load.ops, startP50: latency[0], startP99: latency[1],
                       wallPerOp: (wall1 - wall0) / load.ops, positions: positions)
}

@inline(__always) public func monotonicNanoseconds() -> Int { clockNanoseconds(CLOCK_MONOTONIC) }

@inline(__always) public func clockNanoseconds(_ clock: clockid_t) -> Int {
    var now = timespec()
    clock_gettime(clock, &now)
    return now.tv_sec * 1_000_000_000 + now.tv_nsec
}

/// Sleeps until `deadline` on the monotonic clock (absolute, so lateness does not add up over a run).
func sleepUntil(_ deadline: Int) {
    var ts = timespec(tv_sec: deadline / 1_000_000_000, tv_nsec: deadline % 1_000_000_000)
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR {}
}

/// Sets the calling thread's timer slack to 1 ns for the paced part (the default, 50 µs, lets the kernel end a
/// sleep up to 50 µs late, as much as the fastest pace), and puts the old value back. Only the pacing thread's
/// sleeps are affected, the same for every peer. `prctl` is variadic, so Swift does not import it: it is called
/// through a fixed prototype with integer arguments, which is how the kernel reads them.
struct MinimalTimerSlack {
    private typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    private static let setTimerSlack: Int32 = 29  // PR_SET_TIMERSLACK
    private static let getTimerSlack: Int32 = 30  // PR_GET_TIMERSLACK
    private let prctl: Prctl?
    private let previous: Int32

    init() {
        self.prctl = dlsym(nil, "prctl").map { unsafeBitCast($0, to: Prctl.self) }
        self.previous = self.prctl?(Self.getTimerSlack, 0, 0, 0, 0) ?? -1
        if self.previous > 0 { _ = self.prctl?(Self.setTimerSlack, 1, 0, 0, 0) }
    }

    func restore() {
        if self.previous > 0 { _ = self.prctl?(Self.setTimerSlack, UInt(self.previous), 0, 0, 0) }
    }
}
