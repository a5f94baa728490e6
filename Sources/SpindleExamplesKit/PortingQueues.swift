import Spindle

// Porting real NSOperation code (issue 22): the queue subclass with a delegate, and the Dispatch a porter finds
// beside the queues. The Foundation originals are in Docs/Guide.md, "Porting real NSOperation code".

// MARK: - d. The queue subclass with a delegate

/// The "Advanced NSOperations" sample's `OperationQueueDelegate`, kept as a protocol for the code that implements it.
protocol QueueDelegate: AnyObject, Sendable {
    func operationQueue(_ queue: SpindleOperationQueue, willAdd operation: SpindleOperation)
    func operationQueue(_ queue: SpindleOperationQueue, didFinish operation: SpindleOperation, error: (any Error)?)
}

/// The sample's `OperationQueue` subclass, ported: a queue whose hooks tell a delegate, held weakly as the
/// subclass's `weak var delegate` was. (The subclass's `addOperation` override attached an observer to each
/// operation to learn of its end; `didFinish` replaces it.)
func makeObservedQueue(name: String, delegate: any QueueDelegate) -> SpindleOperationQueue {
    let queue = SpindleOperationQueue(name: name)
    queue.hooks = SpindleOperationQueueHooks(
        willAdd: { [weak delegate] queue, operation in delegate?.operationQueue(queue, willAdd: operation) },
        didFinish: { [weak delegate] queue, operation, error in
            delegate?.operationQueue(queue, didFinish: operation, error: error)
        })
    return queue
}

/// A delegate that logs what its queue does.
final class ImportLog: QueueDelegate {
    let out: any ExampleOutput

    init(output: any ExampleOutput) { self.out = output }

    func operationQueue(_ queue: SpindleOperationQueue, willAdd operation: SpindleOperation) {
        self.out.line("\(queue.name): will add \(operation.displayName)")
    }

    func operationQueue(_ queue: SpindleOperationQueue, didFinish operation: SpindleOperation, error: (any Error)?) {
        let how = error.map { "ended with an error: \($0)" } ?? (operation.isCancelled ? "cancelled" : "done")
        self.out.line("\(queue.name): \(operation.displayName) \(how)")
    }
}

/// Counts for metrics, kept by a queue's hooks: what was added, started, and how each operation ended. Guards:
/// `counts` is under its own lock (a `SpindleLockedValue`); the hooks may be called from several threads at once.
final class QueueCounts: Sendable {
    private let counts = SpindleLockedValue<[String: Int]>([:])

    var hooks: SpindleOperationQueueHooks {
        SpindleOperationQueueHooks(
            didAdd: { _, _ in self.count("added") },
            willStart: { _, _ in self.count("started") },
            didFinish: { _, operation, error in
                self.count(error != nil ? "threw" : operation.isCancelled ? "cancelled" : "succeeded")
            })
    }

    private func count(_ key: String) { self.counts.withLockedValue { $0[key, default: 0] += 1 } }

    /// "added N, started N, succeeded N, threw N, cancelled N".
    var summary: String {
        let counts = self.counts.value
        return ["added", "started", "succeeded", "threw", "cancelled"].map { "\($0) \(counts[$0] ?? 0)" }
            .joined(separator: ", ")
    }
}

/// An import that could not be read.
struct ImportFailed: Error, CustomStringConvertible {
    var description: String { "unreadable file" }
}

// MARK: - e. A helper built on Dispatch

/// Before: a cache guarded by a concurrent `DispatchQueue`, reading with `sync` and writing with
/// `async(flags: .barrier)`. After: a `SpindleLockedValue`. On critical sections this short a mutex is as fast as a
/// reader-writer lock, and nothing hops to another thread. Guards: `sizes` is under its own lock.
final class ThumbnailCache: Sendable {
    private let sizes = SpindleLockedValue<[String: Int]>([:])

    func size(of key: String) -> Int? {
        self.sizes.withLockedValue { $0[key] }  // was: queue.sync { sizes[key] }
    }

    func store(_ size: Int, for key: String) {
        self.sizes.withLockedValue { $0[key] = size }  // was: queue.async(flags: .barrier) { self.sizes[key] = size }
    }

    var count: Int { self.sizes.withLockedValue { $0.count } }
}

extension SpindleExamples {
    /// d. A queue whose delegate hears of each add and each end, and a queue whose hooks keep counts for metrics.
    static func portQueueDelegate(_ out: any ExampleOutput) throws {
        let log = ImportLog(output: out)
        let imports = makeObservedQueue(name: "imports", delegate: log)
        imports.maxConcurrentOperationCount = 1
        let contacts = SpindleBlockOperation {}
        contacts.name = "contacts.csv"
        let photos = SpindleInvocationOperation { () throws -> Int in throw ImportFailed() }
        photos.name = "photos.zip"
        let notes = SpindleBlockOperation {}
        notes.name = "notes.txt"
        notes.cancel()
        try imports.addOperations([contacts, photos, notes])
        try imports.waitUntilAllOperationsAreFinished()

        let counts = QueueCounts()
        let work = SpindleOperationQueue(name: "work")
        work.hooks = counts.hooks
        let jobs = (0..<5).map { n in
            SpindleInvocationOperation { () throws -> Int in
                if n == 3 { throw ImportFailed() }
                return n
            }
        }
        jobs[4].cancel()
        try work.addOperations(jobs)
        try work.waitUntilAllOperationsAreFinished()
        out.line("work: \(counts.summary)")
    }

    /// e. Dispatch as ported code uses it: a serial queue as an executor, `DispatchGroup`, a reader-writer queue,
    /// a lock around a value, and quality of service.
    static func portDispatch(_ out: any ExampleOutput) throws {
        let journal = SpindleOperationQueue(name: "journal")
        journal.maxConcurrentOperationCount = 1  // was: DispatchQueue(label: "journal")
        let entries = SpindleLockedValue<[String]>([])
        journal.addOperation { entries.withLockedValue { $0.append("opened") } }  // was: journal.async { … }
        let count = try journal.addOperationAndWait { entries.withLockedValue { $0.count } }  // was: journal.sync
        out.line("journal: \(count) entry, read after what was added before")

        let client = FakeImageClient()
        let cache = ThumbnailCache()
        let group = SpindleWaitGroup(name: "thumbnails")  // was: DispatchGroup()
        for key in ["a.png", "b.png", "c.png"] {
            group.enter()
            client.fetch(key) { result in
                if case .success(let bytes) = result { cache.store(bytes.count, for: key) }
                try? group.leave()  // an unbalanced leave throws, where Dispatch traps
            }
        }
        let notified = group.notify(on: journal) { out.line("journal: \(cache.count) thumbnails fetched") }
        guard group.wait(timeout: .seconds(10)) else { throw ExampleFailure("the thumbnails never came") }
        try notified.waitUntilFinished()

        let index = try SpindleOperationQueue(name: "index", maxConcurrentOperationCount: 4)  // was: .concurrent
        let words = SpindleLockedValue<[String]>(["spindle"])
        for reader in 1...3 {
            index.addOperation { out.line("read \(reader): \(words.withLockedValue { $0.count }) word(s)") }
        }
        index.addBarrierBlock {  // was: index.async(flags: .barrier) { … }
            words.withLockedValue { $0.append("thread") }
            out.line("rebuild: alone, after the reads added before it")
        }
        index.addOperation { out.line("read 4: \(words.withLockedValue { $0.count }) word(s)") }
        try index.waitUntilAllOperationsAreFinished()

        let urgent = SpindleBlockOperation { out.line("urgent: ran") }
        urgent.queuePriority = .high  // was: urgent.qualityOfService = .userInitiated (order in its queue)
        urgent.threadPriority = 0.8  // and, if it matters, a higher priority for the thread while it runs
        try journal.addOperation(urgent)
        try urgent.waitUntilFinished()
    }
}
