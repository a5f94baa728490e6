import CShim
import Glibc
import Synchronization
import Testing
@testable import Spindle

// Helpers for the operation suites (no suite here). Every name starts with `Op`/`op` so nothing clashes with the
// helpers of other test folders. Nothing sleeps as synchronisation: threads meet on semaphores with a generous
// deadline (`opDeadline`), so a broken library fails a test instead of hanging it.

/// The deadline of every wait that is expected to succeed.
let opDeadline: Duration = .seconds(10)

/// A fresh semaphore with no permits.
func opSemaphore() -> SpindleSemaphore { try! SpindleSemaphore(value: 0) }

/// A thread-safe append-only log.
final class OpLog<Element: Sendable>: Sendable {
    // A pthread mutex, which ThreadSanitizer sees (`Synchronization.Mutex` waits in the kernel, unseen by it).
    private let entries = SpindleLockedValue<[Element]>([])
    func add(_ element: Element) { self.entries.withLockedValue { $0.append(element) } }
    var all: [Element] { self.entries.withLockedValue { $0 } }
    var count: Int { self.entries.withLockedValue { $0.count } }
}

/// A thread-safe counter (an atomic integer that closures can capture).
final class OpCounter: Sendable {
    private let storage: Atomic<Int>
    init(_ value: Int = 0) { self.storage = Atomic(value) }
    @discardableResult func increment() -> Int { self.add(1) }
    @discardableResult func decrement() -> Int { self.add(-1) }
    @discardableResult func add(_ n: Int) -> Int { self.storage.add(n, ordering: .sequentiallyConsistent).newValue }
    func exchange(_ n: Int) -> Int { self.storage.exchange(n, ordering: .sequentiallyConsistent) }
    func store(_ n: Int) { self.storage.store(n, ordering: .sequentiallyConsistent) }
    var value: Int { self.storage.load(ordering: .sequentiallyConsistent) }
}

/// A thread-safe flag that closures can capture.
final class OpFlag: Sendable {
    private let storage = Atomic<Bool>(false)
    func set() { self.storage.store(true, ordering: .sequentiallyConsistent) }
    /// Sets the flag; returns whether this call was the one that set it.
    func setFirst() -> Bool { !self.storage.exchange(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { self.storage.load(ordering: .sequentiallyConsistent) }
}

/// A thread-safe slot for one value.
final class OpBox<Value: Sendable>: Sendable {
    private let storage: SpindleLockedValue<Value>  // a pthread mutex, seen by ThreadSanitizer
    init(_ value: Value) { self.storage = SpindleLockedValue(value) }
    var value: Value {
        get { self.storage.withLockedValue { $0 } }
        set { self.storage.withLockedValue { $0 = newValue } }
    }
}

/// A joinable Spindle thread that signals `done` when its body returns.
final class OpThread: Sendable {
    let thread: SpindleThread
    let done: SpindleSemaphore

    private init(thread: SpindleThread, done: SpindleSemaphore) {
        self.thread = thread
        self.done = done
    }

    static func run(_ name: String = "op-test", priority: Double = 0.5,
                    _ body: @escaping @Sendable () -> Void) throws -> OpThread {
        let done = opSemaphore()
        let thread = try SpindleThread.spawnJoinable(name: name, priority: priority) {
            body()
            done.signal()
        }
        return OpThread(thread: thread, done: done)
    }

    /// Waits (up to `opDeadline`) for the body to return and joins the thread; false if it is still running
    /// (then it is left alone: joining a hung thread would hang the test).
    func finish() -> Bool {
        guard self.done.wait(timeout: opDeadline) else { return false }
        try? self.thread.join()
        return true
    }
}

/// The case name of the `SpindleError` thrown by `body`, nil if nothing was thrown, "foreign: …" for another error.
func opErrorCase(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as SpindleError {
        return Mirror(reflecting: error).children.first?.label ?? "\(error)"
    } catch {
        return "foreign: \(error)"
    }
}

/// The `name` payload of a SpindleError case that carries one.
func opErrorName(_ error: SpindleError) -> String? {
    guard let child = Mirror(reflecting: error).children.first else { return nil }
    if let name = child.value as? String { return name }
    return Mirror(reflecting: child.value).children.first { $0.label == "name" }?.value as? String
}

/// The kernel nice value of thread `tid`, read through Glibc's getpriority (not through Spindle).
func opNiceValue(tid: Int32) -> Int32 {
    errno = 0
    return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(tid))
}

/// An operation whose `main` counts its runs and calls `body`; its completion block counts too.
final class OpProbe: SpindleOperation, @unchecked Sendable {
    let mainRuns = OpCounter()
    let completions = OpCounter()
    private let body: @Sendable (OpProbe) throws -> Void

    init(name: String? = nil, _ body: @escaping @Sendable (OpProbe) throws -> Void = { _ in }) {
        self.body = body
        super.init()
        self.name = name
        let completions = self.completions
        self.completionBlock = { completions.increment() }
    }

    override func main() throws {
        self.mainRuns.increment()
        try self.body(self)
    }
}

/// An asynchronous operation that only moves into `executing` when started; the test calls `finish()`.
final class OpManualAsync: SpindleOperation, @unchecked Sendable {
    let completions = OpCounter()
    override var isAsynchronous: Bool { true }

    override init() {
        super.init()
        let completions = self.completions
        self.completionBlock = { completions.increment() }
    }

    override func start() throws { try self.beginExecuting() }
}

extension SpindleOperation.Change {
    /// "will isExecuting", "did isFinished": the phase and the key, without the values `description` shows.
    var phaseAndKey: String { "\(self.phase) \(self.key)" }
}

/// Records every change delivered to one observer as "will isExecuting", "did isFinished", ….
func opRecordChanges(_ op: SpindleOperation,
                     keys: Set<SpindleOperation.Key> = Set(SpindleOperation.Key.allCases)) -> OpLog<String> {
    let log = OpLog<String>()
    op.observe(keys) { _, change in log.add(change.phaseAndKey) }
    return log
}

/// Breaches of the will/did protocol in a recorded change list: a `did` without its `will`, a second `will` before
/// the `did`, a `will` never followed by its `did`; and, when the list contains `did isFinished`, that it is not the
/// last change or that `did isExecuting` comes after it.
func opProtocolViolations(_ events: [String]) -> [String] {
    var problems: [String] = []
    var open: Set<Substring> = []
    for (index, event) in events.enumerated() {
        let parts = event.split(separator: " ")
        guard parts.count == 2 else { problems.append("#\(index) malformed '\(event)'"); continue }
        if parts[0] == "will" {
            if !open.insert(parts[1]).inserted { problems.append("#\(index) second 'will \(parts[1])' before its did") }
        } else if open.remove(parts[1]) == nil {
            problems.append("#\(index) 'did \(parts[1])' without a will")
        }
    }
    for key in open.sorted() { problems.append("'will \(key)' never followed by its did") }
    if let finished = events.firstIndex(of: "did isFinished") {
        if finished != events.count - 1 { problems.append("changes after 'did isFinished': \(events[(finished + 1)...])") }
        if let executing = events.lastIndex(of: "did isExecuting"), executing > finished {
            problems.append("'did isExecuting' after 'did isFinished'")
        }
    }
    return problems
}
