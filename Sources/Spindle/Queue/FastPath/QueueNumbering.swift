import Synchronization

/// Numbers queues created without a name ("SpindleOperationQueue N"). Any thread, any time; relaxed (only
/// uniqueness matters, not order).
enum QueueNumbering {
    private static let counter = Atomic<Int>(0)

    /// The next number, starting at 1.
    static func next() -> Int { self.counter.add(1, ordering: .relaxed).newValue }
}
