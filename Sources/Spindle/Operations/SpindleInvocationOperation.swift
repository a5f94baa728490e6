/// An operation that calls one method of a target object with an argument and keeps the typed result
/// (NSInvocationOperation). Build it from a method reference: `SpindleInvocationOperation(target: counter,
/// method: Counter.add, argument: 5)`, or from a closure.
///
/// Guards: `outcome` under `outcomeLock` (inline), written once by `main`; the target and argument are immutable and
/// retained until the operation is released.
public final class SpindleInvocationOperation<Result: Sendable>: SpindleOperation, @unchecked Sendable {
    private let invoke: () throws -> Result
    private let outcomeLock = InlineLock()
    private var outcome: Swift.Result<Result, any Error>? = nil  // protected by outcomeLock
    /// The object whose method is called (nil for the closure form).
    public let target: AnyObject?

    /// Calls `method` on `target` with `argument`.
    public init<Target: AnyObject, Argument>(target: Target, method: @escaping (Target) -> (Argument) throws -> Result,
                                             argument: Argument) {
        self.target = target
        self.invoke = { try method(target)(argument) }
        super.init()
    }

    /// Calls `method` on `target` with no argument.
    public init<Target: AnyObject>(target: Target, method: @escaping (Target) -> () throws -> Result) {
        self.target = target
        self.invoke = { try method(target)() }
        super.init()
    }

    /// Calls `body`.
    public init(_ body: @escaping () throws -> Result) {
        self.target = nil
        self.invoke = body
        super.init()
    }

    /// Calls the method (or closure) once, unless the operation was cancelled, and keeps its result for `result()`.
    /// Runs on the thread that runs the operation (`start()`'s caller or a queue worker); not to be called directly.
    /// - Throws: whatever the method threw (kept in `error`; `result()` then throws `operationFailed`).
    public override func main() throws {
        guard !self.isCancelled else { return }
        let result = Swift.Result { try self.invoke() }
        self.outcomeLock.lock()
        self.outcome = result
        self.outcomeLock.unlock()
        if case .failure(let error) = result { throw error }
    }

    /// The method's return value.
    ///
    /// - Throws: `resultNotReady` before it finished; `resultOfCancelledOperation` if it was cancelled before the
    ///   method ran; `operationFailed` carrying the method's error; `voidResult` when the method returns nothing.
    public func result() throws(SpindleError) -> Result {
        guard self.isFinished else { throw .resultNotReady(name: self.displayName) }
        self.outcomeLock.lock()
        let stored = self.outcome
        self.outcomeLock.unlock()
        guard let outcome = stored else {
            throw .resultOfCancelledOperation(name: self.displayName)
        }
        switch outcome {
        case .failure(let error): throw .operationFailed(name: self.displayName, underlying: error)
        case .success(let value):
            if Result.self == Void.self { throw .voidResult(name: self.displayName) }
            return value
        }
    }
}
