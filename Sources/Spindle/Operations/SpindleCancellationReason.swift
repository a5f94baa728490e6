/// Why an operation was cancelled (`SpindleOperation.cancellationReason`).
public enum SpindleCancellationReason: Sendable, Equatable, CustomStringConvertible {
    /// `cancel()` was called (by you, `cancelAllOperations()`, an awaiting task's cancellation, …).
    case cancelled
    /// Its deadline (`cancel(at:)` / `cancel(after:)`) passed before it had finished.
    case deadlineExpired
    /// It has `cancelsOnFailedDependency` set and one of its dependencies failed (finished with an error) or
    /// was cancelled.
    case dependencyFailed
    /// One of its conditions failed (`SpindleOperationCondition.evaluate` returned `.failed`, or the dependency a
    /// condition produced could not be added); its `error` is the `SpindleError.conditionFailed` that says which.
    case conditionFailed

    /// "cancelled", "deadline expired", "dependency failed" or "condition failed". Any thread; throws nothing.
    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .deadlineExpired: return "deadline expired"
        case .dependencyFailed: return "dependency failed"
        case .conditionFailed: return "condition failed"
        }
    }
}
