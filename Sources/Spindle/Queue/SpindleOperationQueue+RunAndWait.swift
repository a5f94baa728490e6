/// Running a block on a queue and waiting for its value: `DispatchQueue.sync` for code ported from Dispatch (a
/// serial queue used as a lock or an executor is a queue of width 1).
extension SpindleOperationQueue {
    /// Runs `body` on one of this queue's threads, in its turn (after what was added before it, on a width-1
    /// queue), and returns its value, or rethrows its error. The calling thread blocks until then.
    ///
    /// `DispatchQueue.sync(execute:)`: where Dispatch deadlocks (or traps) when called from the queue itself,
    /// this throws `waitOnOwnQueue` and runs nothing. A suspended queue makes the caller wait until it is resumed.
    ///
    /// - Throws: `waitOnOwnQueue` when called from one of this queue's operations (or by the worker of a width-1
    ///   queue outside any operation, a deinit it runs: no other thread could run `body`); what `addOperation` throws
    ///   (`queueShutDown`, `queueFull`, `forkedChild`…), with nothing run; `resultOfCancelledOperation` if the
    ///   operation was cancelled (by `cancelAllOperations`) before `body` ran; else whatever `body` threw.
    public func addOperationAndWait<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) throws -> Value {
        if self.isOnlyThreadThatCouldServe { throw SpindleError.waitOnOwnQueue(name: self.name) }
        let box = ResultBox<Value>()
        let operation = SpindleBlockOperation { box.store(Result { try body() }) }
        try self.addOperation(operation)
        try operation.waitUntilFinished()
        guard let outcome = box.take() else { throw SpindleError.resultOfCancelledOperation(name: operation.displayName) }
        return try outcome.get()
    }
}

/// The outcome of one run, written by the worker and read by the waiting thread after `waitUntilFinished` (which
/// orders the two); a lock anyway, so the hand-over does not lean on that.
private final class ResultBox<Value: Sendable>: @unchecked Sendable {
    private let lock = SpindleLockedValue<Result<Value, any Error>?>(nil)
    func store(_ result: Result<Value, any Error>) { self.lock.withLockedValue { $0 = result } }
    func take() -> Result<Value, any Error>? { self.lock.withLockedValue { $0 } }
}
