import Glibc
import Spindle
import Synchronization

// The shared machinery of the stress binary: configuration, a seeded PRNG, the per-scenario context that
// counts operations and violations, output that several threads may write, thread helpers with bounded waits,
// the watchdog, and /proc counters.

// MARK: - Configuration

struct StressConfig: Sendable {
    var scenarios: [String]
    var duration: Double = 4.5
    var opsCap: Int = 2_000_000
    var threads: Int = 4
    var seed: UInt64
    var jsonPath: String? = nil
    var stallSeconds: Double = 20
    var faults = false
    /// `--pool N`: every harness queue runs on one shared pool of N threads instead of threads of its own.
    var poolThreads: Int? = nil
    let ncpu = spindleActiveProcessorCount()
}

/// The pool harness queues share under `--pool` (nil: each queue has its own threads). Set once, before any
/// scenario runs.
enum StressPool {
    nonisolated(unsafe) static var pool: SpindleThreadPool? = nil

    /// Makes the pool and starts all its threads (operations that wait for each other without a Spindle wait, so no
    /// stand-in is started), so that a scenario's thread baseline includes them.
    static func start(threads: Int) {
        let pool = try! SpindleThreadPool(name: "stress-pool", threadCount: threads)
        let queue = try! SpindleOperationQueue(name: "stress-pool-warmup", maxConcurrentOperationCount: threads, pool: pool)
        let arrived = Atomic<Int>(0)
        for _ in 0..<threads {
            queue.addOperation {
                arrived.add(1, ordering: .relaxed)
                let deadline = nowNs() + 5_000_000_000
                while arrived.load(ordering: .relaxed) < threads && nowNs() < deadline { _ = sched_yield() }
            }
        }
        try! queue.waitUntilAllOperationsAreFinished()
        StressPool.pool = pool
    }
}

// MARK: - PRNG

/// splitmix64: small, fast, and good enough to drive choices reproducibly from one seed.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// An independent stream for `index` (a thread, a round) derived from this generator's seed.
    static func derive(_ seed: UInt64, _ index: UInt64) -> SplitMix64 {
        var g = SplitMix64(seed: seed ^ (index &* 0xD1B5_4A32_D192_ED03))
        _ = g.next()
        return g
    }
    mutating func chance(_ p: Double) -> Bool { Double(self.next() >> 11) / Double(1 << 53) < p }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
    mutating func int(_ range: Range<Int>) -> Int { Int.random(in: range, using: &self) }
}

// MARK: - Time and output

/// Nanoseconds on CLOCK_MONOTONIC.
@inline(__always) func nowNs() -> UInt64 { SpindleDeadline.now.uptimeNanoseconds }

func sleepMicros(_ us: Int) {
    guard us > 0 else { return }
    var ts = timespec(tv_sec: us / 1_000_000, tv_nsec: (us % 1_000_000) * 1000)
    var left = timespec()
    while nanosleep(&ts, &left) == -1 && errno == EINTR { ts = left }
}

/// Busy-waits about `ns` nanoseconds (keeps a slot occupied without a syscall).
func spin(ns: UInt64) {
    guard ns > 0 else { return }
    let end = nowNs() &+ ns
    while nowNs() < end {}
}

enum Output {
    static let lock = SpindleLockedValue<Bool>(false)  // true while a progress line is on screen
    static let isTTY = isatty(1) == 1

    static func raw(_ fd: Int32, _ s: String) {
        var s = s
        s.withUTF8 { buf in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n <= 0 { if errno == EINTR { continue } else { return } }
                off += n
            }
        }
    }

    /// A full line on stdout, clearing a progress line first.
    static func line(_ s: String) {
        lock.withLockedValue { shown in
            if shown { raw(1, "\r\u{1B}[2K"); shown = false }
            raw(1, s + "\n")
        }
    }

    static func error(_ s: String) {
        lock.withLockedValue { shown in
            if shown { raw(1, "\r\u{1B}[2K"); shown = false }
            raw(2, s + "\n")
        }
    }

    /// Rewrites the progress line (terminals only).
    static func progress(_ s: String) {
        guard isTTY else { return }
        lock.withLockedValue { shown in
            raw(1, "\r\u{1B}[2K" + s)
            shown = true
        }
    }

    static func clearProgress() {
        lock.withLockedValue { shown in
            if shown { raw(1, "\r\u{1B}[2K"); shown = false }
        }
    }
}

func fmt(_ x: Double, _ digits: Int = 1) -> String {
    if !x.isFinite { return "\(x)" }
    var p = 1.0
    for _ in 0..<digits { p *= 10 }
    let r = (x * p).rounded() / p
    var s = "\(r)"
    if let dot = s.firstIndex(of: ".") {
        let decimals = s.distance(from: dot, to: s.endIndex) - 1
        if digits == 0 { s = String(s[..<dot]) } else if decimals < digits {
            s += String(repeating: "0", count: digits - decimals)
        }
    }
    return s
}

// MARK: - Scenario context

/// What a scenario reports: operations, invariants and their violation counts, figures, first examples.
struct ScenarioResult: Sendable {
    var name: String
    var ops: Int
    var seconds: Double
    var violations: [(String, Int)]
    var figures: [(String, String)]
    var examples: [String]
    var rssStart = -1
    var rssEnd = -1
    var total: Int { violations.reduce(0) { $0 + $1.1 } }
}

/// Shared by every thread of one scenario: thread-safe counters, violations and figures.
final class ScenarioContext: @unchecked Sendable {
    let name: String
    let config: StressConfig
    let seed: UInt64
    let startNs: UInt64
    let endNs: UInt64
    let ops = Atomic<Int>(0)
    let violationTotal = Atomic<Int>(0)
    private let state: SpindleLockedValue<(names: [String], counts: [String: Int], examples: [String], figures: [(String, String)])>

    init(name: String, invariants: [String], config: StressConfig, seed: UInt64) {
        self.name = name
        self.config = config
        self.seed = seed
        self.startNs = nowNs()
        self.endNs = self.startNs &+ UInt64(config.duration * 1e9)
        var counts: [String: Int] = [:]
        for i in invariants { counts[i] = 0 }
        self.state = SpindleLockedValue((invariants, counts, [], []))
    }

    /// Whether there is time and operation budget left.
    var running: Bool { nowNs() < self.endNs && self.ops.load(ordering: .relaxed) < self.config.opsCap }
    var timeLeftNs: UInt64 { let n = nowNs(); return n < self.endNs ? self.endNs - n : 0 }
    var opsLeft: Int { max(0, self.config.opsCap - self.ops.load(ordering: .relaxed)) }

    func count(_ n: Int = 1) { self.ops.add(n, ordering: .relaxed) }

    /// Records one violation of `invariant` (an example message is kept for the first few).
    func violation(_ invariant: String, _ message: @autoclosure () -> String, count: Int = 1) {
        guard count > 0 else { return }
        self.violationTotal.add(count, ordering: .relaxed)
        let text = message()
        let first = self.state.withLockedValue { s -> Bool in
            if s.counts[invariant] == nil { s.names.append(invariant) }
            s.counts[invariant, default: 0] += count
            if s.examples.count < 8 { s.examples.append("\(invariant): \(text)"); return s.examples.count <= 3 }
            return false
        }
        if first { Output.error("  ! [\(self.name)] \(invariant): \(text)") }
    }

    /// Records one figure (a measured value shown in the table's notes and the JSON report).
    func figure(_ key: String, _ value: String) {
        self.state.withLockedValue { s in
            if let i = s.figures.firstIndex(where: { $0.0 == key }) { s.figures[i].1 = value } else {
                s.figures.append((key, value))
            }
        }
    }

    func check(_ condition: Bool, _ invariant: String, _ message: @autoclosure () -> String) {
        if !condition { self.violation(invariant, message()) }
    }

    func result() -> ScenarioResult {
        let seconds = Double(nowNs() - self.startNs) / 1e9
        return self.state.withLockedValue { s in
            ScenarioResult(name: self.name, ops: self.ops.load(ordering: .relaxed), seconds: seconds,
                           violations: s.names.map { ($0, s.counts[$0] ?? 0) }, figures: s.figures,
                           examples: s.examples)
        }
    }

    // MARK: Queues

    /// A queue registered with the watchdog (which dumps it if the scenario stalls).
    func makeQueue(_ name: String, width: Int) -> SpindleOperationQueue {
        let q = if let pool = StressPool.pool {
            try! SpindleOperationQueue(name: name, maxConcurrentOperationCount: width, pool: pool)
        } else {
            try! SpindleOperationQueue(name: name, maxConcurrentOperationCount: width)
        }
        Watchdog.register(q)
        LiveObjects.track(q)
        return q
    }

    /// Waits (bounded) for every queue to drain; a queue that does not is a violation, dumped to stderr.
    @discardableResult
    func drain(_ queues: [SpindleOperationQueue], timeout: Duration = .seconds(15)) -> Bool {
        var ok = true
        let deadline = SpindleDeadline.after(timeout)
        for q in queues {
            let drained = (try? q.waitUntilAllOperationsAreFinished(until: deadline)) ?? false
            if !drained {
                ok = false
                self.violation("drain-timeout", "queue '\(q.name)' did not drain in \(timeout)")
                Output.error(q.debugDescription)
            }
        }
        return ok
    }
}

// MARK: - Threads

/// Runs `body(i)` on `count` joinable threads and waits (bounded) for all of them; joins them when they are
/// done. Returns false (and reports a violation) if some did not finish in time; those are left running.
@discardableResult
func runThreads(_ ctx: ScenarioContext, _ count: Int, name: String, timeout: Duration = .seconds(30),
                _ body: @escaping @Sendable (Int) -> Void) -> Bool {
    let done = try! SpindleSemaphore(value: 0)
    var threads: [SpindleThread] = []
    for i in 0..<count {
        let thread = spawnRetrying(name: "\(name)-\(i)") {
            body(i)
            done.signal()
        }
        if let thread {
            threads.append(thread)
        } else {
            ctx.violation("thread-spawn", "could not spawn \(name)-\(i) in 10 s of tries")
            done.signal()
        }
    }
    let deadline = SpindleDeadline.after(timeout)
    for _ in 0..<count where !done.wait(until: deadline) {
        ctx.violation("thread-stuck", "a '\(name)' thread did not finish within \(timeout)")
        return false
    }
    for t in threads { try? t.join() }
    return true
}

/// An atomic high-water mark.
final class HighWater: @unchecked Sendable {
    let current = Atomic<Int>(0)
    let peak = Atomic<Int>(0)
    func enter() -> Int {
        let now = self.current.add(1, ordering: .acquiringAndReleasing).newValue
        var seen = self.peak.load(ordering: .relaxed)
        while now > seen {
            let (done, actual) = self.peak.compareExchange(expected: seen, desired: now, ordering: .relaxed)
            if done { break }
            seen = actual
        }
        return now
    }
    func leave() { self.current.subtract(1, ordering: .acquiringAndReleasing) }
}

// MARK: - Watchdog and progress

/// One detached thread: refreshes the progress line, and when the running scenario makes no progress for
/// `stallSeconds` it prints every live queue's debugDescription and exits with status 3.
enum Watchdog {
    final class WeakQueue: @unchecked Sendable {
        weak var queue: SpindleOperationQueue?
        init(_ q: SpindleOperationQueue) { self.queue = q }
    }
    private static let queues = SpindleLockedValue<[WeakQueue]>([])
    private static let current = SpindleLockedValue<ScenarioContext?>(nil)

    static func register(_ q: SpindleOperationQueue) {
        queues.withLockedValue { list in
            list.removeAll { $0.queue == nil }
            list.append(WeakQueue(q))
        }
    }

    static func setScenario(_ ctx: ScenarioContext?) { current.withLockedValue { $0 = ctx } }

    static func start(stallSeconds: Double) {
        _ = spawnRetrying(name: "stress-watchdog", joinable: false) {
            var lastOps = -1
            var lastName = ""
            var lastChange = nowNs()
            var lastRateOps = 0
            var lastRateNs = nowNs()
            var windowRate: Double? = nil  // ops/s over the last 1 s window; nil until one has passed
            var lastPlainNs = nowNs()
            let plainEveryNs: UInt64 = 3_000_000_000
            while true {
                sleepMicros(200_000)
                guard let ctx = current.withLockedValue({ $0 }) else {
                    lastChange = nowNs()
                    continue
                }
                let ops = ctx.ops.load(ordering: .relaxed)
                let now = nowNs()
                if ctx.name != lastName {
                    lastName = ctx.name
                    lastRateOps = 0
                    lastRateNs = ctx.startNs
                    lastOps = -1
                    windowRate = nil
                    lastPlainNs = now
                }
                if ops != lastOps {
                    lastOps = ops
                    lastChange = now
                }
                if now - lastRateNs >= 1_000_000_000 {  // a 1 s sliding window after that
                    windowRate = Double(ops - lastRateOps) / (Double(now - lastRateNs) / 1e9)
                    lastRateOps = ops
                    lastRateNs = now
                }
                let elapsed = Double(now - ctx.startNs) / 1e9
                let rate = windowRate ?? (elapsed > 0 ? Double(ops) / elapsed : 0)
                let text = "[\(ctx.name)] \(fmt(elapsed))s  ops \(ops)  rate \(fmt(rate, 0))/s  "
                    + "violations \(ctx.violationTotal.load(ordering: .relaxed))"
                if Output.isTTY {
                    Output.progress(text)  // one line, rewritten in place
                } else if now - lastPlainNs >= plainEveryNs {
                    Output.line("  " + text)  // a plain line every few seconds (logs, pipes)
                    lastPlainNs = now
                }
                if Double(now - lastChange) / 1e9 >= stallSeconds {
                    armExitDeadline(seconds: 10)  // the dump takes each queue's lock, which the stall may hold
                    dump(ctx, stalledFor: Double(now - lastChange) / 1e9)
                    _exit(3)
                }
            }
        }
    }

    /// Ends the process with status 3 after `seconds`, whatever the other threads hold: SIGALRM, whose handler only
    /// writes a fixed line and calls `_exit` (both async-signal-safe). The dump's `debugDescription` takes each
    /// queue's lock; a stall that holds one for ever (a lock held while user code runs, say) would otherwise keep
    /// the dump, and the process, waiting for it.
    static func armExitDeadline(seconds: UInt32) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            let text: StaticString = "spindle-stress: WATCHDOG: the dump blocked (a queue's lock is held); exit 3\n"
            _ = write(2, text.utf8Start, text.utf8CodeUnitCount)  // static storage: nothing allocated here
            _exit(3)
        }
        sigemptyset(&action.sa_mask)
        sigaction(SIGALRM, &action, nil)
        alarm(seconds)
    }

    private static func dump(_ ctx: ScenarioContext, stalledFor: Double) {
        Output.error("\nspindle-stress: WATCHDOG: scenario '\(ctx.name)' made no progress for \(fmt(stalledFor)) s "
            + "(ops \(ctx.ops.load(ordering: .relaxed))); seed \(ctx.config.seed). Live queues:")
        let live = queues.withLockedValue { $0.compactMap { $0.queue } }
        for q in live { Output.error(q.debugDescription) }
        Output.error("spindle-stress: exiting with status 3; reproduce with --seed \(ctx.config.seed)")
    }
}

// MARK: - /proc counters

/// Entries in a /proc directory (minus "." and ".."), or -1 if it cannot be read.
func procEntries(_ path: String) -> Int {
    guard let dir = opendir(path) else { return -1 }
    defer { closedir(dir) }
    var n = 0
    while let e = readdir(dir) {
        let name = withUnsafePointer(to: e.pointee.d_name) { p in
            p.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
        }
        if name != "." && name != ".." { n += 1 }
    }
    return n
}

/// Threads of this process.
func threadCount() -> Int { procEntries("/proc/self/task") }
/// Open descriptors of this process (the one opendir uses is not counted: it is open while counting, so -1).
func fdCount() -> Int { procEntries("/proc/self/fd") - 1 }
