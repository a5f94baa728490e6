/// Why an operation was cancelled (`SpindleOperation.cancellationReason`).
public enum SpindleCancellationReason: Sendable, Equatable, CustomStringConvertible {
    /// `cancel()` was called (by you, `cancelAllOperations()`, an awaiting task's cancellation, …).
    case cancelled
    /// Its deadline (`cancel(at:)` / `cancel(after:)`) passed before it had finished.
    case deadlineExpired
    /// It has `cancelsOnFailedDependency` set and one of its dependencies failed (finished with an error) or
    /// was cancelled.
    case dependencyFailed

    /// "cancelled", "deadline expired" or "dependency failed". Any thread; throws nothing.
    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .deadlineExpired: return "deadline expired"
        case .dependencyFailed: return "dependency failed"
        }
    }
}
