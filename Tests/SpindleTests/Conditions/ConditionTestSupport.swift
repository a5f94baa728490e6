import Synchronization
import Testing

@testable import Spindle

// Helpers for the condition and exclusivity suites. Names start with `CT`/`ct`. They reuse the queue suites'
// POSIX-semaphore oracles (`QTGate`, `QTLog`, `QTHighWater`, …); nothing sleeps as synchronisation. Every test
// uses its own category names (`ctCategory`), since categories are process-wide and suites run in parallel.

/// The error failing conditions carry.
struct CTError: Error, Equatable {
    let code: Int
}

/// A category name no other test uses.
func ctCategory(_ base: String) -> String { "\(base)-\(ctNextID.add(1, ordering: .relaxed).newValue)" }
private let ctNextID = Atomic<Int>(0)

/// A condition built from closures, counting its calls.
struct CTCondition: SpindleOperationCondition {
    let name: String
    let isMutuallyExclusive: Bool
    let produced = QTCounter()
    let evaluated = QTCounter()
    let produce: @Sendable (SpindleOperation) -> SpindleOperation?
    let decide: @Sendable (SpindleOperation) -> SpindleConditionResult

    init(_ name: String, exclusive: Bool = false,
         produce: @escaping @Sendable (SpindleOperation) -> SpindleOperation? = { _ in nil },
         decide: @escaping @Sendable (SpindleOperation) -> SpindleConditionResult = { _ in .satisfied }) {
        self.name = name
        self.isMutuallyExclusive = exclusive
        self.produce = produce
        self.decide = decide
    }

    func dependency(for operation: SpindleOperation) -> SpindleOperation? {
        self.produced.increment()
        return self.produce(operation)
    }

    func evaluate(for operation: SpindleOperation) -> SpindleConditionResult {
        self.evaluated.increment()
        return self.decide(operation)
    }
}

/// An operation that logs "name" to `log` when `main` runs, counts its runs and its completions, optionally
/// counts itself in `inside` (to find overlaps) and runs `body` in between.
final class CTOp: SpindleOperation, @unchecked Sendable {
    let runs = QTCounter()
    let completions = QTCounter()
    let log: QTLog<String>?
    let inside: QTHighWater?
    let body: @Sendable () throws -> Void

    init(_ name: String, log: QTLog<String>? = nil, inside: QTHighWater? = nil,
         body: @escaping @Sendable () throws -> Void = {}) {
        self.log = log
        self.inside = inside
        self.body = body
        super.init()
        self.name = name
        let completions = self.completions
        self.completionBlock = { completions.increment() }
    }

    override func main() throws {
        self.runs.increment()
        self.inside?.enter()
        defer { self.inside?.leave() }
        self.log?.append(self.displayName)
        try self.body()
    }
}

/// An operation of `category` that blocks in `main` until `release` is opened, telling `started` it began.
func ctBlockingHolder(_ name: String, category: String, log: QTLog<String>? = nil,
                      inside: QTHighWater? = nil) throws -> (CTOp, started: QTGate, release: QTGate) {
    let started = QTGate()
    let release = QTGate()
    let op = CTOp(name, log: log, inside: inside) {
        started.open()
        release.wait()
    }
    try op.addExclusivityCategory(category)
    return (op, started, release)
}

/// Waits (bounded) for `op` to finish; records an issue if it does not. Returns whether it finished, so a test
/// that repeats rounds can stop at the first failed one (rounds × qtDeadline would hang the run in effect).
@discardableResult
func ctFinish(_ op: SpindleOperation, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    let done = (try? op.waitUntilFinished(timeout: .seconds(qtDeadline))) ?? false
    #expect(done, "\(op.displayName) did not finish", sourceLocation: sourceLocation)
    return done
}

/// The `SpindleError.conditionFailed` an operation's `error` holds: (condition, underlying), or nil.
func ctConditionFailure(_ op: SpindleOperation) -> (condition: String, underlying: any Error)? {
    guard case .conditionFailed(_, let condition, let underlying)? = op.error as? SpindleError else { return nil }
    return (condition, underlying)
}
