import Testing

@testable import Spindle

// Helpers for the group and producing suites. Names start with `GT`. Nothing sleeps as synchronisation: children
// and tests meet on POSIX semaphores (`QTGate`) with generous deadlines; polling (`qtWaitUntil`) only for weak
// references and /proc facts.

/// A child that counts its runs, logs its worker thread, opens `started`, optionally waits until `proceed()` or
/// its cancellation, runs `body`, and throws `failure` if given. Its completion block counts in `completions`.
final class GTChild: SpindleOperation, @unchecked Sendable {
    let runs = QTCounter()
    let started = QTGate()
    let waits: Bool
    let failure: BTError?
    let body: @Sendable (GTChild) throws -> Void
    private let wake = QTGate()
    /// The kernel thread ids that ran `main`.
    let tids = QTLog<Int32>()

    init(_ name: String, waits: Bool = false, throwing failure: BTError? = nil, completions: QTCounter? = nil,
         _ body: @escaping @Sendable (GTChild) throws -> Void = { _ in }) {
        self.waits = waits
        self.failure = failure
        self.body = body
        super.init()
        self.name = name
        if let completions { self.completionBlock = { completions.increment() } }
    }

    /// Lets a waiting `main` go on.
    func proceed() { self.wake.open() }

    override func main() throws {
        self.runs.increment()
        self.tids.append(qtTid())
        self.started.open()
        if self.waits && !self.isCancelled { self.wake.wait() }  // `proceed()` or `cancel()` opens it
        try self.body(self)
        if let failure = self.failure { throw failure }
    }

    override func cancel() {
        super.cancel()
        self.wake.open()
    }
}

/// Records, when `group` becomes finished (its `did isFinished`, delivered before its completion block), whether
/// every one of `children` had finished and run its completion block by then (`completions` reached the count).
final class GTFinishWitness: @unchecked Sendable {
    let finishedCount = QTCounter()
    let sawAllChildrenDone = QTFlag()
    let sawSomeChildUnfinished = QTFlag()

    init(_ group: SpindleGroupOperation, children: @escaping @Sendable () -> [SpindleOperation],
         completions: QTCounter? = nil, expected: Int? = nil) {
        group.observe([.isFinished]) { [finishedCount, sawAllChildrenDone, sawSomeChildUnfinished] _, change in
            guard change.phase == .did else { return }
            finishedCount.increment()
            let all = children()
            let completionsDone = completions.map { $0.count == (expected ?? all.count) } ?? true
            if all.allSatisfy(\.isFinished) && completionsDone {
                sawAllChildrenDone.set()
            } else {
                sawSomeChildUnfinished.set()
            }
        }
    }

    /// Finished exactly once, after every child.
    var finishedOnceAfterChildren: Bool {
        self.finishedCount.count == 1 && self.sawAllChildrenDone.isSet && !self.sawSomeChildUnfinished.isSet
    }
}

/// Waits for `op` with the tests' deadline; records an issue if it does not finish.
func gtWait(_ op: SpindleOperation, sourceLocation: SourceLocation = #_sourceLocation) {
    let finished = (try? op.waitUntilFinished(timeout: .seconds(qtDeadline))) ?? false
    #expect(finished, "'\(op.displayName)' did not finish", sourceLocation: sourceLocation)
}

/// The `BTError` codes of `errors`, in order (-1 for anything else).
func gtCodes(_ errors: [any Error]) -> [Int] { errors.map { ($0 as? BTError)?.code ?? -1 } }

/// The errors carried by a group's `childrenFailed` error (nil if it is not one).
func gtChildrenFailed(_ error: (any Error)?) -> [any Error]? {
    guard case .childrenFailed(_, let errors)? = error as? SpindleError else { return nil }
    return errors
}
