import Synchronization

/// Counts of how the work requests ended, kept by the routes (whatever the executor): what `/stats` shows and
/// the shutdown summary logs. Each count is its own atomic; a reading of all of them is not one instant.
public final class RequestTally: Sendable {
    private let completed = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let refusedFull = Atomic<Int>(0)
    private let refusedShutDown = Atomic<Int>(0)
    private let deadlineExpired = Atomic<Int>(0)
    private let abandoned = Atomic<Int>(0)

    /// All counts zero.
    public init() {}

    /// Counts one outcome. Any thread.
    public func record<Value>(_ outcome: WorkOutcome<Value>) {
        switch outcome {
        case .completed: self.completed.add(1, ordering: .relaxed)
        case .failed: self.failed.add(1, ordering: .relaxed)
        case .refused(.full): self.refusedFull.add(1, ordering: .relaxed)
        case .refused(.shutDown): self.refusedShutDown.add(1, ordering: .relaxed)
        case .deadlineExpired: self.deadlineExpired.add(1, ordering: .relaxed)
        case .abandoned: self.abandoned.add(1, ordering: .relaxed)
        }
    }

    /// The counts now.
    public var counts: Counts {
        Counts(
            completed: self.completed.load(ordering: .relaxed),
            failed: self.failed.load(ordering: .relaxed),
            refusedFull: self.refusedFull.load(ordering: .relaxed),
            refusedShutDown: self.refusedShutDown.load(ordering: .relaxed),
            deadlineExpired: self.deadlineExpired.load(ordering: .relaxed),
            abandoned: self.abandoned.load(ordering: .relaxed)
        )
    }

    /// One reading of the counts.
    public struct Counts: Sendable, Equatable, CustomStringConvertible {
        /// Answered 200.
        public var completed: Int
        /// The work threw: answered 500.
        public var failed: Int
        /// Refused by a full executor: answered 503.
        public var refusedFull: Int
        /// Refused by an executor shutting down: answered 503.
        public var refusedShutDown: Int
        /// Deadline missed: answered 504.
        public var deadlineExpired: Int
        /// The request's task was cancelled (its client went away).
        public var abandoned: Int

        /// Requests the executor accepted: everything but refusals.
        public var accepted: Int { self.completed + self.failed + self.deadlineExpired + self.abandoned }

        /// One line with every count.
        public var description: String {
            "accepted \(self.accepted) (200: \(self.completed), 504: \(self.deadlineExpired), 500: \(self.failed), "
                + "abandoned: \(self.abandoned)), refused \(self.refusedFull + self.refusedShutDown) "
                + "(full: \(self.refusedFull), shut down: \(self.refusedShutDown))"
        }
    }
}
