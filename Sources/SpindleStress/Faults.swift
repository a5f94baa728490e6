@_spi(Faults) import Spindle
import Glibc
import Synchronization

// The fault pass (`--faults`): the whole run with Spindle's fault seam on, process-wide (this binary is a process
// of its own), plus a signal storm. What is injected, each from the run's seed:
// - thread creation fails (EAGAIN) with probability `FaultPass.threadCreate`: queue workers (first and later),
//   block-operation helpers, concurrent operations' threads, the deadline timer, run-loop threads;
// - 1 % of condition waits return spuriously (every lock-and-condition wait in Spindle), and 5 % of queue workers'
//   parks;
// - 30 % of thread renames and priority changes fail;
// - a signal storm: SIGUSR1, installed without SA_RESTART, sent to the process every 200 µs, so blocking calls
//   (poll, futex waits, nanosleep) return EINTR all run long.
// The invariants are the same as in the normal pass, with one outcome added where the contract allows it: a
// concurrent operation whose thread could not start finishes with `SpindleError.system("pthread_create")`
// (counted, not a violation). The harness's own threads retry their start (`spawnRetrying`), so the faults it
// injects never end the run through the watchdog.
enum FaultPass {
    static let enabled = Atomic<Bool>(false)
    static let threadCreate = 0.2
    static let signalsSent = Atomic<Int>(0)
    static let stopStorm = Atomic<Bool>(false)

    static var isOn: Bool { self.enabled.load(ordering: .relaxed) }

    /// Turns the faults on for the rest of the run.
    static func start(seed: UInt64) {
        self.enabled.store(true, ordering: .relaxed)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in }  // nothing to do: the point is the EINTR
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART
        sigaction(SIGUSR1, &action, nil)
        // The storm's thread is started before the faults, so it cannot fail to start.
        _ = spawnRetrying(name: "stress-signals", joinable: false) {
            while !FaultPass.stopStorm.load(ordering: .relaxed) {
                kill(getpid(), SIGUSR1)
                FaultPass.signalsSent.add(1, ordering: .relaxed)
                sleepMicros(200)
            }
        }
        SpindleFaults.inject(.threadCreate, .probability(threadCreate, seed: seed))
        SpindleFaults.inject(.conditionWait, .probability(0.01, seed: seed &+ 1))
        SpindleFaults.inject(.park, .probability(0.05, seed: seed &+ 4))
        SpindleFaults.inject(.threadName, .probability(0.3, seed: seed &+ 2))
        SpindleFaults.inject(.threadPriority, .probability(0.3, seed: seed &+ 3))
    }

    /// Turns them off (before the summary) and reports what was injected.
    static func stop() -> String {
        self.stopStorm.store(true, ordering: .relaxed)
        let summary = SpindleFaults.Site.allCases.filter { SpindleFaults.calls($0) > 0 }.map {
            "\($0): \(SpindleFaults.injected($0))/\(SpindleFaults.calls($0)) failed"
        }
        SpindleFaults.reset()
        return "faults injected: " + summary.joined(separator: ", ")
            + "; signals sent: \(self.signalsSent.load(ordering: .relaxed))"
    }

    /// Whether `error` is the outcome a fault may cause: a thread that could not be started.
    static func isInjected(_ error: (any Error)?) -> Bool {
        guard self.isOn, let error = error as? SpindleError, case .system("pthread_create", EAGAIN) = error else {
            return false
        }
        return true
    }
}

/// Starts a harness thread, retrying (1 ms apart, for up to 10 s) while thread creation fails: the harness's own
/// threads are not under test. Returns nil only if every try failed.
func spawnRetrying(name: String, joinable: Bool = true, _ body: @escaping @Sendable () -> Void) -> SpindleThread? {
    for _ in 0..<10_000 {
        do {
            if joinable { return try SpindleThread.spawnJoinable(name: name, body) }
            return try SpindleThread.detach(name: name, body)
        } catch {
            sleepMicros(1000)
        }
    }
    return nil
}

/// `spawnRetrying` for a joinable thread, throwing `SpindleError.system` if every try failed.
func spawnRetryingOrThrow(name: String, _ body: @escaping @Sendable () -> Void) throws(SpindleError) -> SpindleThread {
    guard let thread = spawnRetrying(name: name, body) else { throw .system(function: "pthread_create", errno: EAGAIN) }
    return thread
}
