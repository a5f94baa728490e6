/// Where the routes' blocking work runs: a bounded pool of threads that refuses work when full and gives each
/// piece of work a deadline. `SpindleWorkExecutor` is the service's; the benchmark adds one on NIOThreadPool, so
/// the same routes run on either.
///
/// Contract for conformers: `execute` returns once, with the work's outcome; it never throws. It refuses at once
/// (`.refused`) rather than queueing past its capacity. Once `timeout` has passed it answers `.deadlineExpired`
/// promptly and tells the work to stop (through the `WorkCancellation` it hands the work); work that has not
/// started by then never starts.
public protocol BlockingWorkExecutor: Sendable {
    /// Threads running work at once.
    var width: Int { get }

    /// Runs `work` on one of the executor's threads within `timeout` (counted from this call), suspending the
    /// calling task meanwhile. Cancelling the calling task answers `.abandoned` and tells the work to stop.
    func execute<Value: Sendable>(
        timeout: Duration,
        _ work: @escaping @Sendable (WorkCancellation) throws -> Value
    ) async -> WorkOutcome<Value>
}

/// How one piece of work submitted to a `BlockingWorkExecutor` ended.
public enum WorkOutcome<Value: Sendable>: Sendable {
    /// It ran to the end and returned this.
    case completed(Value)
    /// It threw this (not `WorkCancelled`).
    case failed(any Error)
    /// It was never accepted: the executor is full or shut down. Nothing ran.
    case refused(WorkRefusal)
    /// Its deadline passed first: it never started, or it was told to stop.
    case deadlineExpired
    /// The awaiting task was cancelled first: it never started, or it was told to stop.
    case abandoned
}

/// Why an executor refused work.
public enum WorkRefusal: Sendable, Hashable {
    /// As much work as it may hold is already waiting or running.
    case full
    /// It is shutting down or has shut down.
    case shutDown
}
