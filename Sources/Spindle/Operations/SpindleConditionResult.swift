/// What `SpindleOperationCondition.evaluate(for:)` decided (the sample's `OperationConditionResult`).
public enum SpindleConditionResult: Sendable {
    /// The operation may run.
    case satisfied
    /// The operation must not run: it finishes unrun, its `error` a `SpindleError.conditionFailed` carrying this
    /// error, its `cancellationReason` `.conditionFailed`.
    case failed(any Error)

    /// Whether this is `.satisfied`. Any thread; throws nothing.
    public var isSatisfied: Bool {
        if case .satisfied = self { return true }
        return false
    }
}
