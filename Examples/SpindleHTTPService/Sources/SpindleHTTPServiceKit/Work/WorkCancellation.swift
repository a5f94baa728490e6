/// How a piece of work asks whether it should stop early: the executor running it decides what "cancelled" means
/// (a Spindle operation's `isCancelled`, a flag set by a deadline timer). Work checks it between chunks and throws
/// `WorkCancelled` when it is set, so a cancelled request stops using its thread within one chunk.
public struct WorkCancellation: Sendable {
    private let probe: @Sendable () -> Bool

    /// A cancellation that reads `probe` each time it is asked.
    public init(_ probe: @escaping @Sendable () -> Bool) { self.probe = probe }

    /// Never cancelled: for running the work directly (tests, a reference computation).
    public static let never = WorkCancellation { false }

    /// Whether the work should stop now.
    public var isCancelled: Bool { self.probe() }

    /// Throws `WorkCancelled` if the work should stop now.
    public func check() throws(WorkCancelled) {
        if self.probe() { throw WorkCancelled() }
    }
}

/// Thrown by work that noticed its cancellation and stopped before finishing.
public struct WorkCancelled: Error, Sendable, Equatable {
    /// The error work throws when it stops early.
    public init() {}
}
